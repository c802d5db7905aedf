package posix

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// Index entries follow renames: the renamed inode's own entry, and for a
// directory the entries of everything under it; others are left alone.
func TestHealIndexFollowsRenames(t *testing.T) {
	s, dir := newBrick(t, "")
	mk := func(p string) {
		t.Helper()
		if _, err := s.Mkdir(ctx, p, layer.MkdirIn{Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	touch := func(p string) {
		t.Helper()
		f, _, err := s.Create(ctx, p, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		f.Release(ctx)
	}
	mk("/d")
	mk("/d/s")
	mk("/dd")
	touch("/d/s/f")
	touch("/d/g")
	touch("/dd/h") // under a name that /d is a prefix of
	touch("/x")
	for _, p := range []string{"/d/s/f", "/d/g", "/d", "/dd/h", "/x"} {
		if err := s.MarkPending(ctx, p, layer.Gfid{}, 2); err != nil {
			t.Fatal(err)
		}
	}
	// With pending replicas (the renames mark the parents) and without.
	pctx := layer.WithTxn(ctx, layer.Txn{Pending: 4})
	if err := s.Rename(pctx, "/d", "/e", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(ctx, "/x", "/e/s/x", 0); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	entries, err := s.HealIndex(ctx, layer.Gfid{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		a, err := s.Lookup(ctx, e.Path)
		if err != nil || a.Gfid != e.Gfid {
			t.Errorf("entry %s names %s, which is not it (%v)", e.Gfid, e.Path, err)
		}
		got[e.Path] = true
	}
	for _, p := range []string{"/e/s/f", "/e/g", "/e", "/dd/h", "/e/s/x", "/"} {
		if !got[p] {
			t.Errorf("no entry for %s; entries: %v", p, got)
		}
	}
	left, _ := os.ReadDir(filepath.Join(dir, HealDir))
	if len(left) != len(entries) {
		t.Errorf("%d files in the index for %d entries", len(left), len(entries))
	}
}
