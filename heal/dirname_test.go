package heal

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
)

// A client died renaming a directory: the rename reached some replicas
// only, nothing blames the others, and the bricks that did it marked the
// parents Dirty as the client's connection ended without a goodbye.
// Replicate renames a directory on the set's first replica (the decider)
// before the others: once quiet, heal gives every replica the decider's
// name for it, and nothing under it is lost.
func TestAbandonedDirectoryRenameTakesTheDecidersName(t *testing.T) {
	for _, tc := range []struct {
		did      []int
		from, to string
		want     string // the name every replica ends with
	}{
		{[]int{0}, "/p/d1", "/p/d1~", "/p/d1~"},
		{[]int{0, 1}, "/p/d1", "/p/d1~", "/p/d1~"},
		{[]int{1}, "/p/d1", "/p/d1~", "/p/d1"},    // the decider's answer lost, its rename not done
		{[]int{1, 2}, "/p/d1", "/p/d1~", "/p/d1"}, // the same
		{[]int{0}, "/p/d1", "/q/d1", "/q/d1"},     // across directories
		{[]int{0, 2}, "/p/d1", "/q/e", "/q/e"},
		{[]int{2}, "/p/d1", "/q/e", "/p/d1"},
	} {
		t.Run(fmt.Sprintf("%v %s to %s", tc.did, tc.from, tc.to), func(t *testing.T) {
			c := newCluster(t, 3, false)
			gd, data := layer.NewGfid(), pattern(5000, 3)
			c.everywhere(seq(mkdir("/p", layer.NewGfid()), mkdir("/q", layer.NewGfid()), mkdir(tc.from, gd),
				create(tc.from+"/f", layer.NewGfid(), data), mkdir(tc.from+"/s", layer.NewGfid())))
			for _, i := range tc.did {
				if err := rename(tc.from, tc.to)(bg, c.stores[i]); err != nil {
					t.Fatal(err)
				}
				for _, p := range []string{path.Dir(tc.from), path.Dir(tc.to)} {
					a, err := c.stores[i].Lookup(bg, p)
					if err != nil {
						t.Fatal(err)
					}
					if err := c.stores[i].MarkPending(bg, p, a.Gfid, layer.Dirty); err != nil {
						t.Fatal(err)
					}
				}
			}
			c.scanSettled(c.healer(Options{Quiet: time.Nanosecond}))
			c.healthy()
			gone := tc.from
			if tc.want == tc.from {
				gone = tc.to
			}
			for i, s := range c.stores {
				if a, err := s.Lookup(bg, tc.want); err != nil || a.Gfid != gd {
					t.Errorf("replica %d's %s: %v, gfid %s, want %s", i, tc.want, err, a.Gfid, gd)
				}
				if _, err := s.Lookup(bg, gone); err == nil {
					t.Errorf("replica %d holds %s still", i, gone)
				}
				sameBytes(t, fmt.Sprintf("replica %d's %s/f", i, tc.want), c.content(i, tc.want+"/f"), data)
			}
		})
	}
}

// A directory renamed into another directory while replica 2 was away:
// the sink's copy is moved where the good copies hold it (the heal of the
// directory it went to comes first, in gfid order or not), not made a
// second time beside the stale one, and nothing in it is copied again.
func TestDirMovedAcrossWhileAwayIsMovedOnTheSink(t *testing.T) {
	c := newCluster(t, 3, false)
	gd := layer.NewGfid()
	c.everywhere(seq(mkdir("/p", layer.NewGfid()), mkdir("/q", layer.NewGfid())))
	populated(c, "/p/d", gd)
	c.without2(rename("/p/d", "/q/e"))
	h := c.healer(Options{})
	c.counts[2].Reset()
	if err := h.Heal(bg, 0, "/q"); err != nil {
		t.Fatal(err)
	}
	if a, err := c.stores[2].Lookup(bg, "/q/e"); err != nil || a.Gfid != gd {
		t.Fatalf("the sink's /q/e after /q's heal: %v, gfid %s, want %s", err, a.Gfid, gd)
	}
	if _, err := c.stores[2].Lookup(bg, "/p/d"); err == nil {
		t.Fatal("the sink holds /p/d beside /q/e")
	}
	c.scanSettled(h)
	c.healthy()
	if n := c.counts[2].Count("Write") + c.counts[2].Count("Mkdir"); n != 0 {
		t.Errorf("%d writes and mkdirs on the sink: the moved directory was copied again", n)
	}
}

// markDirtyOn marks paths Dirty on replica i alone, as its brick does
// when the connection of a client that changed names there ends.
func (c *cluster) markDirtyOn(i int, paths ...string) {
	c.t.Helper()
	for _, p := range paths {
		a, err := c.stores[i].Lookup(bg, p)
		if err != nil {
			c.t.Fatal(err)
		}
		if err := c.stores[i].MarkPending(bg, p, a.Gfid, layer.Dirty); err != nil {
			c.t.Fatal(err)
		}
	}
}

// A client renamed /p/d1 to /q/d1 on the decider alone and died; another
// client then renamed /p/d1, as replicas 1 and 2 hold it, to /p/x: the
// decider refused (ENOENT), the others did it, a quorum, acknowledged,
// blaming the decider on /p. Whichever directory heals first, the
// acknowledged /p/x stands (a review: /q's heal, taking the decider's
// name, moved 1 and 2's /p/x to /q/d1).
func TestAcknowledgedRenameAfterAnAbandonedOneStands(t *testing.T) {
	for _, first := range []string{"/q", "/p"} {
		t.Run(first, func(t *testing.T) {
			c := newCluster(t, 3, false)
			gd := layer.NewGfid()
			c.everywhere(seq(mkdir("/p", layer.NewGfid()), mkdir("/q", layer.NewGfid()), mkdir("/p/d1", gd),
				create("/p/d1/f", layer.NewGfid(), pattern(100, 1))))
			if err := rename("/p/d1", "/q/d1")(bg, c.stores[0]); err != nil {
				t.Fatal(err)
			}
			c.markDirtyOn(0, "/p", "/q")
			c.on([]int{1, 2}, rename("/p/d1", "/p/x"))
			h := c.healer(Options{Quiet: time.Nanosecond})
			h.Heal(bg, 0, first) // may fail: the other directory's heal settles it
			c.scanSettled(h)
			c.healthy()
			for i, s := range c.stores {
				if a, err := s.Lookup(bg, "/p/x"); err != nil || a.Gfid != gd {
					t.Errorf("replica %d's acknowledged /p/x: %v, gfid %s", i, err, a.Gfid)
				}
			}
		})
	}
}

// The decider's copy of the directory it moved a directory to is blamed
// by the others (it missed a create there) while /p is Dirty on it: each
// directory's heal takes another decider; the copies still end equal,
// with the file.
func TestDecidersDifferPerDirectory(t *testing.T) {
	c := newCluster(t, 3, false)
	gd, data := layer.NewGfid(), pattern(100, 1)
	c.everywhere(seq(mkdir("/p", layer.NewGfid()), mkdir("/q", layer.NewGfid()), mkdir("/p/d1", gd),
		create("/p/d1/f", layer.NewGfid(), data)))
	if err := rename("/p/d1", "/q/d1")(bg, c.stores[0]); err != nil {
		t.Fatal(err)
	}
	c.markDirtyOn(0, "/p", "/q")
	c.markDirtyOn(1, "/q")
	c.markDirtyOn(2, "/q")
	c.on([]int{1, 2}, create("/q/x", layer.NewGfid(), nil))
	h := c.healer(Options{Quiet: time.Nanosecond})
	h.Heal(bg, 0, "/q")
	h.Heal(bg, 0, "/p")
	c.scanSettled(h)
	c.healthy()
	for i, s := range c.stores {
		a, err := s.Lookup(bg, layer.IDPath(gd))
		if err != nil || !a.IsDir() {
			t.Fatalf("replica %d lost the directory: %v", i, err)
		}
	}
}

// Good copies holding one directory under two names (a second directory
// of its gfid, made by a heal older than 2026-11-29, behind the brick's
// back here: a brick now refuses to make one): the sink is not given a
// second directory (its brick refuses, and heal does not try), and heal
// says why it cannot settle the name (errTwoNames) rather than move the
// sink's copy back and forth or fail on EEXIST.
func TestSecondDirectoryOfAGfidLeftToTheOperator(t *testing.T) {
	for _, second := range []string{"/p/b", "/q/b"} {
		t.Run(second, func(t *testing.T) {
			c := newCluster(t, 3, false)
			gd := layer.NewGfid()
			c.everywhere(seq(mkdir("/p", layer.NewGfid()), mkdir("/q", layer.NewGfid()), mkdir("/p/a", gd)))
			for _, i := range []int{0, 1} {
				raw := filepath.Join(c.dirs[i], second)
				if err := os.Mkdir(raw, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := unix.Setxattr(raw, posix.XattrGfid, gd[:], 0); err != nil {
					t.Fatal(err)
				}
				if err := c.stores[i].MarkPending(bg, parentDir(second), layer.Gfid{}, 1<<2); err != nil {
					t.Fatal(err)
				}
			}
			h := c.healer(Options{})
			if err := h.Heal(bg, 0, parentDir(second)); !errors.Is(err, errTwoNames) {
				t.Errorf("heal of %s: %v, want errTwoNames", parentDir(second), err)
			}
			if _, err := c.stores[2].Lookup(bg, second); !errors.Is(err, syscall.ENOENT) {
				t.Errorf("replica 2 given %s: %v", second, err)
			}
			if at := c.where(gd); at[2] != "/p/a" {
				t.Errorf("replica 2's copy moved to %s", at[2])
			}
		})
	}
}

// A directory renamed over an empty one by the decider (and maybe
// another replica), the client gone: the others' copy is renamed over
// their empty one too (the decider's outcome), and the file in it is
// everywhere (before, the name with two gfids went to the majority's
// empty directory, and the decider's copy was made again from the
// others').
func TestAbandonedRenameOverAnEmptyDirectory(t *testing.T) {
	for _, did := range [][]int{{0}, {0, 1}} {
		t.Run(fmt.Sprint(did), func(t *testing.T) {
			c := newCluster(t, 3, false)
			data := pattern(100, 1)
			c.everywhere(seq(mkdir("/p", layer.NewGfid()), mkdir("/p/a", layer.NewGfid()), mkdir("/p/b", layer.NewGfid()),
				create("/p/a/f", layer.NewGfid(), data)))
			for _, i := range did {
				if err := rename("/p/a", "/p/b")(bg, c.stores[i]); err != nil {
					t.Fatal(err)
				}
				c.markDirtyOn(i, "/p")
			}
			c.scanSettled(c.healer(Options{Quiet: time.Nanosecond}))
			c.healthy()
			for i := range c.stores {
				sameBytes(t, fmt.Sprintf("replica %d's /p/b/f", i), c.content(i, "/p/b/f"), data)
				if _, err := c.stores[i].Lookup(bg, "/p/a"); err == nil {
					t.Errorf("replica %d holds /p/a still", i)
				}
			}
		})
	}
}

// The decider renamed /p/d1 to /p/d1~ and its client died; other clients
// then made and removed files in /p/d1 on replicas 1 and 2 (the decider,
// lacking /p/d1, missed them and is blamed there). Whichever name heal
// keeps (the decider's, when the Dirty parent heals first; /p/d1 when
// /p/d1's own marks do), the directory's names are the newer copies',
// not the decider's (sim replica3x2-dirs seed 15: the decider's copy,
// marked the source before the others' were moved to its name, took an
// acknowledged file from them).
func TestDirectoryMovedToTheDecidersNameKeepsItsNewerNames(t *testing.T) {
	for _, to := range []string{"/p/d1~", "/q/d1"} {
		for _, first := range []string{"/p", ""} {
			t.Run(to+" first "+first, func(t *testing.T) {
				c := newCluster(t, 3, false)
				gd, data := layer.NewGfid(), pattern(3283, 5)
				c.everywhere(seq(mkdir("/p", layer.NewGfid()), mkdir("/q", layer.NewGfid()), mkdir("/p/d1", gd),
					create("/p/d1/old", layer.NewGfid(), []byte("old"))))
				if err := rename("/p/d1", to)(bg, c.stores[0]); err != nil {
					t.Fatal(err)
				}
				c.markDirtyOn(0, "/p", path.Dir(to))
				c.on([]int{1, 2}, seq(create("/p/d1/new", layer.NewGfid(), data), unlink("/p/d1/old")))
				h := c.healer(Options{Quiet: time.Nanosecond})
				if first != "" {
					if err := h.Heal(bg, 0, first); err != nil {
						t.Fatal(err)
					}
				}
				c.scanSettled(h)
				c.healthy()
				at, err := c.stores[0].Getxattr(bg, layer.IDPath(gd), layer.XattrPath)
				if err != nil {
					t.Fatal(err)
				}
				if first != "" && string(at) != to {
					t.Errorf("the directory at %s, want the decider's %s", at, to)
				}
				for i := range c.stores {
					sameBytes(t, fmt.Sprintf("replica %d's %s/new", i, at), c.content(i, string(at)+"/new"), data)
					if _, err := c.stores[i].Lookup(bg, string(at)+"/old"); err == nil {
						t.Errorf("replica %d holds %s/old, removed", i, at)
					}
				}
			})
		}
	}
}

// where returns where each replica holds directory g (or its error).
func (c *cluster) where(g layer.Gfid) []string {
	var out []string
	for r := range c.stores {
		at, err := c.stores[r].Getxattr(bg, layer.IDPath(g), layer.XattrPath)
		if err != nil {
			at = []byte(err.Error())
		}
		out = append(out, string(at))
	}
	return out
}

// mkdir d1; create d1/f; mv d1 d1~, the client dying after the decider's
// rename: its brick marks /p and d1 Dirty, the others d1 (the create).
// The heal of /p moves the others' copies to the decider's name itself:
// left to the heal of that name, which looks at nothing while d1 is
// Dirty and not quiet, /p's marks went and the replicas kept two names
// (a review).
func TestAbandonedRenameOfADirtyDirectorySettled(t *testing.T) {
	c := newCluster(t, 3, false)
	gd := layer.NewGfid()
	c.everywhere(seq(mkdir("/p", layer.NewGfid()), mkdir("/p/d1", gd), create("/p/d1/f", layer.NewGfid(), pattern(100, 1))))
	if err := rename("/p/d1", "/p/d1~")(bg, c.stores[0]); err != nil {
		t.Fatal(err)
	}
	c.markDirtyOn(0, "/p", "/p/d1~")
	c.markDirtyOn(1, "/p/d1")
	c.markDirtyOn(2, "/p/d1")
	h := c.healer(Options{Quiet: time.Nanosecond})
	for range 2 { // the first look finds /p not quiet yet
		if err := h.Heal(bg, 0, "/p"); err != nil {
			t.Fatal(err)
		}
	}
	if at := c.where(gd); at[1] != "/p/d1~" || at[2] != "/p/d1~" {
		t.Fatalf("after /p's heal the directory is at %q", at)
	}
	c.scanSettled(h)
	c.healthy()
}

// The decider renamed /p/d1 to /p/d1~ and its client died, /p Dirty on
// every brick; the decider is down when heal settles /p on the others'
// /p/d1, which clients then use. Back, the decider is blamed for /p (a
// sink), and does not move the directory to its name (a review: back with
// its own Dirty mark, it was the first good copy and moved it, and
// /p/d1/new, acknowledged, was gone from its path).
func TestSettledNameKeptWhenTheDeciderReturns(t *testing.T) {
	c := newCluster(t, 3, false)
	gd := layer.NewGfid()
	c.everywhere(seq(mkdir("/p", layer.NewGfid()), mkdir("/p/d1", gd)))
	if err := rename("/p/d1", "/p/d1~")(bg, c.stores[0]); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c.markDirtyOn(i, "/p")
	}
	c.up[0].Store(false)
	h := c.healer(Options{Quiet: time.Nanosecond})
	for range 2 {
		h.Heal(bg, 0, "/p") // the first look finds /p not quiet yet
	}
	c.on([]int{1, 2}, create("/p/d1/new", layer.NewGfid(), []byte("acknowledged")))
	c.up[0].Store(true)
	c.scanSettled(h)
	c.healthy()
	for i, s := range c.stores {
		if _, err := s.Lookup(bg, "/p/d1/new"); err != nil {
			t.Errorf("replica %d: acknowledged /p/d1/new: %v (the directory at %q)", i, err, c.where(gd))
		}
	}
}

// As TestDirectoryMovedToTheDecidersNameKeepsItsNewerNames, but /p is
// never quiet (clients keep changing it), so its Dirty heal never runs:
// the heal of d1's own marks moves the others' copies to the decider's
// name and then heals the decider's copy (a review: it refused the move
// at every scan, and the decider never got the acknowledged file).
func TestBusyDirtyParentDoesNotBlockTheChildsHeal(t *testing.T) {
	c := newCluster(t, 3, false)
	gd, data := layer.NewGfid(), pattern(3283, 5)
	c.everywhere(seq(mkdir("/p", layer.NewGfid()), mkdir("/p/d1", gd)))
	if err := rename("/p/d1", "/p/d1~")(bg, c.stores[0]); err != nil {
		t.Fatal(err)
	}
	c.markDirtyOn(0, "/p")
	c.on([]int{1, 2}, create("/p/d1/new", layer.NewGfid(), data))
	h := c.healer(Options{Quiet: time.Hour})
	for range 3 {
		scan(h)
	}
	for i := range c.stores {
		sameBytes(t, fmt.Sprintf("replica %d's /p/d1~/new", i), c.content(i, "/p/d1~/new"), data)
	}
}

// The decider renamed /p/d1 to /p/d1~ and its client died, while the
// copies of /p blame each other for other names (each made one the other
// missed) and replicas 1 and 2 made a file in /p/d1 the decider missed:
// the heal of /p would move their copy to the decider's name and the
// heal of /p/d1 the decider's copy to theirs, each refused as the other
// side's directory blamed it, for ever (sim replica3x2-dirs seed 15).
// The lower replica's place wins.
func TestDirectoryMovedWhereParentsBlameEachOther(t *testing.T) {
	c := newCluster(t, 3, false)
	gd, data := layer.NewGfid(), pattern(1000, 9)
	c.everywhere(seq(mkdir("/p", layer.NewGfid()), mkdir("/p/d1", gd)))
	if err := rename("/p/d1", "/p/d1~")(bg, c.stores[0]); err != nil {
		t.Fatal(err)
	}
	c.markDirtyOn(0, "/p")
	c.on([]int{0}, create("/p/x", layer.NewGfid(), []byte("x")))
	c.on([]int{2}, create("/p/y", layer.NewGfid(), []byte("y")))
	c.on([]int{1, 2}, create("/p/d1/new", layer.NewGfid(), data))
	c.scanSettled(c.healer(Options{Quiet: time.Nanosecond}))
	c.healthy()
	at := c.where(gd)
	for i := range c.stores {
		sameBytes(t, fmt.Sprintf("replica %d's %s/new", i, at[i]), c.content(i, at[i]+"/new"), data)
	}
}

// Replicas 0 and 2 renamed /d1 to /d1~ (replica 1 blamed for it on /),
// while replica 1 removed a file in the directory the others missed (its
// copy of the directory blames them). The heal of / moves replica 1's
// copy to /d1~; judged there with its own marks, not distrusted for its
// stale name, it is the newer copy and the file stays removed (sim
// replica3x2-dirs seed 48: an acknowledged unlink undone).
func TestMovedDirectoryJudgedByItsOwnMarks(t *testing.T) {
	c := newCluster(t, 3, false)
	gd := layer.NewGfid()
	c.everywhere(seq(mkdir("/d1", gd), create("/d1/f1", layer.NewGfid(), []byte("removed")),
		create("/d1/f2", layer.NewGfid(), []byte("kept"))))
	c.on([]int{0, 2}, rename("/d1", "/d1~"))
	c.on([]int{1}, unlink("/d1/f1"))
	h := c.healer(Options{})
	h.Heal(bg, 0, "/d1") // replica 1's index entry first: its stale name is moved (relocate)
	if at := c.where(gd); at[1] != "/d1~" {
		t.Fatalf("replica 1's copy at %s after the heal of its stale name", at[1])
	}
	c.scanSettled(h)
	c.healthy()
	for i, s := range c.stores {
		if _, err := s.Lookup(bg, "/d1~/f1"); err == nil {
			t.Errorf("replica %d holds /d1~/f1, removed", i)
		}
		sameBytes(t, fmt.Sprintf("replica %d's /d1~/f2", i), c.content(i, "/d1~/f2"), []byte("kept"))
	}
}

// A directory renamed by one replica alone (the client gone, the others'
// answers lost), whose marks on the parent then make that replica the
// good copy of the parent's names; a file made in the directory under
// its old name by the two others (a quorum, acknowledged); and the
// parent's heal having moved their copies to the name replica 1 gives it
// (relocate) before the heal of that name runs. Judged there with the
// parent's distrust of replicas 0 and 2, not their own marks, the
// directory lost the file (sim replica3x2-dirs seed 62).
func TestRelocatedDirectoryKeepsWhatAQuorumMadeInIt(t *testing.T) {
	c := newCluster(t, 3, false)
	gd, data := layer.NewGfid(), pattern(5000, 3)
	c.everywhere(mkdir("/d2", gd))
	c.on([]int{1}, rename("/d2", "/d2~"))
	c.on([]int{0, 2}, create("/d2/f3", layer.NewGfid(), data))
	// The root's marks as the simulation left them: replica 0 blames 2
	// too (a rename before, replica 2 away), and all are Dirty.
	if err := c.stores[0].MarkPending(bg, "/", layer.RootGfid, 1<<2); err != nil {
		t.Fatal(err)
	}
	for i := range c.stores {
		c.markDirtyOn(i, "/")
	}
	// And the directory's copies on 0 and 2 blame each other too (each
	// did a change in it the other missed) and are Dirty.
	for i, other := range map[int]int{0: 2, 2: 0} {
		if err := c.stores[i].MarkPending(bg, "/d2", gd, 1<<uint(other)); err != nil {
			t.Fatal(err)
		}
		c.markDirtyOn(i, "/d2")
	}
	for _, i := range []int{0, 2} {
		if err := rename("/d2", "/d2~")(bg, c.stores[i]); err != nil { // relocate: no mark
			t.Fatal(err)
		}
	}
	h := c.healer(Options{Quiet: time.Nanosecond})
	h.Heal(bg, 0, "/d2~") // replica 0's index entry, before the root's
	c.scanSettled(h)
	c.healthy()
	for i := range c.stores {
		sameBytes(t, fmt.Sprintf("replica %d's /d2~/f3", i), c.content(i, "/d2~/f3"), data)
	}
}
