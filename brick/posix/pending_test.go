package posix

import (
	"fmt"
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

// A lookup racing the creation of a name never sees the new inode with a
// gfid other than the one it is created with: a lookup that finds an
// inode without a gfid (made on the brick by hand) gives it one, and must
// not take a file, directory or symlink being created for one (the
// healer took such a look for a split-brain during a rolling restart).
func TestLookupRacingCreateSeesItsGfid(t *testing.T) {
	s, _ := newBrick(t, "")
	const n = 300
	kinds := []func(p string, g layer.Gfid) error{
		func(p string, g layer.Gfid) error {
			f, _, err := s.Create(ctx, p, layer.CreateIn{Owner: layer.Owner{Gfid: g}, Flags: syscall.O_RDWR, Mode: 0o644})
			if err == nil {
				f.Release(ctx)
			}
			return err
		},
		func(p string, g layer.Gfid) error {
			_, err := s.Mkdir(ctx, p, layer.MkdirIn{Owner: layer.Owner{Gfid: g}, Mode: 0o755})
			return err
		},
		func(p string, g layer.Gfid) error {
			_, err := s.Symlink(ctx, p, layer.SymlinkIn{Owner: layer.Owner{Gfid: g}, Target: "x"})
			return err
		},
	}
	for k, mk := range kinds {
		for i := range n {
			p := fmt.Sprintf("/k%d-%d", k, i)
			g := layer.NewGfid()
			done := make(chan error, 1)
			go func() { done <- mk(p, g) }()
			var seen layer.Gfid
			for seen.IsZero() {
				a, err := s.Lookup(ctx, p)
				if err == nil {
					seen = a.Gfid
				} else if len(done) > 0 {
					break // created and looked up no more, or failed
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if seen.IsZero() {
				a, err := s.Lookup(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				seen = a.Gfid
			}
			if seen != g {
				t.Fatalf("%s: a lookup during its creation saw gfid %s, it was created with %s", p, seen, g)
			}
		}
	}
}

// A heal index entry is never seen without its path while it is made
// (the healer drops such an entry, and the inode's marks then wait for a
// full heal: a lost append in the rolling-restart test).
func TestHealIndexEntryNeverSeenEmpty(t *testing.T) {
	s, _ := newBrick(t, "")
	const n = 300
	done := make(chan error, 1)
	go func() {
		for i := range n {
			p := fmt.Sprintf("/e%d", i)
			f, _, err := s.Create(ctx, p, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
			if err != nil {
				done <- err
				return
			}
			f.Release(ctx)
			if err := s.MarkPending(ctx, p, layer.Gfid{}, 2); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for {
		entries, err := s.HealIndex(ctx, layer.Gfid{}, 2*n)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Path == "" {
				t.Fatalf("entry %s listed without its path", e.Gfid)
			}
		}
		if len(entries) == n {
			break
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			done <- nil
		default:
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A create with O_TRUNC of a file that exists changes its data: with
// replicas missing it, the file is marked too, not only its parent
// (found by the simulation: a replica that missed the truncation had
// the name already, so healing the parent's names left its old data).
// A create of a new file marks only the parent.
func TestTruncatingCreateMarksTheFile(t *testing.T) {
	s, _ := newBrick(t, "")
	f, _, err := s.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	pctx := layer.WithTxn(ctx, layer.Txn{Pending: 4})
	for _, p := range []string{"/f", "/new"} {
		f, _, err := s.Create(pctx, p, layer.CreateIn{Flags: syscall.O_WRONLY | syscall.O_TRUNC, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		f.Release(ctx)
	}
	for p, want := range map[string]uint64{"/": 4, "/f": 4, "/new": 0} {
		if a, err := s.Lookup(ctx, p); err != nil || a.Pending != want {
			t.Errorf("%s: pending %#x, %v; want %#x", p, a.Pending, err, want)
		}
	}
}
