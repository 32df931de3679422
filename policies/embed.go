package policies

import "embed"

// Files holds the default rule sets. `ccattler server` loads them unless
// --policies DIR names a directory to load instead.
//
//go:embed *.hcl
var Files embed.FS
