package facts_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// A backend over its quota raises etcd's NOSPACE alarm and etcd takes no
// more puts. Compacting alone does not end it; RecoverSpace, after the
// compaction, defragments and disarms, and writes go on.
func TestRecoverSpaceAfterNoSpace(t *testing.T) {
	e := etcdtest.Start(t)
	e.Etcd.Close()
	e.Cfg.QuotaBackend = 16 << 20
	e.Restart(t)
	s := e.Store(t)
	ctx := context.Background()

	if done, err := s.RecoverSpace(ctx); err != nil || done {
		t.Fatalf("RecoverSpace with no alarm = %v, %v; want false, nil", done, err)
	}
	value := strings.Repeat("x", 256<<10)
	var last int64
	var err error
	for i := 0; i < 1000; i++ { // rewrites of 8 keys: history is what fills the backend
		var rev int64
		rev, err = etcdtest.PutRaw(ctx, s, fmt.Sprintf("observed/blob/%d", i%8), `"`+value+`"`)
		if err != nil {
			break
		}
		last = rev
	}
	if !errors.Is(err, facts.ErrNoSpace) {
		t.Fatalf("after filling the backend: %v, want ErrNoSpace", err)
	}
	if alarmed, err := s.SpaceAlarmed(ctx); err != nil || !alarmed {
		t.Fatalf("SpaceAlarmed = %v, %v; want true", alarmed, err)
	}
	if err := s.CompactAndWait(ctx, last); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdtest.PutRaw(ctx, s, "observed/blob/0", `"small"`); !errors.Is(err, facts.ErrNoSpace) {
		t.Fatalf("a put after compacting alone: %v, want ErrNoSpace still", err)
	}
	done, err := s.RecoverSpace(ctx)
	if err != nil || !done {
		t.Fatalf("RecoverSpace = %v, %v; want true", done, err)
	}
	if alarmed, err := s.SpaceAlarmed(ctx); err != nil || alarmed {
		t.Fatalf("SpaceAlarmed after recovering = %v, %v; want false", alarmed, err)
	}
	if _, err := etcdtest.PutRaw(ctx, s, "observed/blob/0", `"small"`); err != nil {
		st, _ := s.Client.Status(ctx, e.Endpoints()[0])
		al, _ := s.Client.AlarmList(ctx)
		t.Fatalf("a put after recovering: %v (db %d in use %d, alarms %v)", err, st.DbSize, st.DbSizeInUse, al.Alarms)
	}
}
