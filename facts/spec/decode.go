package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/hclcheck"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Kind is what a top-level block declares.
type Kind string

const (
	KindService Kind = "service"
	KindVolume  Kind = "volume"
)

// Fact is one desired fact: a key relative to the root and its canonical value.
type Fact struct {
	Key   string
	Value []byte
}

// Object is one service or volume of a file, rendered to facts.
type Object struct {
	Kind  Kind
	Name  string
	Range hcl.Range // the name label, for messages that point at the declaration
	Facts []Fact    // sorted by key
	// VolumeRange is where a service names its volume, for Apply's check
	// that the volume is declared.
	VolumeRange hcl.Range
}

// Doc is what a set of files declares. Files holds every parsed file, also
// when decoding failed, so that diagnostics can show their source lines.
type Doc struct {
	Objects []Object // in the order of the files and of the blocks in them
	Files   map[string]*hcl.File
}

// Facts returns the facts of every object, sorted by key.
func (d *Doc) Facts() []Fact {
	var out []Fact
	for _, o := range d.Objects {
		out = append(out, o.Facts...)
	}
	slices.SortFunc(out, func(a, b Fact) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Source is the text of one file and the name its diagnostics use.
type Source struct {
	Name  string
	Bytes []byte
}

// ReadFiles reads the named files; a directory stands for the *.hcl files in
// it, in name order. The error names the path that could not be read.
func ReadFiles(paths []string) ([]Source, error) {
	var out []Source
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		names := []string{p}
		if st.IsDir() {
			names, err = filepath.Glob(filepath.Join(p, "*.hcl"))
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", p, err)
			}
			if len(names) == 0 {
				return nil, fmt.Errorf("read %s: the directory holds no *.hcl files", p)
			}
			slices.Sort(names)
		}
		for _, n := range names {
			b, err := hclcheck.ReadFile(n)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", n, err)
			}
			out = append(out, Source{Name: n, Bytes: b})
		}
	}
	return out, nil
}

var topSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: string(KindService), LabelNames: []string{"name"}},
	{Type: string(KindVolume), LabelNames: []string{"name"}},
}}

// Decode parses the sources and renders every service and volume in them.
// It reports every problem of every file at once; when the diagnostics hold
// an error, the Doc must not be applied (it lacks the objects in error).
func Decode(srcs ...Source) (*Doc, hcl.Diagnostics) {
	d := &decoder{
		doc:  &Doc{Files: map[string]*hcl.File{}},
		seen: map[Kind]map[string]hcl.Range{KindService: {}, KindVolume: {}},
	}
	for _, src := range srcs {
		d.file(src)
	}
	return d.doc, d.diags
}

type decoder struct {
	doc   *Doc
	diags hcl.Diagnostics
	seen  map[Kind]map[string]hcl.Range // where each name was first declared, as written
	m     remapper                      // of the file being decoded
}

// errorf records a problem. Ranges come from the syntax tree of the split
// source (see splitLines) and are mapped back to the file as written here.
func (d *decoder) errorf(subject, context *hcl.Range, summary, format string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  d.m.ptr(subject),
		Context:  d.m.ptr(context),
	})
}

// add records diagnostics of the hcl packages, mapped like errorf's.
func (d *decoder) add(diags hcl.Diagnostics) {
	for _, dg := range diags {
		c := *dg
		c.Subject, c.Context = d.m.ptr(dg.Subject), d.m.ptr(dg.Context)
		d.diags = append(d.diags, &c)
	}
}

func (d *decoder) file(src Source) {
	// Size and depth before anything lexes or parses the file: its
	// recursion cannot be stopped once it has started.
	if diags := hclcheck.Source(src.Name, src.Bytes); diags.HasErrors() {
		d.diags = append(d.diags, diags...)
		return
	}
	split, at := splitLines(src.Bytes, src.Name)
	d.m = remapper{src: src.Bytes, at: at}
	f, diags := hclsyntax.ParseConfig(split, src.Name, hcl.InitialPos)
	d.add(diags)
	if f == nil {
		return
	}
	// Diagnostics point into the file as written; show its lines.
	d.doc.Files[src.Name] = &hcl.File{Body: f.Body, Bytes: src.Bytes, Nav: f.Nav}
	if diags.HasErrors() {
		// A broken file's structure is a guess; checking it would only
		// report the syntax error again in other words.
		return
	}
	content, diags := f.Body.Content(topSchema)
	d.add(diags)
	for _, b := range content.Blocks {
		d.object(b)
	}
}

func (d *decoder) object(b *hcl.Block) {
	kind := Kind(b.Type)
	name, label := b.Labels[0], b.LabelRanges[0]
	written := d.m.rng(label)
	ok := true
	if err := facts.CheckSegment("name", name); err != nil {
		d.errorf(&label, &b.DefRange, fmt.Sprintf("Invalid %s name", kind),
			"The %s name becomes a key segment (desired/%s/{name}): %v.", kind, kind, err)
		ok = false
	} else if first, dup := d.seen[kind][name]; dup {
		d.errorf(&label, &b.DefRange, fmt.Sprintf("Duplicate %s %q", kind, name),
			"A %s named %q is already declared at %s. Each name may be declared once across all the files applied together.",
			kind, name, Pos(first))
		ok = false
	} else {
		d.seen[kind][name] = written
	}

	base := "desired/" + string(kind) + "/" + name
	o := &Object{Kind: kind, Name: name, Range: written, Facts: []Fact{{Key: base, Value: []byte("{}")}}}
	nerr := len(d.diags.Errs())
	gr := serviceGroup
	if kind == KindVolume {
		gr = volumeGroup
	}
	d.body(b.Body, gr, base, o)
	if !ok || len(d.diags.Errs()) > nerr {
		return
	}
	if kind == KindService {
		hasImage, counted := false, false
		for _, f := range o.Facts {
			switch {
			case f.Key == facts.ServiceInstances(name):
				o.Facts = append(o.Facts, Fact{Key: facts.Intent("user", name), Value: f.Value})
				counted = true
			case f.Key == facts.ServiceImage(name):
				hasImage = true
			case strings.HasPrefix(f.Key, facts.DesiredService(name)+"/autoscale/"):
				counted = true // the autoscaler sets the count
			}
		}
		if !hasImage {
			d.errorf(&label, &b.DefRange, "Missing image",
				"Service %q has no image, so no instance of it could start. Add the image its instances run, e.g. image = \"nginx:1.28\".", name)
			return
		}
		if !counted {
			d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "No instances",
				Detail:  fmt.Sprintf("Service %q sets neither instances nor autoscale, so none of its instances runs until ccattler scale service %s N sets a count. Add instances = 1 (or how many) to run it.", name, name),
				Subject: d.m.ptr(&label), Context: d.m.ptr(&b.DefRange)})
		}
	}
	slices.SortFunc(o.Facts, func(a, b Fact) int { return strings.Compare(a.Key, b.Key) })
	if kind == KindService {
		if f, ok := specDigest(name, o.Facts); ok {
			o.Facts = append(o.Facts, f)
			slices.SortFunc(o.Facts, func(a, b Fact) int { return strings.Compare(a.Key, b.Key) })
		}
	}
	d.doc.Objects = append(d.doc.Objects, *o)
}

// decoded is an attribute's value as written, kept for checks that relate
// two attributes (autoscale min <= max).
type decoded struct {
	val  any
	attr *hcl.Attribute
}

func (d *decoder) body(body hcl.Body, gr *group, base string, o *Object) {
	content, diags := body.Content(gr.schema())
	d.add(diags)
	got := map[string]decoded{}
	for _, a := range gr.attrs {
		at, present := content.Attributes[a.name]
		if !present {
			continue
		}
		switch a.name {
		case exposeAttr:
			d.expose(at, base, o)
			continue
		case envAttr, labelsAttr:
			d.stringMap(at, base, a.name, o)
			continue
		}
		v, diags := at.Expr.Value(nil)
		d.add(diags)
		if diags.HasErrors() {
			continue
		}
		raw, gv, err := encode(v, a.vt)
		if err != nil {
			d.badValue(at, a, v, err)
			continue
		}
		got[a.name] = decoded{val: gv, attr: at}
		if gr.name == "" && a.name == "volume" {
			o.VolumeRange = d.m.rng(at.Expr.Range())
		}
		o.Facts = append(o.Facts, Fact{Key: base + "/" + a.path, Value: raw})
	}
	if gr.name == "autoscale" {
		lo, okLo := got["min"]
		hi, okHi := got["max"]
		if okLo && okHi && lo.val.(int64) > hi.val.(int64) {
			d.errorf(lo.attr.Expr.Range().Ptr(), hcl.RangeOver(lo.attr.Range, hi.attr.Range).Ptr(),
				"Invalid autoscale range",
				"autoscale min (%d) is greater than max (%d): min must be at most max.", lo.val, hi.val)
		}
	}

	first := map[string]hcl.Range{}
	for _, b := range content.Blocks {
		if prev, dup := first[b.Type]; dup {
			d.errorf(b.DefRange.Ptr(), nil, fmt.Sprintf("Duplicate %s block", b.Type),
				"A %s may have one %s block; the first is at %s.", o.Kind, b.Type, Pos(d.m.rng(prev)))
			continue
		}
		first[b.Type] = b.DefRange
		for _, sub := range gr.blocks {
			if sub.name == b.Type {
				d.body(b.Body, sub, base, o)
			}
		}
	}
}

// encode converts an HCL value to the fact's canonical stored form.
func encode(v cty.Value, vt facts.ValueType) ([]byte, any, error) {
	gv, ok := goValue(v, vt)
	if !ok {
		return nil, nil, errWrongType
	}
	raw, err := vt.Encode(gv)
	if err != nil {
		return nil, nil, err
	}
	return raw, gv, nil
}

// envName is what an environment variable's name may be: a key segment
// that a shell also accepts.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// stringMap turns env = { NAME = "value" } (or labels) into one
// {attr}/{key} fact per entry, each value a string.
func (d *decoder) stringMap(at *hcl.Attribute, base, attr string, o *Object) {
	want := `a map of names to strings, such as { GREETING = "hello" }`
	if attr == labelsAttr {
		want = `a map of names to strings, such as { team = "web" }`
	}
	pairs, diags := hcl.ExprMap(at.Expr)
	if diags.HasErrors() {
		d.errorf(at.Expr.Range().Ptr(), at.Range.Ptr(), fmt.Sprintf("Invalid value for %q", attr), "%q expects %s.", attr, want)
		return
	}
	if len(pairs) > facts.MaxMapEntries {
		d.errorf(pairs[facts.MaxMapEntries].Key.Range().Ptr(), at.Range.Ptr(),
			fmt.Sprintf("More than %d entries in %q (MaxMapEntries)", facts.MaxMapEntries, attr),
			"%q has %d entries; a service may have at most %d (facts.MaxMapEntries), since each is a key and every container carries them all.",
			attr, len(pairs), facts.MaxMapEntries)
		return
	}
	seen := map[string]bool{}
	for _, p := range pairs {
		k, diags := p.Key.Value(nil)
		if diags.HasErrors() || k.IsNull() || k.Type() != cty.String {
			// An unquoted name is a variable reference to HCL: take its text.
			if name := hcl.ExprAsKeyword(p.Key); name != "" {
				k = cty.StringVal(name)
			} else {
				d.errorf(p.Key.Range().Ptr(), at.Range.Ptr(), "Invalid name", "Each name in %q must be a string or a bare name.", attr)
				continue
			}
		}
		name := k.AsString()
		ok := facts.CheckSegment(attr, name) == nil
		if attr == envAttr {
			ok = envName.MatchString(name)
		}
		if !ok {
			d.errorf(p.Key.Range().Ptr(), at.Range.Ptr(), "Invalid name",
				"%q is not a valid name in %q: expected letters, digits and '_' (labels also '.', ':' and '-'), at most 128 characters, not starting with a digit.", name, attr)
			continue
		}
		if seen[name] {
			d.errorf(p.Key.Range().Ptr(), at.Range.Ptr(), "Duplicate name", "%q is given more than once in %q.", name, attr)
			continue
		}
		seen[name] = true
		v, diags := p.Value.Value(nil)
		d.add(diags)
		if diags.HasErrors() {
			continue
		}
		if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
			d.errorf(p.Value.Range().Ptr(), at.Range.Ptr(), "Invalid value",
				"The value of %q in %q must be a string, but got %s; quote it (e.g. \"8080\").", name, attr, show(v))
			continue
		}
		raw, _ := facts.ValueType{Kind: facts.KindString}.Encode(v.AsString())
		o.Facts = append(o.Facts, Fact{Key: base + "/" + attr + "/" + name, Value: raw})
	}
}

// expose turns expose = [8080, 8443] into one expose/{port} fact per port.
func (d *decoder) expose(at *hcl.Attribute, base string, o *Object) {
	const want = "a list of port numbers from 1 to 65535, such as [8080, 8443]"
	elems, diags := hcl.ExprList(at.Expr)
	if diags.HasErrors() {
		d.errorf(at.Expr.Range().Ptr(), at.Range.Ptr(), `Invalid value for "expose"`, `"expose" expects %s.`, want)
		return
	}
	if len(elems) > facts.MaxExposePorts {
		d.errorf(elems[facts.MaxExposePorts].Range().Ptr(), at.Range.Ptr(),
			fmt.Sprintf("More than %d ports (MaxExposePorts)", facts.MaxExposePorts),
			`"expose" lists %d ports; a service may expose at most %d (facts.MaxExposePorts), since each port is a key and an endpoint per instance. Expose fewer ports, or split the service.`,
			len(elems), facts.MaxExposePorts)
		return
	}
	seen := map[int64]bool{}
	for _, e := range elems {
		v, diags := e.Value(nil)
		d.add(diags)
		if diags.HasErrors() {
			continue
		}
		n, ok := wholeNumber(v)
		port, _ := n.(int64)
		if !ok || port < 1 || port > 65535 {
			d.errorf(e.Range().Ptr(), at.Range.Ptr(), "Invalid port",
				`Each port in "expose" must be an integer from 1 to 65535, but got %s.`, show(v))
			continue
		}
		if seen[port] {
			d.errorf(e.Range().Ptr(), at.Range.Ptr(), "Duplicate port",
				`Port %d is listed more than once in "expose".`, port)
			continue
		}
		seen[port] = true
		o.Facts = append(o.Facts, Fact{Key: base + "/expose/" + strconv.FormatInt(port, 10), Value: []byte("{}")})
	}
}
