package facts_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Only facts and its packages talk to etcd's client: everything else goes
// through Store, so that what the project does to etcd is in one place.
// The fault tests too ask single members about Raft through Store
// (MemberStatus, MoveLeader) and dial stores pinned to some of them.
func TestOnlyFactsImportsTheEtcdClient(t *testing.T) {
	const client = "go.etcd.io/etcd/client/v3"
	allowed := []string{"facts/"}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		n++
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if p != client && !strings.HasPrefix(p, client+"/") {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || strings.HasPrefix(rel, a)
			}
			if !ok {
				t.Errorf("%s imports %s: use a facts.Store method (or facts/etcdtest in a test)", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("read %d Go files under %s: not the module", n, root)
	}
}
