package rules

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
	"github.com/ccattler/ccattler/facts"
	"github.com/dgraph-io/ristretto/v2"
)

// DefaultCostLimit is the CEL cost budget of one evaluation of one
// expression: generous for any guard over a binding, small enough that a
// runaway comprehension cannot stall a round.
const DefaultCostLimit = 1_000_000

// CELType maps a fact's value kind to its CEL type. A fact whose schema says
// int is an int in CEL, so comparing it with a string is a load-time error.
func CELType(k facts.ValueKind) *cel.Type {
	switch k {
	case facts.KindString, facts.KindEnum, facts.KindIP:
		return cel.StringType
	case facts.KindInt, facts.KindMemory:
		return cel.IntType
	case facts.KindNumber, facts.KindCPU:
		return cel.DoubleType
	case facts.KindBool:
		return cel.BoolType
	case facts.KindDuration:
		return cel.DurationType
	case facts.KindTime:
		return cel.TimestampType
	case facts.KindObject:
		return cel.MapType(cel.StringType, cel.DynType)
	}
	return cel.DynType
}

// stringLike reports whether values of kind k can be joined to key segments.
func stringLike(k facts.ValueKind) bool {
	return k == facts.KindString || k == facts.KindEnum || k == facts.KindIP
}

// accepts reports whether an expression of CEL type t can be written to a
// fact of kind k (dyn is checked when the value is written).
func accepts(k facts.ValueKind, t *cel.Type) bool {
	tk := t.Kind()
	if tk == types.DynKind || tk == types.AnyKind {
		return true
	}
	switch k {
	case facts.KindString, facts.KindEnum, facts.KindIP:
		return tk == types.StringKind
	case facts.KindInt:
		return tk == types.IntKind || tk == types.UintKind
	case facts.KindMemory:
		return tk == types.IntKind || tk == types.UintKind || tk == types.StringKind
	case facts.KindNumber, facts.KindCPU:
		return tk == types.IntKind || tk == types.UintKind || tk == types.DoubleKind
	case facts.KindBool:
		return tk == types.BoolKind
	case facts.KindDuration:
		return tk == types.DurationKind || tk == types.StringKind
	case facts.KindTime:
		return tk == types.TimestampKind || tk == types.StringKind
	case facts.KindObject:
		return tk == types.MapKind
	}
	return true
}

// NowVar is the variable every expression sees holding the evaluation's
// clock (eval.WithClock), so rules about age stay reproducible.
const NowVar = "now"

var (
	baseOnce sync.Once
	baseEnv  *cel.Env
	baseErr  error
)

// base returns the environment every rule expression extends: standard CEL,
// optional types, the strings, math, lists and sets extensions, and now.
func base() (*cel.Env, error) {
	baseOnce.Do(func() {
		baseEnv, baseErr = cel.NewEnv(
			cel.OptionalTypes(),
			ext.Strings(),
			ext.Math(),
			ext.Lists(),
			ext.Sets(),
			cel.Variable(NowVar, cel.TimestampType),
		)
	})
	return baseEnv, baseErr
}

// vars is an ordered set of declared variables with their CEL types.
type vars struct {
	names []string
	types map[string]*cel.Type
}

func newVars() *vars { return &vars{types: map[string]*cel.Type{}} }

func (v *vars) clone() *vars {
	c := &vars{names: append([]string(nil), v.names...), types: make(map[string]*cel.Type, len(v.types))}
	for k, t := range v.types {
		c.types[k] = t
	}
	return c
}

func (v *vars) add(name string, t *cel.Type) {
	if _, ok := v.types[name]; !ok {
		v.names = append(v.names, name)
	}
	v.types[name] = t
}

func (v *vars) has(name string) bool { _, ok := v.types[name]; return ok }

// signature identifies the environment: the cache key of a program is its
// expression and this.
func (v *vars) signature() string {
	names := append([]string(nil), v.names...)
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte(':')
		b.WriteString(v.types[n].String())
		b.WriteByte(';')
	}
	return b.String()
}

// compiled is a cached compilation: the program, or the issues.
type compiled struct {
	ast    *cel.Ast
	prog   cel.Program
	fast   cel.Program // without cost tracking, when the estimate allows (Expr.Fast)
	out    *cel.Type
	issues *cel.Issues
}

// FastSize bounds the size of every variable an Expr.Fast program may be
// evaluated with: a string's length in bytes, a list's or a map's entries.
const FastSize = 1 << 16

// sizeBound estimates costs for variables of at most FastSize: a declared
// variable is that large at most; everything else is left to CEL's own
// estimate (unknown sizes are unbounded).
type sizeBound struct{ vars map[string]*cel.Type }

func (s sizeBound) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if s.isVar(n) {
		return &checker.SizeEstimate{Min: 0, Max: FastSize}
	}
	return nil
}

// EstimateCallCost sizes an optional variable's value, or its value or a
// default no larger (CEL leaves their size unknown), at the cost of one call.
func (s sizeBound) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if target == nil || !s.isVar(*target) {
		return nil
	}
	switch {
	case function == "value" && len(args) == 0,
		function == "orValue" && len(args) == 1 && (s.isVar(args[0]) || smallLiteral(args[0].Expr())):
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 0, Max: 1}, ResultSize: &checker.SizeEstimate{Min: 0, Max: FastSize}}
	}
	return nil
}

// isVar reports whether n is a declared variable.
func (s sizeBound) isVar(n checker.AstNode) bool {
	p := n.Path()
	return len(p) == 1 && s.vars[p[0]] != nil
}

// smallLiteral reports whether e is a literal of at most FastSize.
func smallLiteral(e ast.Expr) bool {
	if e.Kind() != ast.LiteralKind {
		return false
	}
	switch v := e.AsLiteral().(type) {
	case types.String:
		return len(v) <= FastSize
	case types.Bytes:
		return len(v) <= FastSize
	}
	return true // a number, bool or null
}

// ProgramCache keeps compiled CEL programs across reloads, keyed by
// expression, environment and cost limit, so a reload recompiles only what
// changed. It is safe for concurrent use.
type ProgramCache struct {
	c        *ristretto.Cache[string, *compiled]
	hits     atomic.Int64
	compiles atomic.Int64
}

// NewProgramCache returns a cache holding about maxPrograms programs.
func NewProgramCache(maxPrograms int64) (*ProgramCache, error) {
	c, err := ristretto.NewCache(&ristretto.Config[string, *compiled]{
		NumCounters: maxPrograms * 10,
		MaxCost:     maxPrograms,
		BufferItems: 64,
	})
	if err != nil {
		return nil, fmt.Errorf("rules: program cache: %w", err)
	}
	return &ProgramCache{c: c}, nil
}

// Stats returns how many lookups were served from the cache and how many
// expressions were compiled.
func (pc *ProgramCache) Stats() (hits, compiles int64) {
	return pc.hits.Load(), pc.compiles.Load()
}

var (
	defaultCacheOnce sync.Once
	defaultCache     *ProgramCache
)

// DefaultCache is the process-wide program cache Load uses unless told otherwise.
func DefaultCache() *ProgramCache {
	defaultCacheOnce.Do(func() {
		c, err := NewProgramCache(1 << 14)
		if err != nil {
			panic(err) // a constant, valid configuration
		}
		defaultCache = c
	})
	return defaultCache
}

// envCache avoids rebuilding identical environments within one load.
type envCache map[string]*cel.Env

// compile type-checks src in the environment of vs, through the cache.
func (pc *ProgramCache) compile(ec envCache, vs *vars, src string, costLimit uint64) (*compiled, error) {
	return pc.compileInlined(ec, vs, src, costLimit, nil)
}

// env returns the environment declaring vs (its signature sig).
func (ec envCache) env(vs *vars, sig string) (*cel.Env, error) {
	if env, ok := ec[sig]; ok {
		return env, nil
	}
	b, err := base()
	if err != nil {
		return nil, err
	}
	opts := make([]cel.EnvOption, 0, len(vs.names))
	for _, n := range vs.names {
		opts = append(opts, cel.Variable(n, vs.types[n]))
	}
	env, err := b.Extend(opts...)
	if err != nil {
		return nil, err
	}
	ec[sig] = env
	return env, nil
}

// program makes the programs of a checked expression, or keeps its issues.
func program(env *cel.Env, vs *vars, a *cel.Ast, iss *cel.Issues, costLimit uint64) (*compiled, error) {
	c := &compiled{}
	if iss != nil && iss.Err() != nil {
		c.issues = iss
		return c, nil
	}
	prog, err := env.Program(a, cel.CostLimit(costLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, err
	}
	c.ast, c.prog, c.out = a, prog, a.OutputType()
	if est, err := env.EstimateCost(a, sizeBound{vars: vs.types}); err == nil && est.Max <= costLimit {
		if c.fast, err = env.Program(a, cel.EvalOptions(cel.OptOptimize)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// inline is a shared let compiled where it is used, to be inlined there.
type inline struct {
	name, src string
	inner     []inline // the lets it reads itself, inlined into ast already
	ast       *cel.Ast
	out       *cel.Type
	size      int // bytes of CEL with its lets inlined
}

// key renders what the inlined lets are, for the cache key.
func inlineKey(b *strings.Builder, inl []inline) {
	for _, l := range inl {
		b.WriteString(l.name)
		b.WriteByte('=')
		b.WriteString(l.src)
		b.WriteByte('(')
		inlineKey(b, l.inner)
		b.WriteString(");")
	}
}

// compileInlined is compile with shared lets inlined: src is checked with
// each let declared as a variable of its type, then every use of one is
// replaced by the let's own checked expression (cel-go's inlining
// optimizer), so the program evaluates the let where it is read.
func (pc *ProgramCache) compileInlined(ec envCache, vs *vars, src string, costLimit uint64, inl []inline) (*compiled, error) {
	with := vs
	vars := make([]*cel.InlineVariable, 0, len(inl))
	if len(inl) > 0 {
		with = vs.clone()
		for _, l := range inl {
			with.add(l.name, l.out)
			vars = append(vars, cel.NewInlineVariable(l.name, l.ast))
		}
	}
	sig := with.signature()
	var kb strings.Builder
	fmt.Fprintf(&kb, "%d\x00%s\x00%s", costLimit, sig, src)
	if len(inl) > 0 {
		kb.WriteByte(0)
		inlineKey(&kb, inl)
	}
	key := kb.String()
	if c, ok := pc.c.Get(key); ok {
		pc.hits.Add(1)
		return c, nil
	}
	env, err := ec.env(with, sig)
	if err != nil {
		return nil, err
	}
	pc.compiles.Add(1)
	a, iss := env.Compile(src)
	if len(inl) > 0 && (iss == nil || iss.Err() == nil) {
		opt, err := cel.NewStaticOptimizer(cel.NewInliningOptimizer(vars...))
		if err != nil {
			return nil, err
		}
		a, iss = opt.Optimize(env, a)
	}
	c, err := program(env, vs, a, iss, costLimit)
	if err != nil {
		return nil, err
	}
	pc.c.Set(key, c, 1)
	pc.c.Wait()
	return c, nil
}
