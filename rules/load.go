package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/hclcheck"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Option configures Load.
type Option func(*loader)

// WithSchema types patterns and heads against s instead of facts.Default
// (a server that honours schema/ registrations passes its own).
func WithSchema(s *facts.Schema) Option { return func(l *loader) { l.schema = s } }

// WithCache compiles through pc instead of DefaultCache.
func WithCache(pc *ProgramCache) Option { return func(l *loader) { l.cache = pc } }

// WithCostLimit sets the CEL cost budget of one evaluation of one expression.
func WithCostLimit(n uint64) Option { return func(l *loader) { l.costLimit = n } }

type loader struct {
	schema    *facts.Schema
	cache     *ProgramCache
	costLimit uint64
	envs      envCache
}

// IsRuleFile reports whether a file name is a rule file: *.hcl, except rule
// tests (*_test.hcl).
func IsRuleFile(name string) bool {
	return strings.HasSuffix(name, ".hcl") && !strings.HasSuffix(name, "_test.hcl")
}

// Load reads the rule files of dir (*.hcl, not *_test.hcl, not recursive),
// compiles and checks them. Every problem of every file is in the
// diagnostics; the rule set is nil when any is an error.
func Load(dir string, opts ...Option) (*RuleSet, hcl.Diagnostics) {
	rs, _, diags := LoadWithFiles(dir, opts...)
	return rs, diags
}

// LoadWithFiles is Load that also returns the parsed files, also when the
// set is rejected, so that diagnostics can be printed with source snippets
// (hcl.NewDiagnosticTextWriter).
func LoadWithFiles(dir string, opts ...Option) (*RuleSet, map[string]*hcl.File, hcl.Diagnostics) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read rule directory",
			Detail: fmt.Sprintf("Reading %s: %v.", dir, err)}}
	}
	files := map[string][]byte{}
	for _, e := range ents {
		if e.IsDir() || !IsRuleFile(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := hclcheck.ReadFile(p)
		if err != nil {
			return nil, nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read rule file",
				Detail: fmt.Sprintf("Reading %s: %v.", p, err)}}
		}
		files[p] = b
	}
	if len(files) == 0 {
		return nil, nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "No rule files",
			Detail: fmt.Sprintf("%s holds no *.hcl rule files.", dir)}}
	}
	return loadFiles(files, opts...)
}

// LoadFilesWithSources is LoadFiles that also returns the parsed files, for
// printing diagnostics with source snippets.
func LoadFilesWithSources(files map[string][]byte, opts ...Option) (*RuleSet, map[string]*hcl.File, hcl.Diagnostics) {
	return loadFiles(files, opts...)
}

// LoadFiles compiles and checks rule files given by name and content.
func LoadFiles(files map[string][]byte, opts ...Option) (*RuleSet, hcl.Diagnostics) {
	rs, _, diags := loadFiles(files, opts...)
	return rs, diags
}

func loadFiles(files map[string][]byte, opts ...Option) (*RuleSet, map[string]*hcl.File, hcl.Diagnostics) {
	l := &loader{schema: facts.Default, costLimit: DefaultCostLimit, envs: envCache{}}
	for _, o := range opts {
		o(l)
	}
	if l.cache == nil {
		l.cache = DefaultCache()
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	rs := &RuleSet{Files: names, Schema: l.schema, CostLimit: l.costLimit,
		Sources: map[string]*hcl.File{}, byName: map[string]*Rule{}}
	h := sha256.New()
	var diags hcl.Diagnostics
	// Shared definitions first: a rule may read one from any file.
	ds := newDefs()
	type parsed struct {
		c      *compiler
		blocks hcl.Blocks
	}
	var todo []parsed
	for _, name := range names {
		src := files[name]
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(name), len(src))
		h.Write(src)
		// Size and depth before the parser, which recurses per level.
		if d := hclcheck.Source(name, src); d.HasErrors() {
			diags = append(diags, d...)
			continue
		}
		f, d := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
		diags = append(diags, d...)
		if f == nil {
			continue
		}
		rs.Sources[name] = f
		if d.HasErrors() {
			continue
		}
		content, d := f.Body.Content(fileSchema)
		diags = append(diags, d...)
		c := &compiler{loader: l, file: name, src: src, defs: ds}
		c.collect(content.Blocks)
		diags = append(diags, c.diags...)
		c.diags = nil
		var blocks hcl.Blocks
		for _, b := range content.Blocks {
			if isRuleBlock(b) {
				blocks = append(blocks, b)
			}
		}
		todo = append(todo, parsed{c, blocks})
	}
	for _, p := range todo {
		c := p.c
		for _, b := range p.blocks {
			r := c.rule(b)
			if old, ok := rs.byName[r.Name]; ok {
				rng := b.LabelRanges[0]
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate rule",
					Detail:  fmt.Sprintf("Rule %q is already defined at %s.", r.Name, old.Range),
					Subject: &rng})
				continue
			}
			rs.byName[r.Name] = r
			rs.Rules = append(rs.Rules, r)
		}
		diags = append(diags, c.diags...)
	}
	diags = append(diags, ds.unused()...)
	rs.Version = hex.EncodeToString(h.Sum(nil))[:12]
	if diags.HasErrors() {
		// Still run the set-wide checks on what compiled: one pass reports all.
		diags = append(diags, check(rs)...)
		return nil, rs.Sources, sortDiags(diags)
	}
	diags = append(diags, check(rs)...)
	if diags.HasErrors() {
		return nil, rs.Sources, sortDiags(diags)
	}
	return rs, rs.Sources, diags
}

// sortDiags orders diagnostics by file and position, so a reader goes down
// a file once.
func sortDiags(d hcl.Diagnostics) hcl.Diagnostics {
	sort.SliceStable(d, func(i, j int) bool {
		a, b := d[i].Subject, d[j].Subject
		if a == nil || b == nil {
			return a != nil && b == nil
		}
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Start.Byte < b.Start.Byte
	})
	return d
}
