package spec

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

func mustDecode(t *testing.T, src string) *Doc {
	t.Helper()
	doc, diags := Decode(Source{Name: "t.hcl", Bytes: []byte(src)})
	if diags.HasErrors() {
		t.Fatalf("decode: %v", diags)
	}
	return doc
}

// stored returns every fact under the given prefixes as key -> value.
func stored(t *testing.T, s *facts.Store, prefixes ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range prefixes {
		fs, _, err := s.List(context.Background(), p, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			out[f.Key] = string(f.Value)
		}
	}
	return out
}

func changeLines(cs []Change) string {
	var b []string
	for _, c := range cs {
		b = append(b, c.String())
	}
	return strings.Join(b, "\n")
}

const webV1 = `
service "web" {
  image     = "nginx:1.28"
  instances = 3
  expose    = [8080, 9090]
  resources { cpu = 0.5  memory = "256Mi" }
}
volume "data" { size = "10Gi"  persistent = true }
`

const webV2 = `
service "web" {
  image     = "nginx:1.29"
  instances = 3
  expose    = [8080]
}
volume "data" { size = "10Gi"  persistent = true }
`

func TestApply(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)

	// An unrelated service must survive every apply below.
	if _, err := s.PutValue(ctx, facts.DesiredService("other"), map[string]any{}); err != nil {
		t.Fatal(err)
	}
	// desired/service/webx shares a prefix with web but is not web's.
	if _, err := s.PutValue(ctx, facts.DesiredService("webx"), map[string]any{}); err != nil {
		t.Fatal(err)
	}

	t.Run("dry run writes nothing", func(t *testing.T) {
		before := stored(t, s, "")
		res, err := Apply(ctx, s, mustDecode(t, webV1), Options{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Written || len(res.Changes) != 11 {
			t.Fatalf("dry run: written=%v, %d changes:\n%s", res.Written, len(res.Changes), changeLines(res.Changes))
		}
		if after := stored(t, s, ""); len(after) != len(before) {
			t.Fatalf("dry run changed the store: %d keys before, %d after", len(before), len(after))
		}
	})

	var rev1 int64
	t.Run("first apply puts every fact in one revision", func(t *testing.T) {
		res, err := Apply(ctx, s, mustDecode(t, webV1), Options{})
		if err != nil {
			t.Fatal(err)
		}
		rev1 = res.Rev
		want := `+ desired/service/web = {}
+ desired/service/web/expose/8080 = {}
+ desired/service/web/expose/9090 = {}
+ desired/service/web/image = "nginx:1.28"
+ desired/service/web/instances = 3
+ desired/service/web/resources/cpu = 0.5
+ desired/service/web/resources/memory = "256Mi"
+ desired/volume/data = {}
+ desired/volume/data/persistent = true
+ desired/volume/data/size = "10Gi"
+ intent/user/service/web/instances = 3`
		if got := changeLines(res.Changes); got != want {
			t.Fatalf("changes:\n%s\nwant:\n%s", got, want)
		}
		fs, _, _ := s.List(ctx, "desired/service/web/", 0)
		for _, f := range fs {
			if f.ModRevision != res.Rev {
				t.Errorf("%s written at revision %d, the apply at %d: not one transaction", f.Key, f.ModRevision, res.Rev)
			}
		}
	})

	t.Run("re-applying writes nothing", func(t *testing.T) {
		res, err := Apply(ctx, s, mustDecode(t, webV1), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Written || len(res.Changes) != 0 || res.Rev != rev1 {
			t.Fatalf("re-apply: written=%v rev=%d (was %d) changes:\n%s", res.Written, res.Rev, rev1, changeLines(res.Changes))
		}
	})

	t.Run("changed and removed attributes", func(t *testing.T) {
		res, err := Apply(ctx, s, mustDecode(t, webV2), Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := `- desired/service/web/expose/9090 (was {})
~ desired/service/web/image = "nginx:1.28" -> "nginx:1.29"
- desired/service/web/resources/cpu (was 0.5)
- desired/service/web/resources/memory (was "256Mi")`
		if got := changeLines(res.Changes); got != want {
			t.Fatalf("changes:\n%s\nwant:\n%s", got, want)
		}
		got := stored(t, s, "desired/", "intent/")
		for _, k := range []string{"desired/service/web/expose/9090", "desired/service/web/resources/cpu"} {
			if _, ok := got[k]; ok {
				t.Errorf("%s survived its removal from the file", k)
			}
		}
		if got["desired/service/other"] != "{}" || got["desired/service/webx"] != "{}" {
			t.Errorf("apply touched services the file does not name: %v", got)
		}
	})

	t.Run("delete removes desired facts and user intent", func(t *testing.T) {
		res, err := Delete(ctx, s, KindService, "web", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Changes) != 5 || !res.Written {
			t.Fatalf("delete: %s", changeLines(res.Changes))
		}
		got := stored(t, s, "desired/service/web", "intent/user/service/web")
		if len(got) != 1 || got["desired/service/webx"] != "{}" {
			t.Fatalf("after delete: %v, want only desired/service/webx", got)
		}
		if _, err := Delete(ctx, s, KindService, "web", Options{}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second delete: %v, want ErrNotFound", err)
		}
		if _, err := Delete(ctx, s, KindVolume, "data", Options{}); err != nil {
			t.Fatal(err)
		}
		if got := stored(t, s, "desired/volume/"); len(got) != 0 {
			t.Fatalf("volume facts left: %v", got)
		}
	})
}

// TestApplyConcurrent races appliers of different versions of one service:
// each apply is one transaction, so the store always ends equal to exactly
// one of the versions, never a mix.
func TestApplyConcurrent(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	docs := []*Doc{mustDecode(t, webV1), mustDecode(t, webV2)}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := Apply(ctx, s, docs[i%2], Options{Attempts: 20}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := stored(t, s, "desired/", "intent/")
	for k := range got {
		if strings.HasPrefix(k, "desired/history/") { // the applies' history, not a version of the files
			delete(got, k)
		}
	}
	match := 0
	for _, d := range docs {
		want := factMap(d.Facts())
		if len(want) == len(got) {
			same := true
			for k, v := range want {
				if got[k] != v {
					same = false
				}
			}
			if same {
				match++
			}
		}
	}
	if match != 1 {
		t.Fatalf("store is a mix of versions: %v", got)
	}
}

func TestApplyConflictRetries(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	if _, err := Apply(ctx, s, mustDecode(t, webV1), Options{}); err != nil {
		t.Fatal(err)
	}
	// A guarded txn built from a stale read must fail, not overwrite.
	have, _, err := read(ctx, s, []scope{scopeOf(KindService, "web")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutValue(ctx, facts.ServiceImage("web"), "nginx:9"); err != nil {
		t.Fatal(err)
	}
	want := factMap(mustDecode(t, webV2).Facts())
	wantB := map[string][]byte{}
	for k, v := range want {
		wantB[k] = []byte(v)
	}
	_, err = s.Commit(ctx, txnOf(diff(have, wantB), have))
	if !errors.Is(err, facts.ErrConflict) {
		t.Fatalf("stale txn: %v, want ErrConflict", err)
	}
	// Apply itself re-reads and succeeds.
	if _, err := Apply(ctx, s, mustDecode(t, webV2), Options{}); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s, facts.ServiceImage("web")); got[facts.ServiceImage("web")] != `"nginx:1.29"` {
		t.Fatalf("image after apply: %v", got)
	}
}

// TestApplyRefusesUndeclaredVolume: a service may name only a volume the
// files or the store declare; a refused apply writes nothing, and a volume
// a service uses cannot be deleted from under it.
func TestApplyRefusesUndeclaredVolume(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	db := "service \"db\" {\n  image  = \"pg:16\"\n  volume = \"data\"\n}\n"
	_, err := Apply(ctx, s, mustDecode(t, db), Options{})
	var refused *RefusedError
	if !errors.As(err, &refused) || len(refused.Diags) != 1 {
		t.Fatalf("apply of a service naming an undeclared volume: %v", err)
	}
	if got := DiagString(refused.Diags[0]); got != `t.hcl:3:12: Undeclared volume: Service "db" names volume "data", which is not declared: add a volume "data" block to the files applied, or apply it first.` {
		t.Errorf("diagnostic: %s", got)
	}
	if got := stored(t, s, "desired/", "intent/", "event/"); len(got) != 0 {
		t.Fatalf("a refused apply wrote %v", got)
	}

	// Declared in the same files, or earlier: accepted.
	if _, err := Apply(ctx, s, mustDecode(t, db+"volume \"data\" { size = \"1Gi\" }\n"), Options{}); err != nil {
		t.Fatalf("service with its volume: %v", err)
	}
	if _, err := Apply(ctx, s, mustDecode(t, db), Options{}); err != nil {
		t.Fatalf("service alone, volume in the store: %v", err)
	}

	_, err = Delete(ctx, s, KindVolume, "data", Options{})
	if !errors.As(err, &refused) || !strings.Contains(refused.Error(), `Volume "data" is used by service "db"`) {
		t.Fatalf("delete of a volume in use: %v", err)
	}
	if got := stored(t, s, "desired/volume/"); len(got) != 2 {
		t.Fatalf("the refused delete changed the volume: %v", got)
	}
	if _, err := Delete(ctx, s, KindService, "db", Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Delete(ctx, s, KindVolume, "data", Options{}); err != nil {
		t.Fatalf("delete of a volume no longer in use: %v", err)
	}
}

// DeleteAll deletes services and volumes in one transaction: a volume
// deleted with the service using it is not refused; a name without facts,
// or a volume a service kept still names, deletes nothing.
func TestDeleteAll(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	ctx := context.Background()
	src := `service "db" {
  image     = "postgres:17"
  instances = 1
  volume    = "data"
}
service "web" {
  image     = "nginx:1.28"
  instances = 2
}
service "cache" {
  image = "redis:8"
}
volume "data" { size = "1Gi" }
`
	if _, err := Apply(ctx, s, mustDecode(t, src), Options{}); err != nil {
		t.Fatal(err)
	}
	before := stored(t, s, "desired/service/", "desired/volume/", "intent/")

	_, err := DeleteAll(ctx, s, []Ref{{KindService, "web"}, {KindService, "nope"}, {KindVolume, "gone"}}, Options{})
	if !errors.Is(err, ErrNotFound) || err.Error() != `service "nope" not found: nothing under desired/service/nope; volume "gone" not found: nothing under desired/volume/gone` {
		t.Fatalf("delete of web and two names without facts: %v, want ErrNotFound naming both", err)
	}
	var refused *RefusedError
	if _, err := DeleteAll(ctx, s, []Ref{{KindService, "web"}, {KindVolume, "data"}}, Options{}); !errors.As(err, &refused) ||
		!strings.Contains(refused.Error(), `Volume "data" is used by service "db"`) {
		t.Fatalf("delete of a volume its service keeps: %v", err)
	}
	if got := stored(t, s, "desired/service/", "desired/volume/", "intent/"); !maps.Equal(got, before) {
		t.Fatalf("refused deletes changed the facts:\n%v\nwant\n%v", got, before)
	}

	res, err := DeleteAll(ctx, s, []Ref{{KindService, "db"}, {KindVolume, "data"}, {KindService, "web"}}, Options{})
	if err != nil || !res.Written {
		t.Fatalf("delete of db with its volume, and web: %v, %+v", err, res)
	}
	revs := map[int64]bool{}
	fs, _, err := s.List(ctx, "event/", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		revs[f.ModRevision] = true
	}
	if len(fs) != 2 || !revs[res.Rev] {
		t.Errorf("records %v; want the apply's and one for the delete, at its revision %d", fs, res.Rev)
	}
	got := stored(t, s, "desired/service/", "desired/volume/", "intent/")
	want := map[string]string{}
	for k, v := range before {
		if strings.Contains(k, "/cache") {
			want[k] = v
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("after the delete: %v, want only cache's facts %v", got, want)
	}
}
