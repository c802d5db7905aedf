package heal

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
)

func rename(from, to string) func(context.Context, layer.Layer) error {
	return func(ctx context.Context, l layer.Layer) error { return l.Rename(ctx, from, to, 0) }
}

// populated makes /d (gfid gd) with files and a subdirectory everywhere.
func populated(c *cluster, d string, gd layer.Gfid) {
	c.t.Helper()
	c.everywhere(seq(
		mkdir(d, gd),
		create(d+"/f1", layer.NewGfid(), pattern(5000, 1)),
		create(d+"/f2", layer.NewGfid(), pattern(70000, 2)),
		mkdir(d+"/s", layer.NewGfid()),
		create(d+"/s/g", layer.NewGfid(), pattern(3000, 3)),
	))
}

// A directory renamed in place while replica 2 was away, then an existing
// file in it written (and, with newFiles, names created in it): the sink
// holds the directory under its old name. The file's index entry is
// healed before the root's (the index is scanned in gfid order), so the
// sink lacks the new name of the directory when the file is healed. The
// sink must end up with everything under the new name, and the files it
// had must not be copied again (the directory is renamed on the sink).
func TestDirRenamedWhileAway(t *testing.T) {
	for _, newFiles := range []bool{false, true} {
		name := "existing files written"
		if newFiles {
			name = "new files too"
		}
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, 3, false)
			gd := layer.NewGfid()
			populated(c, "/d", gd)
			ops := []func(context.Context, layer.Layer) error{
				rename("/d", "/d2"),
				write("/d2/f1", []byte("changed"), 100),
			}
			if newFiles {
				ops = append(ops, create("/d2/new", layer.NewGfid(), pattern(1000, 4)),
					mkdir("/d2/s2", layer.NewGfid()), create("/d2/s2/h", layer.NewGfid(), []byte("h")))
			}
			c.without2(seq(ops...))
			h := c.healer(Options{})
			c.counts[2].Reset()
			if err := h.Heal(bg, 0, "/d2/f1"); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				scan(h)
			}
			c.healthy()
			a, err := c.stores[2].Lookup(bg, "/d2")
			if err != nil || a.Gfid != gd {
				t.Fatalf("/d2 on the sink: %v gfid %s, want %s", err, a.Gfid, gd)
			}
			// f1's changed chunk, and with newFiles the two new files.
			want := 1
			if newFiles {
				want = 3
			}
			if n := c.counts[2].Count("Write"); n != want {
				t.Errorf("%d writes on the sink, want %d: the renamed directory was copied again", n, want)
			}
		})
	}
}

// The same, healed by scans alone (whatever the order of the index).
func TestDirRenamedWhileAwayScan(t *testing.T) {
	c := newCluster(t, 3, false)
	populated(c, "/d", layer.NewGfid())
	c.without2(seq(rename("/d", "/d2"), write("/d2/f1", []byte("changed"), 100),
		write("/d2/s/g", []byte("changed"), 0)))
	h := c.healer(Options{})
	for range 2 {
		scan(h)
	}
	c.healthy()
}

// A directory moved to another directory while replica 2 was away: the
// sink cannot rename it (heal works one directory at a time), so it gets
// a new copy of the whole subtree under the new name, even though nothing
// in the moved directory itself is marked, and the old one goes.
func TestDirMovedAcrossWhileAway(t *testing.T) {
	for _, first := range []string{"", "/b/d/f1"} {
		t.Run("first="+first, func(t *testing.T) {
			c := newCluster(t, 3, false)
			c.everywhere(seq(mkdir("/a", layer.NewGfid()), mkdir("/b", layer.NewGfid())))
			populated(c, "/a/d", layer.NewGfid())
			ops := []func(context.Context, layer.Layer) error{rename("/a/d", "/b/d")}
			if first != "" {
				ops = append(ops, write(first, []byte("changed"), 100))
			}
			c.without2(seq(ops...))
			h := c.healer(Options{})
			if first != "" {
				if err := h.Heal(bg, 0, first); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				scan(h)
			}
			c.healthy()
		})
	}
}

// Files written in a directory (marked, and indexed at their paths then),
// then the directory renamed, all while replica 2 was away. The bricks
// move the index entries with the rename; with stale, the entries still
// name the old paths (a brick that died between the rename and the index
// update, or one from before), which lead nowhere: when the sink's copy of
// the directory is renamed, its subtree is visited for marks.
func TestWrittenThenDirRenamedWhileAway(t *testing.T) {
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale=%v", stale), func(t *testing.T) {
			c := newCluster(t, 3, false)
			populated(c, "/d", layer.NewGfid())
			c.without2(seq(
				write("/d/f1", []byte("changed"), 100),
				write("/d/s/g", []byte("changed"), 0),
				setattr("/d/f2", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o600}),
				rename("/d", "/d2"),
			))
			for i := range 2 {
				for _, e := range mustIndex(t, c, i) {
					if stale && strings.HasPrefix(e.Path, "/d2/") {
						name := filepath.Join(c.stores[i].Root(), posix.HealDir, hex.EncodeToString(e.Gfid[:]))
						if err := os.WriteFile(name, []byte("/d/"+strings.TrimPrefix(e.Path, "/d2/")), 0o600); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			h := c.healer(Options{})
			c.counts[2].Reset()
			for range 2 {
				scan(h)
			}
			c.healthy()
			if n := c.counts[2].Count("Write"); n != 2 {
				t.Errorf("%d writes on the sink, want 2 (the chunks that changed)", n)
			}
		})
	}
}

// Inodes marked while replica 2 was away, then renamed, themselves or with
// their directory, while every replica is up again (before the healer got
// to them): nothing marks the directories, so only the index entries lead
// to the inodes, and the bricks keep them at the new paths.
func TestMarkedThenRenamedWithAllUp(t *testing.T) {
	c := newCluster(t, 3, false)
	populated(c, "/d", layer.NewGfid())
	c.everywhere(seq(mkdir("/e", layer.NewGfid()), create("/e/x", layer.NewGfid(), pattern(100, 5))))
	c.without2(seq(
		write("/d/s/g", []byte("changed"), 0),
		write("/d/f1", []byte("changed"), 0),
		setattr("/d/f2", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o600}),
		write("/e/x", []byte("changed"), 0),
	))
	c.everywhere(seq(
		rename("/d/f2", "/d/f3"),  // in place
		rename("/d/f1", "/e/f1"),  // to another directory
		rename("/d", "/d2"),       // the directory, with /d/s/g under it
		rename("/e/x", "/d2/s/x"), // to a subdirectory of a renamed one
	))
	for i := range 2 {
		for _, e := range mustIndex(t, c, i) {
			if a, err := c.stores[i].Lookup(bg, e.Path); err != nil || a.Gfid != e.Gfid {
				t.Errorf("replica %d: index entry %s names %s, which is not it (%v)", i, e.Gfid, e.Path, err)
			}
		}
	}
	h := c.healer(Options{})
	scan(h)
	c.healthy()
}
