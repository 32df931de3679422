package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestSnapshotRestore: a snapshot saved from a secure server, restored
// into a new data dir with `cluster snapshot restore`, starts a server
// with the same facts, rules and users (a user admitted before reads
// again), at a revision moved past the old one; mistaken restores are
// refused with what to do, and leave no half-written directory.
func TestSnapshotRestore(t *testing.T) {
	data := t.TempDir()
	srv := newServer(t, data)
	srv.ok(t, "apply", "-f", webExample)
	srv.admit(t, "user:bob")
	prefixes := []string{"desired/", "intent/", "auth/", "schema/"}
	before, _, oldRev := srv.factsUnder(t, prefixes...)
	if len(before) < 8 {
		t.Fatalf("too little to compare before the snapshot: %v", before)
	}
	file := filepath.Join(t.TempDir(), "backup.db")
	srv.ok(t, "cluster", "snapshot", "save", file)
	srv.stop(t)

	restored := filepath.Join(t.TempDir(), "restored")
	peer := etcdtest.FreePort(t)
	r := run(t, "cluster", "snapshot", "restore", file, "--data-dir", restored, "--listen-peer", fmt.Sprintf("https://127.0.0.1:%d", peer))
	if r.code != 0 || !strings.Contains(r.stdout, "restored into "+restored) {
		t.Fatalf("restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The CA is not in the snapshot: the operator copies it (docs/operations.md).
	if out, err := exec.Command("cp", "-a", filepath.Join(data, "pki"), filepath.Join(restored, "pki")).CombinedOutput(); err != nil {
		t.Fatalf("copy the CA: %v %s", err, out)
	}
	again := startServer(t, "--no-engine", "--data-dir", restored,
		"--listen-client", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--listen-peer", fmt.Sprintf("http://127.0.0.1:%d", peer))
	after, _, newRev := again.factsUnder(t, prefixes...)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s after the restore: %q, was %q", k, after[k], v)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s after the restore was not there before", k)
		}
	}
	if newRev < oldRev+defaultRevisionBump {
		t.Errorf("revision %d after the restore, %d before: want it moved by %d, so old watchers list again", newRev, oldRev, defaultRevisionBump)
	}
	bob, err := again.dialAs("user:bob")
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	if _, ok, err := bob.Get(context.Background(), "desired/service/web/image"); err != nil || !ok {
		t.Errorf("user:bob, admitted before the snapshot, reads after the restore: %v %v", ok, err)
	}

	junk := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(junk, []byte("not a snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"over a member's data", []string{file, "--data-dir", restored}, 1, "is not empty: restore into a new directory"},
		{"no data dir", []string{file}, 2, "--data-dir is required"},
		{"no such file", []string{filepath.Join(t.TempDir(), "nope.db"), "--data-dir", fresh}, 1, "no such file"},
		{"not a snapshot", []string{junk, "--data-dir", fresh}, 1, "snapshot restore of " + junk},
		{"a cluster without this member", []string{file, "--data-dir", fresh, "--initial-cluster", "s2=https://127.0.0.1:1"}, 1, `has no member named "ccattler"`},
		{"a plain peer URL with secure members", []string{file, "--data-dir", fresh, "--listen-peer", "http://127.0.0.1:1", "--initial-cluster", "ccattler=http://127.0.0.1:1,s2=https://127.0.0.1:2"}, 1, "the URL is http://"},
	} {
		r := run(t, append([]string{"cluster", "snapshot", "restore"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d naming %q", tc.name, r.code, r.stderr, tc.code, tc.want)
		}
		if ents, _ := os.ReadDir(fresh); len(ents) > 0 {
			t.Errorf("%s: left %d entries in %s", tc.name, len(ents), fresh)
		}
	}
}
