package spec

import (
	"fmt"
	"math/big"
	"strings"
	"unicode/utf8"

	"github.com/ccattler/ccattler/facts"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// attr is one HCL attribute of a service or volume file and the fact it
// becomes. path is the key below desired/{kind}/{name}/; the fact's value
// type comes from the schema, so the file accepts exactly what the store does.
type attr struct {
	name string
	path string
	vt   facts.ValueType
}

// group is a block of attributes: the body of a service or volume, or a
// nested block such as resources { ... }.
type group struct {
	name   string // "" for the top level of a service or volume
	attrs  []attr
	blocks []*group
}

func (gr *group) schema() *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, a := range gr.attrs {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: a.name})
	}
	for _, b := range gr.blocks {
		s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: b.name})
	}
	return s
}

// mkAttr looks the value type up in the schema. A missing key form is a
// programmer mistake in the tables below, so it panics at init.
func mkAttr(kind, name, path string) attr {
	tmpl := "desired/" + kind + "/{name}/" + path
	t, ok := facts.Default.TypeOf(tmpl)
	if !ok {
		panic("spec: no fact type for " + tmpl)
	}
	return attr{name: name, path: path, vt: t.Value}
}

func nested(kind, block string, names ...string) *group {
	gr := &group{name: block}
	for _, n := range names {
		gr.attrs = append(gr.attrs, mkAttr(kind, n, block+"/"+n))
	}
	return gr
}

// exposeAttr, envAttr and labelsAttr are handled apart: their elements
// become keys, not values.
const (
	exposeAttr = "expose"
	envAttr    = "env"
	labelsAttr = "labels"
)

var serviceGroup = &group{
	attrs: []attr{
		mkAttr("service", "image", "image"),
		mkAttr("service", "instances", "instances"),
		mkAttr("service", "volume", "volume"),
		mkAttr("service", "command", "command"),
		mkAttr("service", "args", "args"),
		{name: exposeAttr},
		{name: envAttr},
		{name: labelsAttr},
	},
	blocks: []*group{
		nested("service", "resources", "cpu", "memory"),
		nested("service", "health", "method", "path", "interval", "failures"),
		nested("service", "autoscale", "metric", "threshold", "min", "max", "stabilization"),
		nested("service", "placement", "architecture", "zone"),
		nested("service", "update", "max_unavailable", "max_extra"),
		nested("service", "restart", "attempts", "delay", "max_delay", "interval"),
	},
}

var volumeGroup = &group{
	attrs: []attr{
		mkAttr("volume", "size", "size"),
		mkAttr("volume", "persistent", "persistent"),
		mkAttr("volume", "access_mode", "access_mode"),
	},
}

// expected says in words what an attribute accepts, in the file's terms
// rather than the store's (a file has strings, not JSON strings).
func expected(vt facts.ValueType) string {
	return strings.ReplaceAll(strings.ReplaceAll(vt.Describe(), "a JSON array", "a list"), "JSON ", "")
}

// goValue converts an HCL value to the Go value ValueType.Encode takes. Types
// are not coerced: instances = "3" is a mistake worth pointing at, not guessing.
// The exception is what the schema itself accepts in two forms: cpu as 0.5
// or "500m", memory as "256Mi" or a number of bytes.
func goValue(v cty.Value, vt facts.ValueType) (any, bool) {
	if v.IsNull() || !v.IsKnown() {
		return nil, false
	}
	ty := v.Type()
	switch vt.Kind {
	case facts.KindJSON:
		if vt.Format != "strings" || !(ty.IsListType() || ty.IsTupleType()) {
			return nil, false
		}
		out := []any{}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if e.IsNull() || !e.IsKnown() || e.Type() != cty.String {
				return nil, false
			}
			out = append(out, e.AsString())
		}
		return out, true
	case facts.KindInt:
		return wholeNumber(v)
	case facts.KindNumber:
		if ty != cty.Number {
			return nil, false
		}
		f, _ := v.AsBigFloat().Float64()
		return f, true
	case facts.KindCPU:
		if ty == cty.String {
			return v.AsString(), true
		}
		if ty != cty.Number {
			return nil, false
		}
		f, _ := v.AsBigFloat().Float64()
		return f, true
	case facts.KindBool:
		if ty != cty.Bool {
			return nil, false
		}
		return v.True(), true
	case facts.KindMemory:
		if ty == cty.Number {
			return wholeNumber(v)
		}
	}
	if ty != cty.String {
		return nil, false
	}
	return v.AsString(), true
}

// wholeNumber returns v as an int64 if it is a number without a fraction
// that fits one.
func wholeNumber(v cty.Value) (any, bool) {
	if v.Type() != cty.Number {
		return nil, false
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		return nil, false
	}
	i, acc := bf.Int64()
	if acc != big.Exact {
		return nil, false
	}
	return i, true
}

// show renders a value as the user wrote it, for error messages.
func show(v cty.Value) string {
	switch {
	case v.IsNull():
		return "null"
	case !v.IsKnown():
		return "an unknown value"
	case v.Type() == cty.String:
		// Quoted, so that control and bidirectional characters show as
		// escapes; cut, so that a 5 MB value is not repeated whole.
		s := v.AsString()
		if len(s) > 60 {
			cut := 60
			for cut > 0 && !utf8.RuneStart(s[cut]) {
				cut--
			}
			return fmt.Sprintf("%q...", s[:cut])
		}
		return fmt.Sprintf("%q", s)
	case v.Type() == cty.Number:
		if bf := v.AsBigFloat(); bf.IsInt() && bf.MinPrec() <= 64 {
			return bf.Text('f', 0) // 1000000000, not 1e+09
		}
		return v.AsBigFloat().Text('g', -1)
	case v.Type() == cty.Bool:
		if v.True() {
			return "true"
		}
		return "false"
	}
	return "a " + v.Type().FriendlyName()
}
