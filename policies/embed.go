package policies

import (
	"embed"
	"io/fs"
)

// Files holds the default rule sets. `ccattler server` loads them unless
// --policies DIR names a directory to load instead.
//
//go:embed *.hcl
var Files embed.FS

// Sources returns the default rule files by name ("instances.hcl"), as
// rules.LoadFiles takes them.
func Sources() map[string][]byte {
	names, err := fs.Glob(Files, "*.hcl")
	if err != nil {
		panic(err) // a fixed pattern over an embedded FS
	}
	out := make(map[string][]byte, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(Files, n)
		if err != nil {
			panic(err)
		}
		out[n] = b
	}
	return out
}
