package audit

// RuleOf is ruleOf, for the external tests.
var RuleOf = ruleOf
