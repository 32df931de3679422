package facts

import (
	"errors"
	"strings"
	"testing"
)

// Values written straight to etcd, past `apply`, are as invalid as the
// files apply refuses: the schema holds the same limits.
func TestValueLimits(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	cases := []struct {
		key, raw string
		limit    string // the LimitError's Name, or "" for a TextError
	}{
		{"auth/user:alice/rules", `{"a": "` + strings.Repeat("x", 10<<20) + `"}`, "MaxValueBytes"},
		{"auth/user:alice/rules", deep, "MaxValueDepth"},
		{"auth/user:alice/rules", strings.Repeat(`{"a": `, MaxValueDepth+1) + "1" + strings.Repeat("}", MaxValueDepth+1), "MaxValueDepth"},
		{"desired/service/web/image", `"` + strings.Repeat("a", 5<<20) + `"`, "MaxValueBytes"},
		{"desired/service/web/image", `"` + strings.Repeat("a", MaxImageBytes+1) + `"`, "MaxImageBytes"},
		{"desired/service/web/health/path", `"/` + strings.Repeat("a", MaxPathBytes) + `"`, "MaxPathBytes"},
		{"desired/service/web/instances", `1000000000`, "MaxInstances"},
		{"intent/autoscaler/service/web/instances", `10001`, "MaxInstances"},
		{"effective/service/web/instances", `10001`, "MaxInstances"},
		{"desired/service/web/image", "\"nginx\u202e:1.28\"", ""},
		{"desired/service/web/image", `"nginx\u202e:1.28"`, ""}, // as a JSON escape too
		{"observed/instance/a8f31/image", `"nginx\u0000"`, ""},
		{"desired/service/web/health/path", "\"/a\u2028b\"", ""},
	}
	for _, tc := range cases {
		_, err := Default.Validate(tc.key, []byte(tc.raw))
		var lim *LimitError
		var txt *TextError
		switch {
		case err == nil:
			t.Errorf("%s = %.40s... accepted", tc.key, tc.raw)
		case tc.limit != "" && (!errors.As(err, &lim) || lim.Name != tc.limit):
			t.Errorf("%s: %v; want the limit %s", tc.key, err, tc.limit)
		case tc.limit == "" && !errors.As(err, &txt):
			t.Errorf("%s: %v; want a character refused", tc.key, err)
		case len(err.Error()) > 400 || strings.ContainsAny(err.Error(), "\u202e\u2028\x00"):
			t.Errorf("%s: the error repeats the value: %.500q", tc.key, err.Error())
		}
	}
	for key, raw := range map[string]string{
		"desired/service/web/instances": "10000",
		"desired/service/web/image":     `"` + strings.Repeat("a", MaxImageBytes) + `"`,
		"auth/user:alice/rules":         strings.Repeat("[", MaxValueDepth) + strings.Repeat("]", MaxValueDepth),
		"observed/instance/a8f31/image": `"registry.example/日本/nginx:1.28"`,
	} {
		if _, err := Default.Validate(key, []byte(raw)); err != nil {
			t.Errorf("%s at the limit refused: %v", key, err)
		}
	}
}

func TestJSONTooDeepSkipsStrings(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int
	}{
		{`[[[]]]`, -1},
		{`[[[[]]]]`, 3},
		{`["[[[[[[", "\"[[[[["]`, -1},
		{`{"a": [{"b": 1}]}`, -1},
		{`{"a": [{"b": [1]}]}`, 13},
	} {
		if got := jsonTooDeep([]byte(tc.raw), 3); got != tc.want {
			t.Errorf("jsonTooDeep(%s, 3) = %d, want %d", tc.raw, got, tc.want)
		}
	}
}

// FuzzDecodeValue feeds any bytes to the decoder of every built-in value
// type: it returns a value or an error, never panics, accepts nothing over
// MaxValueBytes or MaxValueDepth, and what it accepts encodes back to a
// value it accepts again.
func FuzzDecodeValue(f *testing.F) {
	f.Add([]byte(`{"ip": "10.1.0.5", "port": 8080}`))
	f.Add([]byte(`"nginx:1.28"`))
	f.Add([]byte(strings.Repeat("[", 100000) + strings.Repeat("]", 100000))) // 100,000 levels
	f.Add([]byte(`{"a": "` + strings.Repeat("x", 10<<20) + `"}`))            // 10 MB
	types := Default.Types()
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, ft := range types {
			v, err := ft.Value.Decode(raw)
			if err != nil {
				continue
			}
			if len(raw) > MaxValueBytes || jsonTooDeep(raw, MaxValueDepth) >= 0 {
				t.Fatalf("%s accepted a value over the limits (%d bytes)", ft.Name, len(raw))
			}
			again, err := ft.Value.Encode(v)
			if err != nil {
				t.Fatalf("%s: %q decodes to %#v, which does not encode: %v", ft.Name, raw, v, err)
			}
			if _, err := ft.Value.Decode(again); err != nil {
				t.Fatalf("%s: %q re-encodes to %q, which does not decode: %v", ft.Name, raw, again, err)
			}
		}
	})
}
