package ruletest

import (
	"fmt"
	"math/big"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/hclcheck"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Test is one rule test: facts, then a run to a fixpoint, then
// expectations; optional steps change facts and expect again.
type Test struct {
	Name  string
	File  string
	Range hcl.Range
	Seed  uint64
	Now   time.Time
	// Summaries runs the rule set's summaries too (summaries = true), and
	// expects their writes and firings with the rules'. Without it they are
	// left out: nothing reads them, so the rules decide the same.
	Summaries bool
	Steps     []*Step // the first step holds the test's own facts and expect
}

// Step is a set of fact changes followed by a run to a fixpoint and the
// expected outcome.
type Step struct {
	Name   string
	Range  hcl.Range
	Puts   []facts.Fact // values canonical JSON
	Dels   []string
	Now    time.Time // what rules see as now from this step on; zero keeps the previous step's
	Expect *Expect
}

// Expect is what a step must produce. Keys may hold '*' for one segment
// (a fresh id); every map is compared exactly: nothing missing, nothing extra.
type Expect struct {
	Writes map[string][]byte // key pattern -> canonical value: keys whose value changed or appeared
	// Multi holds a wildcard key given a list: the keys it matches hold
	// exactly these values, in any order ("placement/instance/*" = ["node-1", "node-2"]).
	Multi   map[string][][]byte
	Deletes []string       // key patterns: keys that existed and are gone
	Firings map[string]int // rule -> number of firings
	// Rounds maps a rule to the number of rounds (plans) it fired in; only
	// the rules named are compared: `rounds = { stop_placed_extras = 1 }`
	// says every extra was stopped at once.
	Rounds     map[string]int
	Problems   []string // rules with a problem
	Rejections []string // "rule var=value,...: filter, filter" patterns
	Range      hcl.Range
	has        map[string]bool // which of the above were written
}

// FixtureLease is the etcd lease id a fixture's leased facts are attached to.
const FixtureLease = 1

var fileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "test", LabelNames: []string{"name"}}, {Type: "world", LabelNames: []string{"name"}},
}}
var testSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "worlds"}, {Name: "facts"}, {Name: "raw"}, {Name: "unleased"}, {Name: "delete"}, {Name: "seed"}, {Name: "now"}, {Name: "summaries"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "expect"}, {Type: "then", LabelNames: []string{"name"}}},
}
var stepSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "worlds"}, {Name: "facts"}, {Name: "raw"}, {Name: "unleased"}, {Name: "delete"}, {Name: "now"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "expect"}},
}
var expectSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "writes"}, {Name: "deletes"}, {Name: "firings"}, {Name: "problems"}, {Name: "rejections"}, {Name: "rounds"},
}}

// IsTestFile reports whether a file holds rule tests: *_test.hcl, or any
// *.hcl under a tests/ or testdata/ directory.
func IsTestFile(path string) bool {
	d := filepath.Base(filepath.Dir(path))
	return strings.HasSuffix(path, "_test.hcl") ||
		(strings.HasSuffix(path, ".hcl") && (d == "tests" || d == "testdata"))
}

// Find lists the test files of a rule directory: DIR/*_test.hcl,
// DIR/tests/*.hcl and DIR/testdata/*.hcl.
func Find(dir string) ([]string, error) {
	var out []string
	for _, pat := range []string{filepath.Join(dir, "*_test.hcl"), filepath.Join(dir, "tests", "*.hcl"), filepath.Join(dir, "testdata", "*.hcl")} {
		m, err := filepath.Glob(pat)
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	sort.Strings(out)
	return out, nil
}

// Parse reads test files against schema (to encode fact values). The
// worlds of a directory's test files are shared by all of them.
func Parse(paths []string, schema *facts.Schema) ([]*Test, map[string]*hcl.File, hcl.Diagnostics) {
	var tests []*Test
	var diags hcl.Diagnostics
	files := map[string]*hcl.File{}
	byDir := map[string][]source{}
	var dirs []string
	for _, p := range paths {
		src, err := hclcheck.ReadFile(p)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read test file", Detail: err.Error()})
			continue
		}
		d := filepath.Dir(p)
		if _, ok := byDir[d]; !ok {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], source{p, src})
	}
	for _, d := range dirs {
		ts, fs, ds := parseSources(byDir[d], schema)
		tests = append(tests, ts...)
		diags = append(diags, ds...)
		for n, f := range fs {
			files[n] = f
		}
	}
	return tests, files, diags
}

// ParseFile parses one test file; it sees only its own worlds.
func ParseFile(name string, src []byte, schema *facts.Schema) ([]*Test, *hcl.File, hcl.Diagnostics) {
	tests, files, diags := parseSources([]source{{name, src}}, schema)
	return tests, files[name], diags
}

type source struct {
	name string
	src  []byte
}

// parseSources parses the test files of one directory: first every file's
// worlds, then the tests, which may include any of them.
func parseSources(srcs []source, schema *facts.Schema) ([]*Test, map[string]*hcl.File, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	files := map[string]*hcl.File{}
	ws := worlds{}
	var contents []*hcl.BodyContent
	var names []string
	for _, s := range srcs {
		// Size and depth before the parser, which recurses per level.
		if d := hclcheck.Source(s.name, s.src); d.HasErrors() {
			diags = append(diags, d...)
			continue
		}
		f, d := hclsyntax.ParseConfig(s.src, s.name, hcl.InitialPos)
		files[s.name] = f
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		content, d := f.Body.Content(fileSchema)
		diags = append(diags, d...)
		diags = append(diags, ws.define(content.Blocks.OfType("world"), schema)...)
		contents = append(contents, content)
		names = append(names, s.name)
	}
	var tests []*Test
	for i, content := range contents {
		ts, d := parseTests(names[i], content, schema, ws)
		tests = append(tests, ts...)
		diags = append(diags, d...)
	}
	return tests, files, append(diags, ws.unused(schema)...)
}

func parseTests(name string, content *hcl.BodyContent, schema *facts.Schema, ws worlds) ([]*Test, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var tests []*Test
	for _, b := range content.Blocks.OfType("test") {
		t := &Test{Name: b.Labels[0], File: name, Range: b.DefRange, Seed: 1}
		c, d := b.Body.Content(testSchema)
		diags = append(diags, d...)
		if a := c.Attributes["seed"]; a != nil {
			v, d := a.Expr.Value(nil)
			diags = append(diags, d...)
			if !d.HasErrors() && v.Type() == cty.Number {
				u, _ := v.AsBigFloat().Uint64()
				t.Seed = u
			}
		}
		if a := c.Attributes["summaries"]; a != nil {
			v, d := a.Expr.Value(nil)
			diags = append(diags, d...)
			if !d.HasErrors() {
				if v.Type() != cty.Bool || v.IsNull() {
					rng := a.Expr.Range()
					diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid summaries",
						Detail: "summaries is true (run the rule set's summaries too, and expect their writes and firings) or false.", Subject: &rng})
				} else {
					t.Summaries = v.True()
				}
			}
		}
		t.Now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		tm, d := parseNow(c)
		diags = append(diags, d...)
		if !tm.IsZero() {
			t.Now = tm
		}
		first := &Step{Name: "", Range: b.DefRange}
		diags = append(diags, parseStep(c, first, schema, ws)...)
		t.Steps = append(t.Steps, first)
		for _, tb := range c.Blocks.OfType("then") {
			sc, d := tb.Body.Content(stepSchema)
			diags = append(diags, d...)
			s := &Step{Name: tb.Labels[0], Range: tb.DefRange}
			tm, d := parseNow(sc)
			diags = append(diags, d...)
			s.Now = tm
			diags = append(diags, parseStep(sc, s, schema, ws)...)
			t.Steps = append(t.Steps, s)
		}
		tests = append(tests, t)
	}
	return tests, diags
}

// parseNow reads a now = "RFC 3339 time" attribute; zero when there is none.
func parseNow(c *hcl.BodyContent) (time.Time, hcl.Diagnostics) {
	a := c.Attributes["now"]
	if a == nil {
		return time.Time{}, nil
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return time.Time{}, diags
	}
	rng := a.Expr.Range()
	bad := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid time", Subject: &rng}
	if v.Type() != cty.String || v.IsNull() {
		bad.Detail = `now: expected an RFC 3339 time such as "2026-11-29T12:00:00Z".`
		return time.Time{}, append(diags, bad)
	}
	tm, err := time.Parse(time.RFC3339, v.AsString())
	if err != nil {
		bad.Detail = fmt.Sprintf("now = %q: expected an RFC 3339 time such as \"2026-11-29T12:00:00Z\".", v.AsString())
		return time.Time{}, append(diags, bad)
	}
	return tm, diags
}

func parseStep(c *hcl.BodyContent, s *Step, schema *facts.Schema, ws worlds) hcl.Diagnostics {
	own, unleased, diags := parseFacts(c, schema, nil)
	leases(own, unleased, schema)
	if a := c.Attributes["worlds"]; a != nil {
		var d hcl.Diagnostics
		s.Puts, d = ws.include(a, own, schema)
		diags = append(diags, d...)
		for i := range s.Puts {
			if unleased[s.Puts[i].Key] {
				s.Puts[i].Lease = 0
			}
		}
	}
	s.Puts = append(s.Puts, own...)
	if a := c.Attributes["delete"]; a != nil {
		s.Dels, diags = strList(a, diags)
	}
	for i, b := range c.Blocks.OfType("expect") {
		if i > 0 {
			rng := b.DefRange
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate expect", Detail: "A step has one expect block.", Subject: &rng})
			continue
		}
		e, d := parseExpect(b, schema)
		diags = append(diags, d...)
		s.Expect = e
	}
	return diags
}

// parseFacts reads the facts, raw facts and unleased keys of a test, a
// step or a world.
func parseFacts(c *hcl.BodyContent, schema *facts.Schema, ctx *hcl.EvalContext) ([]facts.Fact, map[string]bool, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var puts []facts.Fact
	if a := c.Attributes["facts"]; a != nil {
		pairs, d := hcl.ExprMap(a.Expr)
		diags = append(diags, d...)
		for _, kv := range pairs {
			k, d := kv.Key.Value(ctx)
			diags = append(diags, d...)
			v, d2 := kv.Value.Value(ctx)
			diags = append(diags, d2...)
			if d.HasErrors() || d2.HasErrors() || k.Type() != cty.String {
				continue
			}
			raw, err := encode(schema, k.AsString(), v)
			if err != nil {
				rng := kv.Value.Range()
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid fact", Detail: err.Error(), Subject: &rng})
				continue
			}
			puts = append(puts, facts.Fact{Key: k.AsString(), Value: raw})
		}
	}
	// raw facts are stored as written, unchecked: what a rogue or careless
	// writer puts past apply, for rules to treat as absent.
	if a := c.Attributes["raw"]; a != nil {
		pairs, d := hcl.ExprMap(a.Expr)
		diags = append(diags, d...)
		for _, kv := range pairs {
			k, d := kv.Key.Value(ctx)
			diags = append(diags, d...)
			v, d2 := kv.Value.Value(ctx)
			diags = append(diags, d2...)
			if d.HasErrors() || d2.HasErrors() || k.Type() != cty.String || v.Type() != cty.String {
				rng := kv.Value.Range()
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid raw fact",
					Detail: "A raw fact is a key and the stored bytes as a string, such as \"desired/service/web/image\" = \"12345\".", Subject: &rng})
				continue
			}
			puts = append(puts, facts.Fact{Key: k.AsString(), Value: []byte(v.AsString())})
		}
	}
	unleased := map[string]bool{}
	if a := c.Attributes["unleased"]; a != nil {
		var keys []string
		keys, diags = strListIn(a, ctx, diags)
		for _, k := range keys {
			unleased[k] = true
		}
	}
	return puts, unleased, diags
}

// leases attaches the fixture lease to the facts of a leased type
// (lease/node/{id}) not listed in unleased: they stand for ones an agent
// holds on a live etcd lease.
func leases(puts []facts.Fact, unleased map[string]bool, schema *facts.Schema) {
	for i := range puts {
		if k, err := schema.Parse(puts[i].Key); err == nil && k.Type.Leased && !unleased[puts[i].Key] {
			puts[i].Lease = FixtureLease
		}
	}
}

func parseExpect(b *hcl.Block, schema *facts.Schema) (*Expect, hcl.Diagnostics) {
	e := &Expect{Writes: map[string][]byte{}, Multi: map[string][][]byte{}, Firings: map[string]int{}, Range: b.DefRange, has: map[string]bool{}}
	c, diags := b.Body.Content(expectSchema)
	for n := range c.Attributes {
		e.has[n] = true
	}
	if a := c.Attributes["writes"]; a != nil {
		pairs, d := hcl.ExprMap(a.Expr)
		diags = append(diags, d...)
		for _, kv := range pairs {
			k, d := kv.Key.Value(nil)
			v, d2 := kv.Value.Value(nil)
			diags = append(diags, d...)
			diags = append(diags, d2...)
			if d.HasErrors() || d2.HasErrors() {
				continue
			}
			// A wildcard key is encoded with a stand-in id that parses.
			stand := strings.ReplaceAll(k.AsString(), "*", "fffff")
			if strings.Contains(k.AsString(), "*") && v.Type().IsTupleType() {
				for it := v.ElementIterator(); it.Next(); {
					_, ev := it.Element()
					raw, err := encode(schema, stand, ev)
					if err != nil {
						rng := kv.Value.Range()
						diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid expected value", Detail: err.Error(), Subject: &rng})
						continue
					}
					e.Multi[k.AsString()] = append(e.Multi[k.AsString()], raw)
				}
				continue
			}
			raw, err := encode(schema, stand, v)
			if err != nil {
				rng := kv.Value.Range()
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid expected value", Detail: err.Error(), Subject: &rng})
				continue
			}
			e.Writes[k.AsString()] = raw
		}
	}
	if a := c.Attributes["deletes"]; a != nil {
		e.Deletes, diags = strList(a, diags)
	}
	if a := c.Attributes["problems"]; a != nil {
		e.Problems, diags = strList(a, diags)
	}
	if a := c.Attributes["rejections"]; a != nil {
		e.Rejections, diags = strList(a, diags)
	}
	if a := c.Attributes["firings"]; a != nil {
		diags = ruleCounts(a, e.Firings, diags)
	}
	if a := c.Attributes["rounds"]; a != nil {
		e.Rounds = map[string]int{}
		diags = ruleCounts(a, e.Rounds, diags)
	}
	return e, diags
}

// ruleCounts reads a map of rule names to counts into out.
func ruleCounts(a *hcl.Attribute, out map[string]int, diags hcl.Diagnostics) hcl.Diagnostics {
	pairs, d := hcl.ExprMap(a.Expr)
	diags = append(diags, d...)
	for _, kv := range pairs {
		name := hcl.ExprAsKeyword(kv.Key)
		if name == "" {
			k, d := kv.Key.Value(nil)
			if d.HasErrors() || k.Type() != cty.String {
				continue
			}
			name = k.AsString()
		}
		v, d := kv.Value.Value(nil)
		diags = append(diags, d...)
		if d.HasErrors() || v.Type() != cty.Number {
			continue
		}
		n, _ := v.AsBigFloat().Int64()
		out[name] = int(n)
	}
	return diags
}

func strList(a *hcl.Attribute, diags hcl.Diagnostics) ([]string, hcl.Diagnostics) {
	return strListIn(a, nil, diags)
}

func strListIn(a *hcl.Attribute, ctx *hcl.EvalContext, diags hcl.Diagnostics) ([]string, hcl.Diagnostics) {
	v, d := a.Expr.Value(ctx)
	diags = append(diags, d...)
	if d.HasErrors() {
		return nil, diags
	}
	if !v.CanIterateElements() {
		rng := a.Expr.Range()
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Expected a list of strings", Subject: &rng})
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.Type() != cty.String {
			rng := a.Expr.Range()
			return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Expected a list of strings", Subject: &rng})
		}
		out = append(out, e.AsString())
	}
	return out, diags
}

// encode turns an HCL value into the key's canonical stored form.
func encode(schema *facts.Schema, key string, v cty.Value) ([]byte, error) {
	g, err := goOf(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", key, err)
	}
	return schema.Encode(key, g)
}

func goOf(v cty.Value) (any, error) {
	if v.IsNull() {
		return nil, nil
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return v.AsString(), nil
	case t == cty.Bool:
		return v.True(), nil
	case t == cty.Number:
		bf := v.AsBigFloat()
		if bf.IsInt() {
			i, acc := bf.Int64()
			if acc == big.Exact {
				return i, nil
			}
		}
		f, _ := bf.Float64()
		return f, nil
	case t.IsObjectType() || t.IsMapType():
		out := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			g, err := goOf(e)
			if err != nil {
				return nil, err
			}
			out[k.AsString()] = g
		}
		return out, nil
	case t.IsTupleType() || t.IsListType():
		var out []any
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			g, err := goOf(e)
			if err != nil {
				return nil, err
			}
			out = append(out, g)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported value of type %s", t.FriendlyName())
}
