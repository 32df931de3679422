package engine

import (
	"log/slog"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/rules"
)

// ruleSetEvaluator runs a compiled rule set with the evaluator of package eval.
type ruleSetEvaluator struct {
	*eval.Evaluator
}

var _ Evaluator = ruleSetEvaluator{}

func (r ruleSetEvaluator) Version() string { return r.RuleSet().Version }

// NewRuleSetEvaluator returns the Evaluator of a compiled rule set. Fresh
// ids are drawn from a generator seeded from the clock; the seed is logged
// so that a run's choices can be replayed (eval.WithSeed). Options given
// after that override it.
func NewRuleSetEvaluator(rs *rules.RuleSet, log *slog.Logger, opts ...eval.Option) Evaluator {
	seed := uint64(time.Now().UnixNano())
	if log != nil {
		log.Info("engine: rule set loaded", "version", rs.Version, "rules", len(rs.Rules), "files", len(rs.Files), "fresh_id_seed", seed)
	}
	return ruleSetEvaluator{eval.New(rs, append([]eval.Option{eval.WithSeed(seed)}, opts...)...)}
}
