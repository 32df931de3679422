package facts

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// The bounds on every input the control plane takes, declared in one place
// so that a reviewer sees them together and the docs can list them
// (docs/rules.md, "Limits"). Each is enforced where the input first
// arrives: HCL files before they are parsed (package facts/hclcheck, used
// by service files, rule files and rule tests), values before their JSON
// is decoded (ValueType.Decode, so a value written straight to etcd is as
// invalid as one refused by `apply`), and per service through the schema's
// value types, so the same number is refused at apply and invalid in the
// store.
//
// They are constants rather than settings: a server, an agent and a client
// must agree on what is valid, and every one of them checks values against
// the same built-in schema.
const (
	// MaxFileBytes bounds one HCL file: a service file, a rule file or a
	// rule test. The default policies are under 15 KiB each. The worst
	// file at the bound (one token per byte) costs about 60 ms and 125 MB
	// of allocation to check (BenchmarkSource), and as much to parse.
	MaxFileBytes = 256 << 10

	// MaxNestingDepth bounds how deeply an HCL file nests: each open
	// bracket, brace, parenthesis, string, heredoc and template sequence is
	// a level, and so is each operator of one expression (a+b+c is
	// ((a+b)+c) to the parser). HCL's parser and evaluator recurse once per
	// level, and Go cannot recover from running out of stack; no file of
	// the project comes near 20.
	MaxNestingDepth = 100

	// MaxValueBytes bounds one fact's stored value.
	MaxValueBytes = 1 << 20

	// MaxValueDepth bounds how deeply arrays and objects nest in one JSON
	// value (encoding/json's own bound is 10,000).
	MaxValueDepth = 64

	// MaxStringBytes bounds a string value with no narrower limit below.
	MaxStringBytes = 4096

	// MaxImageBytes bounds an image reference: a registry name of at most
	// 255 characters, a tag of at most 128 and a digest fit several times.
	MaxImageBytes = 1024

	// MaxPathBytes bounds a path, such as a health check's.
	MaxPathBytes = 1024

	// MaxNameBytes bounds a name (a service, volume, node or metric): it is
	// a key segment, as in DNS labels.
	MaxNameBytes = 63

	// MaxInstances bounds the instances of one service: the user's count,
	// every intent layer's, the effective target and the autoscaler's range.
	MaxInstances = 10000

	// MaxExposePorts bounds the ports one service exposes: each becomes a
	// key and, per instance, an endpoint.
	MaxExposePorts = 100

	// MaxMapEntries bounds a service's env and labels, each: every entry
	// is a key, and every container started carries them all.
	MaxMapEntries = 128
)

// LimitError is an input over one of the limits above. Offset is the byte
// where the limit was crossed, when that is known (-1 otherwise).
type LimitError struct {
	What   string // what was too large: "value", "image", "nesting", ...
	Name   string // the limit's constant, e.g. "MaxValueBytes"
	Unit   string // "bytes", "levels", "instances", ...
	Max    int64
	Got    int64 // 0 when counting stopped at the limit
	Offset int
}

func (e *LimitError) Error() string {
	if e.Got > 0 {
		return fmt.Sprintf("%s of %d %s is over the limit of %d %s (%s)", e.What, e.Got, e.Unit, e.Max, e.Unit, e.Name)
	}
	return fmt.Sprintf("%s is over the limit of %d %s (%s)", e.What, e.Max, e.Unit, e.Name)
}

// TextError is a character not allowed in text users write. Offset is its
// byte offset in the text.
type TextError struct {
	Rune    rune // utf8.RuneError for invalid UTF-8
	Offset  int
	Invalid bool // the bytes at Offset are not UTF-8
}

func (e *TextError) Error() string {
	if e.Invalid {
		return fmt.Sprintf("invalid UTF-8 at byte %d", e.Offset)
	}
	name := "a control character"
	if n, ok := bidiNames[e.Rune]; ok {
		name = n
	} else if !unicode.IsControl(e.Rune) {
		name = "a line or paragraph separator"
	}
	return fmt.Sprintf("character %U (%s) at byte %d: control and bidirectional formatting characters are not allowed, since they make text display as something other than what it is", e.Rune, name, e.Offset)
}

// bidiNames are the characters with Unicode's Bidi_Control property: they
// reorder how the text around them displays (U+202E shows "nginx\u202e1.82"
// as something else entirely).
var bidiNames = map[rune]string{
	0x061C: "ARABIC LETTER MARK",
	0x200E: "LEFT-TO-RIGHT MARK",
	0x200F: "RIGHT-TO-LEFT MARK",
	0x202A: "LEFT-TO-RIGHT EMBEDDING",
	0x202B: "RIGHT-TO-LEFT EMBEDDING",
	0x202C: "POP DIRECTIONAL FORMATTING",
	0x202D: "LEFT-TO-RIGHT OVERRIDE",
	0x202E: "RIGHT-TO-LEFT OVERRIDE",
	0x2066: "LEFT-TO-RIGHT ISOLATE",
	0x2067: "RIGHT-TO-LEFT ISOLATE",
	0x2068: "FIRST STRONG ISOLATE",
	0x2069: "POP DIRECTIONAL ISOLATE",
}

// CheckText reports the first character of s that user text may not hold:
// invalid UTF-8, a control character (C0, DEL, C1: tabs and newlines too),
// a line or paragraph separator, or a bidirectional formatting character.
// The error is a *TextError.
func CheckText(s string) error {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f { // printable ASCII, the common case
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return &TextError{Rune: r, Offset: i, Invalid: true}
		}
		if unicode.IsControl(r) || r == 0x2028 || r == 0x2029 || bidiNames[r] != "" {
			return &TextError{Rune: r, Offset: i}
		}
		i += size
	}
	return nil
}

// stringLimit is the byte bound of a string value of the given format.
func stringLimit(format string) (int, string, string) {
	switch format {
	case "image":
		return MaxImageBytes, "MaxImageBytes", "image"
	case "path":
		return MaxPathBytes, "MaxPathBytes", "path"
	case "name":
		return MaxNameBytes, "MaxNameBytes", "name"
	}
	return MaxStringBytes, "MaxStringBytes", "string"
}

// checkValueSize refuses a stored value that is too large or nests too
// deeply, before any JSON decoder sees it: encoding/json would spend the
// time and memory of decoding it first.
func checkValueSize(raw []byte) error {
	if len(raw) > MaxValueBytes {
		return &LimitError{What: "value", Name: "MaxValueBytes", Unit: "bytes", Max: MaxValueBytes, Got: int64(len(raw)), Offset: MaxValueBytes}
	}
	if len(raw) > 0 && (raw[0] == '"' || raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return nil // a scalar: the decoder stops at its end, nothing nests
	}
	if off := jsonTooDeep(raw, MaxValueDepth); off >= 0 {
		return &LimitError{What: "nesting", Name: "MaxValueDepth", Unit: "levels", Max: MaxValueDepth, Offset: off}
	}
	return nil
}

// jsonTooDeep returns the offset of the bracket at which raw's arrays and
// objects nest deeper than max, or -1. Brackets inside strings do not
// count; the scan does not validate, the decoder that follows does.
func jsonTooDeep(raw []byte, max int) int {
	depth := 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			if depth++; depth > max {
				return i
			}
		case ']', '}':
			depth--
		}
	}
	return -1
}
