package eval

import (
	"context"
	"runtime/pprof"

	"github.com/ccattler/ccattler/rules"
)

// profileLabels tags the evaluating goroutine with what it is doing, so a
// CPU profile of a server or a benchmark says where the engine's time went
// by rule and by phase (`go tool pprof -tags`, or `-tagfocus rule=schedule`):
//
//	rule   the rule whose task runs, aggregates it computes included
//	phase  advance (adjusting kept aggregates for a batch of changes),
//	       dispatch (finding the tasks changes wake, and the loop between
//	       tasks), keep (storing the round's aggregate results)
//
// Setting a goroutine's labels stores one pointer; the contexts are built
// once per rule and phase.
type profileLabels struct {
	rules  map[*rules.Rule]context.Context
	phases map[string]context.Context
}

func (l *profileLabels) rule(r *rules.Rule) {
	ctx, ok := l.rules[r]
	if !ok {
		if l.rules == nil {
			l.rules = map[*rules.Rule]context.Context{}
		}
		ctx = pprof.WithLabels(context.Background(), pprof.Labels("rule", r.Name))
		l.rules[r] = ctx
	}
	pprof.SetGoroutineLabels(ctx)
}

func (l *profileLabels) phase(name string) {
	ctx, ok := l.phases[name]
	if !ok {
		if l.phases == nil {
			l.phases = map[string]context.Context{}
		}
		ctx = pprof.WithLabels(context.Background(), pprof.Labels("phase", name))
		l.phases[name] = ctx
	}
	pprof.SetGoroutineLabels(ctx)
}

func (l *profileLabels) clear() { pprof.SetGoroutineLabels(context.Background()) }
