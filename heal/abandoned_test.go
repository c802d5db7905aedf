package heal

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// markDirty marks path Dirty on every replica, as bricks do when a
// client's connection ends with the file written.
func (c *cluster) markDirty(path string) {
	c.t.Helper()
	for i, s := range c.stores {
		a, err := s.Lookup(bg, path)
		if err != nil {
			c.t.Fatal(err)
		}
		if err := s.MarkPending(bg, path, a.Gfid, layer.Dirty); err != nil {
			c.t.Fatalf("replica %d: %v", i, err)
		}
	}
}

// A client died while writing: two copies got a write that extends the
// file, one did not, nothing blames it, and every brick marked the file
// Dirty. Once quiet, the biggest copy is the source and the marks go.
func TestAbandonedFileHealedFromBiggest(t *testing.T) {
	c := newCluster(t, 3, false)
	c.everywhere(create("/f", layer.NewGfid(), []byte("the content all three have")))
	for _, i := range []int{0, 1} {
		if err := write("/f", []byte(" and a tail two got"), 26)(bg, c.stores[i]); err != nil {
			t.Fatal(err)
		}
	}
	c.markDirty("/f")
	scan(c.healer(Options{Quiet: time.Nanosecond}))
	c.healthy()
	sameBytes(t, "/f on the replica that missed the write", c.content(2, "/f"), []byte("the content all three have and a tail two got"))
}

// readThrough reads path whole through r.
func readThrough(t *testing.T, r *replicate.Replicate, path string) []byte {
	t.Helper()
	f, err := r.Open(bg, path, syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(bg)
	p := make([]byte, 1<<16)
	n, err := f.Read(bg, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p[:n]
}

// Copies of one size with different contents, another copy the newest:
// heal keeps the copy reads take (every reader with the copies up read
// it), not the newest (sim replica3x2 seed 164: the newest was a copy a
// dying put had emptied, zeros after heal where the reads had returned
// another copy's content). For several names, so that reads take each
// replica.
func TestAbandonedFileSameSizeKeepsTheCopyRead(t *testing.T) {
	c := newCluster(t, 3, false)
	r := c.repl(t, cutOn(-1), replicate.Options{})
	for n := range 6 {
		path := fmt.Sprintf("/f%d", n)
		c.everywhere(create(path, layer.NewGfid(), []byte("0123456789")))
		for i, s := range c.stores {
			if err := write(path, []byte{'a' + byte(i)}, 3)(bg, s); err != nil {
				t.Fatal(err)
			}
		}
		read := readThrough(t, r, path)
		newest := (int(read[3]-'a') + 1) % len(c.stores)
		later := layer.Timespec{Sec: time.Now().Unix() + 10}
		if err := setattr(path, layer.SetattrIn{Valid: layer.SetMtime, Mtime: later})(bg, c.stores[newest]); err != nil {
			t.Fatal(err)
		}
		c.markDirty(path)
		scan(c.healer(Options{Quiet: time.Nanosecond}))
		for i := range c.stores {
			sameBytes(t, fmt.Sprintf("replica %d's %s after heal", i, path), c.content(i, path), read)
		}
	}
	c.healthy()
}

// A file changed less than Quiet ago is left alone, marks and all: a
// write may still be on its way, or another client writing it.
func TestAbandonedFileWaitsUntilQuiet(t *testing.T) {
	c := newCluster(t, 3, false)
	c.everywhere(create("/f", layer.NewGfid(), []byte("same")))
	if err := write("/f", []byte("more"), 4)(bg, c.stores[0]); err != nil {
		t.Fatal(err)
	}
	c.markDirty("/f")
	scan(c.healer(Options{Quiet: time.Hour}))
	if c.pending(0, "/f") != layer.Dirty || string(c.content(2, "/f")) != "same" {
		t.Fatalf("healed before quiet: pending %#x, replica 2 %q", c.pending(0, "/f"), c.content(2, "/f"))
	}
}

// A copy blamed by the others that also carries Dirty (its brick lost the
// client's connection while the client, alive, went on with the others)
// is a sink like any blamed copy, and loses its Dirty mark with the heal.
func TestAbandonedBlamedCopyIsSink(t *testing.T) {
	c := newCluster(t, 3, false)
	c.everywhere(create("/f", layer.NewGfid(), []byte("v1")))
	c.without2(write("/f", []byte("v2, longer"), 0))
	a, err := c.stores[2].Lookup(bg, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.stores[2].MarkPending(bg, "/f", a.Gfid, layer.Dirty); err != nil {
		t.Fatal(err)
	}
	scan(c.healer(Options{Quiet: time.Nanosecond}))
	c.healthy()
	sameBytes(t, "/f on replica 2", c.content(2, "/f"), []byte("v2, longer"))
}

// A name whose copies are different files (two gfids, nothing blaming
// either) with a Dirty mark: a client died replacing the file on one
// brick. Once quiet, the gfid most copies share is the source (found by
// the simulation, sim/: such files stayed in split-brain).
func TestAbandonedSplitBrainTakesTheMajority(t *testing.T) {
	c := newCluster(t, 3, false)
	c.everywhere(mkdir("/d", layer.NewGfid()))
	c.on([]int{0, 2}, create("/d/f", layer.NewGfid(), []byte("the file two bricks have")))
	c.on([]int{1}, create("/d/f", layer.NewGfid(), []byte("half made")))
	for i, s := range c.stores {
		a, err := s.Lookup(bg, "/d/f")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.MarkPending(bg, "/d/f", a.Gfid, layer.Dirty); err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	scan(c.healer(Options{Quiet: time.Nanosecond}))
	c.healthy()
	sameBytes(t, "/d/f on replica 1", c.content(1, "/d/f"), []byte("the file two bricks have"))
}

// A client died in the middle of changes of names in /d: a create reached
// one brick, a removal two, and every brick marked /d Dirty as its
// connection ended without a goodbye. Once quiet, every copy gets the
// names any copy has, and the marks go.
func TestAbandonedDirectoryGetsEveryName(t *testing.T) {
	c := newCluster(t, 3, false)
	c.everywhere(seq(mkdir("/d", layer.NewGfid()), create("/d/gone", layer.NewGfid(), []byte("x")),
		create("/d/kept", layer.NewGfid(), []byte("k"))))
	// Nothing blames anything: the client died before it could tell.
	if err := create("/d/half", layer.NewGfid(), []byte("half"))(bg, c.stores[0]); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1} {
		if err := c.stores[i].Unlink(bg, "/d/gone"); err != nil {
			t.Fatal(err)
		}
	}
	h := c.healer(Options{Quiet: time.Hour})
	c.markDirty("/d")
	scan(h)
	if c.pending(1, "/d") != layer.Dirty {
		t.Fatalf("healed before quiet: pending %#x", c.pending(1, "/d"))
	}
	scan(c.healer(Options{Quiet: time.Nanosecond}))
	c.healthy()
	for i := range c.stores {
		sameBytes(t, "/d/half", c.content(i, "/d/half"), []byte("half"))
		sameBytes(t, "/d/gone", c.content(i, "/d/gone"), []byte("x"))
	}
}

// A client died in the middle of a chmod by path: one copy has the new
// mode, and every brick marked the file Dirty. Once quiet, the copies get
// one mode.
func TestAbandonedMetadataMadeEqual(t *testing.T) {
	c := newCluster(t, 3, false)
	c.everywhere(create("/f", layer.NewGfid(), []byte("same")))
	if _, err := c.stores[0].Setattr(bg, "/f", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	c.markDirty("/f")
	scan(c.healer(Options{Quiet: time.Nanosecond}))
	c.healthy()
}

// A client died making /d/f: its create reached brick 1 only; another
// client's create of the name, made while brick 0 could not take it (its
// disk full), reached brick 2 only and failed. Two gfids under one name,
// no mark on either file, /d blaming brick 0 and Dirty (the dead client's
// connection). Neither create was acknowledged: once quiet, one version
// wins, as for a Dirty file; until then /d keeps its marks, which alone
// bring the name back to a later scan.
func TestAbandonedNameWithTwoGfidsUnderDirtyDirectory(t *testing.T) {
	c := newCluster(t, 3, false)
	dir := layer.NewGfid()
	c.everywhere(mkdir("/d", dir))
	if err := create("/d/f", layer.NewGfid(), []byte("half made"))(bg, c.stores[1]); err != nil {
		t.Fatal(err)
	}
	if err := create("/d/f", layer.NewGfid(), []byte("the other"))(bg, c.stores[2]); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		if err := c.stores[i].MarkPending(bg, "/d", dir, 1); err != nil {
			t.Fatal(err)
		}
	}
	c.markDirty("/d")
	scan(c.healer(Options{Quiet: time.Hour}))
	if p := c.pending(1, "/d"); p&layer.Dirty == 0 {
		t.Fatalf("/d's marks went before its name was healed: pending %#x", p)
	}
	scan(c.healer(Options{Quiet: time.Nanosecond}))
	c.healthy()
}
