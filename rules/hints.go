package rules

import (
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// valueHints reads a guard for what it says of string aliases: a conjunct
// `alias == 'x'` or `alias in ['x', 'y']`, or a disjunction whose every
// side says so of the same alias (`state == 'stopped' || state == 'failed'`):
// the guard can only hold when the alias's fact has one of those values, so
// the evaluator may find the facts by value (the scheduler's pending
// instances) instead of scanning a type.
func valueHints(e *Expr, aliases map[string]bool) map[string][]string {
	if e == nil || e.AST == nil {
		return nil
	}
	out := hintsOf(e.AST.NativeRep().Expr(), aliases)
	if len(out) == 0 {
		return nil
	}
	return out
}

// hintsOf returns, for each alias it can, the values the alias must have
// for x to hold.
func hintsOf(x ast.Expr, aliases map[string]bool) map[string][]string {
	out := map[string][]string{}
	if x.Kind() != ast.CallKind {
		return out
	}
	call := x.AsCall()
	args := call.Args()
	switch call.FunctionName() {
	case operators.LogicalAnd:
		for _, a := range args {
			for alias, vals := range hintsOf(a, aliases) {
				add(out, alias, vals)
			}
		}
	case operators.LogicalOr:
		if len(args) != 2 {
			return out
		}
		l, r := hintsOf(args[0], aliases), hintsOf(args[1], aliases)
		for alias, lv := range l {
			if rv, ok := r[alias]; ok {
				out[alias] = append(append([]string(nil), lv...), rv...)
			}
		}
	case operators.Equals:
		if len(args) != 2 {
			return out
		}
		id, lit := args[0], args[1]
		if id.Kind() != ast.IdentKind {
			id, lit = lit, id
		}
		if s, ok := strLiteral(lit); ok && id.Kind() == ast.IdentKind && aliases[id.AsIdent()] {
			add(out, id.AsIdent(), []string{s})
		}
	case operators.In:
		if len(args) != 2 || args[0].Kind() != ast.IdentKind || args[1].Kind() != ast.ListKind || !aliases[args[0].AsIdent()] {
			return out
		}
		var vals []string
		for _, el := range args[1].AsList().Elements() {
			s, ok := strLiteral(el)
			if !ok {
				return out
			}
			vals = append(vals, s)
		}
		add(out, args[0].AsIdent(), vals)
	}
	return out
}

// add keeps the first hint of an alias: any one conjunct is a valid bound.
func add(m map[string][]string, alias string, vals []string) {
	if _, ok := m[alias]; !ok {
		m[alias] = vals
	}
}

func strLiteral(x ast.Expr) (string, bool) {
	if x.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := x.AsLiteral().(types.String)
	return string(s), ok
}

// stringAliases lists the match aliases of a scope whose values are strings.
func stringAliases(sc *Scope) map[string]bool {
	out := map[string]bool{}
	for _, p := range sc.Match {
		if stringLike(p.Type.Value.Kind) {
			out[p.Alias] = true
		}
	}
	return out
}
