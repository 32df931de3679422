package facts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ValueKind is the declared type of a fact's value. Every value is stored in
// etcd as JSON text; the kind says which JSON and what it means.
type ValueKind int

const (
	KindObject   ValueKind = iota // a JSON object, e.g. {} or {"ip": "10.1.0.5", "port": 8080}
	KindString                    // a JSON string
	KindInt                       // a JSON integer
	KindNumber                    // a JSON number
	KindBool                      // true or false
	KindEnum                      // a JSON string out of a fixed set
	KindCPU                       // cores as a JSON number (0.5); "500m" is accepted on input
	KindMemory                    // a byte quantity as a JSON string: "256Mi", "10Gi", "512"
	KindDuration                  // a Go duration as a JSON string: "10s", "1m30s"
	KindTime                      // an RFC 3339 time as a JSON string
	KindIP                        // an IPv4 or IPv6 address as a JSON string
	KindJSON                      // any JSON value
)

var kindNames = map[ValueKind]string{
	KindObject: "object", KindString: "string", KindInt: "int", KindNumber: "number",
	KindBool: "bool", KindEnum: "enum", KindCPU: "cpu", KindMemory: "memory",
	KindDuration: "duration", KindTime: "time", KindIP: "ip", KindJSON: "json",
}

func (k ValueKind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("ValueKind(%d)", int(k))
}

// ParseValueKind is the inverse of ValueKind.String, used by schema/ registrations.
func ParseValueKind(s string) (ValueKind, bool) {
	for k, n := range kindNames {
		if n == s {
			return k, true
		}
	}
	return 0, false
}

// Bounds of the values agents and users write in free form: a failure's
// reason is cut to MaxReason bytes by its writer, a command has at most
// MaxStrings elements.
const (
	MaxReason  = 1024
	MaxStrings = 256
)

// ValueType is a kind with its constraints.
type ValueType struct {
	Kind   ValueKind
	Enum   []string             // KindEnum: the allowed values
	Min    *float64             // KindInt, KindNumber, KindCPU: the least allowed value
	Max    *float64             // KindInt, KindNumber, KindCPU: the greatest allowed value
	Fields map[string]ValueKind // KindObject: fields that must be present, with their kinds
	Format string               // KindString: "path" (starts with /), "name" (a key segment), "image", "reason" (bounded), "hostport", "digest" (16 lowercase hex digits); KindJSON: "strings" (an array of strings)
	// MaxName and Unit mark a Max that is one of the limits of limits.go:
	// a value above it is a *LimitError naming the limit, not a plain
	// "expected ...", so that the user learns it is a bound.
	MaxName, Unit string
}

// Describe says in words what a value of this type looks like; it is the
// "expected ..." part of every validation error.
func (t ValueType) Describe() string {
	switch t.Kind {
	case KindObject:
		if len(t.Fields) == 0 {
			return "a JSON object such as {}"
		}
		names := make([]string, 0, len(t.Fields))
		for n, k := range t.Fields {
			names = append(names, fmt.Sprintf("%q (%s)", n, k))
		}
		sort.Strings(names)
		return "a JSON object with " + strings.Join(names, ", ")
	case KindString:
		switch t.Format {
		case "path":
			return `a JSON string starting with "/"`
		case "name":
			return "a JSON string that is a valid name (lowercase letters, digits and '-', 1-63 characters)"
		case "image":
			return `a JSON string naming an image, such as "nginx:1.28"`
		case "reason":
			return fmt.Sprintf("a JSON string of at most %d bytes", MaxReason)
		case "hostport":
			return `a JSON string host:port such as "127.0.0.1:7070"`
		case "digest":
			return `a JSON string of 16 lowercase hex digits such as "3f9a0c5e7b2d4a61"`
		}
		return "a JSON string"
	case KindInt:
		return "an integer" + t.rangeText()
	case KindNumber:
		return "a number" + t.rangeText()
	case KindBool:
		return "true or false"
	case KindEnum:
		return "one of " + strings.Join(t.Enum, "|")
	case KindCPU:
		return `a cpu quantity in cores, such as 0.5 or "500m"` + t.rangeText()
	case KindMemory:
		return `a memory quantity such as "256Mi", "1Gi" or "512" (bytes)`
	case KindDuration:
		return `a duration such as "10s" or "1m30s"`
	case KindTime:
		return `an RFC 3339 time such as "2026-11-29T18:54:54Z"`
	case KindIP:
		return `an IP address such as "10.1.0.5"`
	case KindJSON:
		if t.Format == "strings" {
			return `a JSON array of strings such as ["/bin/sh", "-c", "echo hello"]`
		}
		return "any JSON value"
	}
	return t.Kind.String()
}

func (t ValueType) rangeText() string {
	switch {
	case t.Min != nil && t.Max != nil:
		return fmt.Sprintf(" from %g to %g", *t.Min, *t.Max)
	case t.Min != nil:
		return fmt.Sprintf(" >= %g", *t.Min)
	case t.Max != nil:
		return fmt.Sprintf(" <= %g", *t.Max)
	}
	return ""
}

// Decode parses a stored value and checks it against the type. The Go value
// it returns is, by kind: map[string]any (object), string (string, enum, ip),
// int64 (int; memory in bytes), float64 (number; cpu in cores), bool,
// time.Duration, time.Time, any (json).
func (t ValueType) Decode(raw []byte) (any, error) {
	if err := checkValueSize(raw); err != nil {
		return nil, err
	}
	if v, ok := plainJSON(raw); ok {
		return t.check(v)
	}
	return t.decodeJSON(raw)
}

// decodeJSON is Decode through encoding/json.
func (t ValueType) decodeJSON(raw []byte) (any, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if d.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return t.check(v)
}

// check validates a JSON-decoded value (json.Number for numbers) and returns its Go form.
func (t ValueType) check(v any) (any, error) {
	bad := func() (any, error) { return nil, fmt.Errorf("expected %s", t.Describe()) }
	switch t.Kind {
	case KindJSON:
		if t.Format == "strings" {
			l, ok := v.([]any)
			if !ok || len(l) > MaxStrings {
				return bad()
			}
			for _, e := range l {
				if _, ok := e.(string); !ok {
					return bad()
				}
			}
		}
		return normalizeJSON(v), nil
	case KindObject:
		m, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		for name, k := range t.Fields {
			f, ok := m[name]
			if !ok {
				return nil, fmt.Errorf("missing field %q: expected %s", name, t.Describe())
			}
			if _, err := (ValueType{Kind: k}).check(f); err != nil {
				return nil, fmt.Errorf("field %q: %v", name, err)
			}
		}
		return normalizeJSON(m), nil
	case KindBool:
		b, ok := v.(bool)
		if !ok {
			return bad()
		}
		return b, nil
	case KindInt:
		n, ok := v.(json.Number)
		if !ok {
			return bad()
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err == nil && t.MaxName != "" && t.Max != nil && float64(i) > *t.Max {
			return nil, &LimitError{What: t.Unit, Name: t.MaxName, Unit: t.Unit, Max: int64(*t.Max), Got: i, Offset: -1}
		}
		if err != nil || !t.inRange(float64(i)) {
			return bad()
		}
		return i, nil
	case KindNumber:
		n, ok := v.(json.Number)
		if !ok {
			return bad()
		}
		f, err := n.Float64()
		if err != nil || !t.inRange(f) {
			return bad()
		}
		return f, nil
	case KindCPU:
		var f float64
		switch x := v.(type) {
		case json.Number:
			var err error
			if f, err = x.Float64(); err != nil {
				return bad()
			}
		case string:
			var err error
			if f, err = ParseCPU(x); err != nil {
				return bad()
			}
		default:
			return bad()
		}
		if f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || !t.inRange(f) {
			return bad()
		}
		return f, nil
	}
	s, ok := v.(string)
	if !ok {
		return bad()
	}
	switch t.Kind {
	case KindString:
		// Bounds and characters first: a 5 MB or a disguised image is
		// refused for what it is, and never reaches a log whole.
		if limit, name, what := stringLimit(t.Format); len(s) > limit {
			return nil, &LimitError{What: what, Name: name, Unit: "bytes", Max: int64(limit), Got: int64(len(s)), Offset: limit}
		}
		if err := CheckText(s); err != nil {
			return nil, err
		}
		switch t.Format {
		case "path":
			if !strings.HasPrefix(s, "/") || strings.ContainsAny(s, " \t\n") {
				return bad()
			}
		case "name":
			if !validName(s) {
				return bad()
			}
		case "image":
			if s == "" || strings.ContainsAny(s, " \t\n") {
				return bad()
			}
		case "reason":
			if len(s) > MaxReason {
				return bad()
			}
		case "hostport":
			if _, p, err := net.SplitHostPort(s); err != nil || p == "" {
				return bad()
			}
		case "digest":
			if !validDigest(s) {
				return bad()
			}
		}
		return s, nil
	case KindEnum:
		for _, e := range t.Enum {
			if s == e {
				return s, nil
			}
		}
		return bad()
	case KindMemory:
		n, err := ParseMemory(s)
		if err != nil {
			return bad()
		}
		return n, nil
	case KindDuration:
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return bad()
		}
		return d, nil
	case KindTime:
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return bad()
		}
		return tm, nil
	case KindIP:
		if net.ParseIP(s) == nil {
			return bad()
		}
		return s, nil
	}
	return bad()
}

func (t ValueType) inRange(f float64) bool {
	return (t.Min == nil || f >= *t.Min) && (t.Max == nil || f <= *t.Max)
}

// normalizeJSON turns json.Number into int64 where exact, else float64.
func normalizeJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeJSON(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalizeJSON(e)
		}
		return x
	}
	return v
}

// Encode renders a Go value as the canonical stored form of the type and
// validates it. Objects are written with sorted keys and ", " / ": "
// separators, so that {"ip": "10.1.0.5", "port": 8080} reads as the key schema writes it.
func (t ValueType) Encode(v any) ([]byte, error) {
	switch x := v.(type) {
	case time.Duration:
		v = x.String()
	case time.Time:
		v = x.UTC().Format(time.RFC3339Nano)
	}
	if t.Kind == KindMemory {
		if n, ok := toInt64(v); ok {
			v = FormatMemory(n)
		}
	}
	raw, err := CanonicalJSON(v)
	if err != nil {
		return nil, err
	}
	if _, err := t.Decode(raw); err != nil {
		return nil, err
	}
	if t.Kind == KindCPU {
		// "500m" on input is stored as cores.
		if s, ok := v.(string); ok {
			f, _ := ParseCPU(s)
			return CanonicalJSON(f)
		}
	}
	return raw, nil
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case uint64:
		return int64(n), true
	}
	return 0, false
}

// CanonicalJSON encodes v as JSON with sorted object keys and the key
// schema's separators (", " and ": "), no HTML escaping.
func CanonicalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := writeCanonical(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeCanonical(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeCanonical(b, k); err != nil {
				return err
			}
			b.WriteString(": ")
			if err := writeCanonical(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case json.Number:
		b.WriteString(string(x))
		return nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return fmt.Errorf("cannot encode %v as JSON", x)
		}
		b.WriteString(strconv.FormatFloat(x, 'f', -1, 64))
		return nil
	}
	var enc bytes.Buffer
	e := json.NewEncoder(&enc)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return err
	}
	out := bytes.TrimRight(enc.Bytes(), "\n")
	if len(out) > 0 && (out[0] == '{' || out[0] == '[') {
		// Some other map or slice type (a struct, map[string]int, ...): decode
		// it generically so that it is written with the canonical separators.
		var g any
		d := json.NewDecoder(bytes.NewReader(out))
		d.UseNumber()
		if err := d.Decode(&g); err != nil {
			return err
		}
		return writeCanonical(b, g)
	}
	b.Write(out)
	return nil
}

var memoryRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P)?$`)

var memoryUnits = map[string]float64{
	"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
}

// ParseMemory parses a byte quantity ("256Mi", "1.5Gi", "100M", "512") into bytes.
func ParseMemory(s string) (int64, error) {
	m := memoryRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("invalid memory quantity %q: expected a number with an optional unit Ki, Mi, Gi, Ti, Pi, k, M, G, T or P", s)
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("invalid memory quantity %q: %v", s, err)
	}
	n := f * memoryUnits[m[2]]
	if n > math.MaxInt64/2 {
		return 0, fmt.Errorf("memory quantity %q is too large", s)
	}
	return int64(math.Round(n)), nil
}

// FormatMemory renders bytes with the largest binary unit that divides them.
func FormatMemory(n int64) string {
	for _, u := range []string{"Pi", "Ti", "Gi", "Mi", "Ki"} {
		f := int64(memoryUnits[u])
		if n != 0 && n%f == 0 {
			return strconv.FormatInt(n/f, 10) + u
		}
	}
	return strconv.FormatInt(n, 10)
}

// ParseCPU parses a cpu quantity: cores ("0.5", "2") or millicores ("500m").
func ParseCPU(s string) (float64, error) {
	if m, ok := strings.CutSuffix(s, "m"); ok {
		i, err := strconv.ParseInt(m, 10, 64)
		if err != nil || i < 0 {
			return 0, fmt.Errorf("invalid cpu quantity %q: expected cores such as 0.5 or millicores such as \"500m\"", s)
		}
		return float64(i) / 1000, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("invalid cpu quantity %q: expected cores such as 0.5 or millicores such as \"500m\"", s)
	}
	return f, nil
}

// plainJSON decodes the shapes most facts have — true, false, {}, a string of printable
// ASCII without escapes, an integer, a decimal such as 0.25 — as
// encoding/json with UseNumber would, without it (agents report tens of
// thousands of them at a time, and a decoder costs a 512-byte buffer); ok
// is false for anything else.
func plainJSON(raw []byte) (v any, ok bool) {
	n := len(raw)
	switch string(raw) { // no allocation: the compiler compares in place
	case "true":
		return true, true
	case "false":
		return false, true
	case "{}":
		return map[string]any{}, true
	}
	if n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		for _, c := range raw[1 : n-1] {
			if c == '\\' || c == '"' || c < 0x20 || c >= 0x7f {
				return nil, false
			}
		}
		return string(raw[1 : n-1]), true
	}
	i := 0
	if n > 0 && raw[0] == '-' {
		i = 1
	}
	digits := func() int {
		start := i
		for i < n && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		return i - start
	}
	start := i
	whole := digits()
	if whole == 0 || whole > 18 || (raw[start] == '0' && whole > 1) {
		return nil, false
	}
	if i < n && raw[i] == '.' {
		i++
		if frac := digits(); frac == 0 || whole+frac > 18 {
			return nil, false
		}
	}
	if i != n {
		return nil, false
	}
	return json.Number(raw), true
}

// validDigest reports whether s is a spec digest: 16 lowercase hex digits.
func validDigest(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
