package spec

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestHistoryKeepsTheLastApplies: every apply that changes a service adds
// its spec to the history in the apply's transaction (the newest entry is
// what the store holds, under the apply's record id), an unchanged apply
// adds none, and only HistoryKeep entries stay.
func TestHistoryKeepsTheLastApplies(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	for i := 1; i <= HistoryKeep+2; i++ {
		doc := mustDecode(t, fmt.Sprintf("service \"web\" {\n image = \"nginx:1.%d\"\n instances = %d\n}\n", i, i))
		if _, err := Apply(ctx, s, doc, Options{}); err != nil {
			t.Fatal(err)
		}
		if i == 2 { // the same file again: nothing written, no entry
			res, err := Apply(ctx, s, doc, Options{})
			if err != nil || res.Written {
				t.Fatalf("unchanged apply: written %v, err %v", res.Written, err)
			}
		}
	}
	revs, err := History(ctx, s, "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(revs) != HistoryKeep {
		t.Fatalf("%d history entries, want %d", len(revs), HistoryKeep)
	}
	for j, r := range revs {
		want := fmt.Sprintf(`"nginx:1.%d"`, j+3) // the two oldest went
		if got := string(r.Facts[facts.ServiceImage("web")]); got != want {
			t.Errorf("entry %d (%s) holds image %s, want %s", j, r.ID, got, want)
		}
	}
	newest := revs[len(revs)-1]
	if _, ok, err := s.Get(ctx, newest.Event); err != nil || !ok {
		t.Errorf("entry %s names %s, which is not the apply's record (err %v)", newest.ID, newest.Event, err)
	}
	now := stored(t, s, "desired/service/web", "intent/user/service/web/")
	if len(now) != len(newest.Facts) {
		t.Fatalf("newest entry %v, store %v", newest.Facts, now)
	}
	for k, v := range now {
		if string(newest.Facts[k]) != v {
			t.Errorf("newest entry: %s = %s, store holds %s", k, newest.Facts[k], v)
		}
	}

	// Going back to an older entry restores it exactly, and is an entry itself.
	if _, err := Set(ctx, s, "web", bytesOf(revs[0].Facts), Options{}); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s, facts.ServiceImage("web"))[facts.ServiceImage("web")]; got != `"nginx:1.3"` {
		t.Errorf("after restoring the oldest entry the image is %s", got)
	}
	if revs2, _ := History(ctx, s, "web"); len(revs2) != HistoryKeep || revs2[len(revs2)-1].ID == newest.ID {
		t.Errorf("the restore is not the newest entry: %d entries", len(revs2))
	}
}

// TestHistoryRefusesForeignKeys: the history is user-written; an entry that
// names a key outside the service's own facts (another service, auth/) or an
// invalid value is refused by name, never restored.
func TestHistoryRefusesForeignKeys(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	for _, c := range []struct{ value, want string }{
		{`{"event":"x","facts":{"desired/service/web":{},"auth/user:eve/rules":[{"prefix":"*","access":"readwrite"}]}}`, "not a fact of service"},
		{`{"event":"x","facts":{"desired/service/web":{},"desired/service/db/image":"evil:1"}}`, "not a fact of service"},
		{`{"event":"x","facts":{"desired/service/web":{},"desired/service/web/instances":-4}}`, "desired/service/web/instances"},
		{`{"event":"x","facts":{"desired/service/web/image":"nginx:1"}}`, "holds no desired/service/web"},
		{`not json`, "not an applied spec"},
	} {
		key := facts.ServiceHistory("web", "20261129T185454.000000001Z-000001")
		if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put(key, []byte(c.value))}, Checked: true}); err != nil {
			t.Fatal(err)
		}
		_, err := History(ctx, s, "web")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), key) {
			t.Errorf("history entry %s: err %v, want one naming %s and %q", c.value, err, key, c.want)
		}
	}
	if _, err := Set(ctx, s, "web", map[string][]byte{"desired/service/db": []byte("{}")}, Options{}); err == nil {
		t.Error("Set wrote another service's key")
	}
}

func bytesOf(m map[string]facts.RawJSON) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
