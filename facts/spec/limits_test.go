package spec

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
)

// A hostile or mistaken service file is refused with a diagnostic that
// names the limit, points where it was crossed, and renders nothing.
func TestDecodeLimits(t *testing.T) {
	ports := make([]string, facts.MaxExposePorts+1)
	for i := range ports {
		ports[i] = fmt.Sprint(8000 + i)
	}
	labels := make([]string, facts.MaxMapEntries+1)
	for i := range labels {
		labels[i] = fmt.Sprintf("l%03d = \"x\"", i)
	}
	cases := []struct {
		name, src string
		want      string // the first diagnostic, as DiagString renders it, up to its first ';' or '.' of Detail
		at        string // the file's text at the diagnostic's start
	}{
		{"100,000 nested brackets", "service \"web\" {\n  instances = " + strings.Repeat("[", 100000) + "\n}\n",
			"f.hcl:2:114: File nests deeper than 100 levels (MaxNestingDepth)", "["},
		{"a file over MaxFileBytes", "service \"web\" {\n  image = \"" + strings.Repeat("a", facts.MaxFileBytes) + "\"\n}\n",
			fmt.Sprintf("f.hcl:2:%d: File larger than %d bytes (MaxFileBytes)", facts.MaxFileBytes-16+1, facts.MaxFileBytes), "a"},
		{"a billion instances", "service \"web\" {\n  instances = 1000000000\n}\n",
			"f.hcl:2:15: instances = 1000000000 is over the limit of 10000 instances (MaxInstances)", "1"},
		{"an autoscaler range past the limit", "service \"web\" {\n  autoscale { max = 20000 }\n}\n",
			"f.hcl:2:21: max = 20000 is over the limit of 10000 instances (MaxInstances)", "2"},
		{"an image of 2,000 bytes", "service \"web\" {\n  image = \"" + strings.Repeat("a", 2000) + "\"\n}\n",
			"f.hcl:2:1036: image of 2000 bytes is over the limit of 1024 (MaxImageBytes)", "a"},
		{"a right-to-left override in an image", "service \"web\" {\n  image = \"nginx\u202e:1.28\"\n}\n",
			`f.hcl:2:17: Character U+202E not allowed in "image"`, "\u202e"},
		{"a bell in a health path", "service \"web\" {\n  health { path = \"/ok\\u0007\" }\n}\n",
			`f.hcl:2:19: Character U+0007 not allowed in "path"`, `"`},
		{"a newline in an image", "service \"web\" {\n  image = \"nginx\\n1\"\n}\n",
			`f.hcl:2:11: Character U+000A not allowed in "image"`, `"`},
		{"too many ports", "service \"web\" {\n  expose = [" + strings.Join(ports, ", ") + "]\n}\n",
			"f.hcl:2:" + fmt.Sprint(13+6*facts.MaxExposePorts) + ": More than 100 ports (MaxExposePorts)", "8"},
		{"too many labels", "service \"web\" {\n  labels = { " + strings.Join(labels, ", ") + " }\n}\n",
			"f.hcl:2:" + fmt.Sprint(14+12*facts.MaxMapEntries) + `: More than 128 entries in "labels" (MaxMapEntries)`, "l"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc, diags := Decode(Source{Name: "f.hcl", Bytes: []byte(tc.src)})
			if !diags.HasErrors() {
				t.Fatal("accepted")
			}
			got := DiagString(diags[0])
			if !strings.HasPrefix(got, tc.want+": ") {
				t.Errorf("diagnostic\n  %.300s\nwant it to start with\n  %s", got, tc.want)
			}
			if s := diags[0].Subject; s == nil || !strings.HasPrefix(tc.src[s.Start.Byte:], tc.at) {
				t.Errorf("subject %v does not start at %q", s, tc.at)
			}
			if len(got) > 1000 {
				t.Errorf("the diagnostic is %d bytes: it repeats the input", len(got))
			}
			if len(doc.Facts()) > 0 {
				t.Errorf("rendered %d facts", len(doc.Facts()))
			}
			var out bytes.Buffer
			if err := WriteDiagnostics(&out, doc.Files, diags); err != nil {
				t.Fatal(err)
			}
			if out.Len() > 2000 || strings.ContainsRune(out.String(), '\u202e') {
				t.Errorf("the printed diagnostics are %d bytes or hold the override:\n%.2000s", out.Len(), out.String())
			}
		})
	}
}

// The limits hold right at their values: exactly MaxInstances is fine.
func TestDecodeAtTheLimits(t *testing.T) {
	src := fmt.Sprintf("service \"web\" {\n  image = %q\n  instances = %d\n  expose = [%s]\n}\n",
		strings.Repeat("a", facts.MaxImageBytes), facts.MaxInstances, strings.TrimSuffix(strings.Repeat("1,", 1), ","))
	if _, diags := Decode(Source{Name: "f.hcl", Bytes: []byte(src)}); diags.HasErrors() {
		t.Fatalf("refused at the limits: %s", diags.Error())
	}
}

// A change over a value written straight to etcd prints a short, clean
// line, whatever that value holds.
func TestChangeStringShortens(t *testing.T) {
	c := Change{Op: OpChange, Key: "desired/service/web/image",
		Old: []byte(`"` + strings.Repeat("a", 10<<20) + `"`), New: []byte("\"nginx\u202e:1.28\"")}
	s := c.String()
	if len(s) > 600 || strings.ContainsRune(s, '\u202e') || !strings.Contains(s, `\u202e`) || !strings.HasPrefix(s, `~ desired/service/web/image = "aaa`) {
		t.Errorf("Change.String() is %d bytes: %.600q", len(s), s)
	}
}
