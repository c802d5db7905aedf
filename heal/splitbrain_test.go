package heal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
)

// splitFile makes path a split-brain: replica 0 and replica 1 each change
// it while the other (and replica 2) is away. Replica 0's copy is newer,
// replica 1's bigger.
func splitFile(c *cluster, path string) {
	c.t.Helper()
	c.everywhere(seq(create(path, layer.NewGfid(), []byte("base")), mtime(path, 500)))
	c.on([]int{0}, seq(write(path, []byte("zero"), 0), mtime(path, 2000)))
	c.on([]int{1}, seq(write(path, []byte("one, and bigger"), 0), mtime(path, 1000)))
}

func mtime(path string, sec int64) func(context.Context, layer.Layer) error {
	return setattr(path, layer.SetattrIn{Valid: layer.SetMtime, Mtime: layer.Timespec{Sec: sec}})
}

func TestSplitBrainLeftAlone(t *testing.T) {
	c := newCluster(t, 3, false)
	splitFile(c, "/f")
	h := c.healer(Options{})
	if err := h.Heal(bg, 0, "/f"); !errors.Is(err, ErrSplitBrain) {
		t.Fatalf("Heal: %v, want ErrSplitBrain", err)
	}
	scan(h)
	sameBytes(t, "replica 0", c.content(0, "/f"), []byte("zero"))
	sameBytes(t, "replica 1", c.content(1, "/f"), []byte("one, and bigger"))
	sameBytes(t, "replica 2", c.content(2, "/f"), []byte("base"))
	info, err := h.Info(bg)
	if err != nil {
		t.Fatal(err)
	}
	if info.SplitBrain != 1 || info.Failed != 0 {
		t.Fatalf("info: split-brain %d failed %d, want 1 and 0", info.SplitBrain, info.Failed)
	}
	sb, err := h.SplitBrain(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(sb) != 1 || sb[0].Path != "/f" || len(sb[0].Copies) != 3 {
		t.Fatalf("SplitBrain: %+v", sb)
	}
	c0, c1 := sb[0].Copies[0], sb[0].Copies[1]
	if c0.Size != 4 || c1.Size != 15 || c0.Mtime.Unix() != 2000 ||
		!slices.Equal(c0.Pending, []string{"host:/brick1", "host:/brick2"}) ||
		!slices.Equal(c1.Pending, []string{"host:/brick0", "host:/brick2"}) {
		t.Fatalf("copies: %+v", sb[0].Copies)
	}
}

func TestSplitBrainPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   string
	}{
		{"mtime", "zero"},
		{"size", "one, and bigger"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			c := newCluster(t, 3, false)
			splitFile(c, "/f")
			scan(c.healer(Options{Policy: tc.policy}))
			c.healthy()
			sameBytes(t, "/f", c.content(2, "/f"), []byte(tc.want))
		})
	}
	t.Run("majority", func(t *testing.T) {
		c := newCluster(t, 3, false)
		c.everywhere(create("/f", layer.NewGfid(), []byte("base")))
		c.on([]int{0}, seq(write("/f", []byte("alone"), 0), mtime("/f", 3000)))
		c.on([]int{1, 2}, seq(write("/f", []byte("two agree"), 0), mtime("/f", 1000)))
		// 1 and 2 blame 0, which blames them: split-brain, but two of
		// three copies agree.
		h := c.healer(Options{Policy: "majority"})
		if err := h.Heal(bg, 0, "/f"); err != nil {
			t.Fatal(err)
		}
		c.healthy()
		sameBytes(t, "/f", c.content(0, "/f"), []byte("two agree"))
	})
	t.Run("no majority", func(t *testing.T) {
		c := newCluster(t, 3, false)
		splitFile(c, "/f")
		h := c.healer(Options{Policy: "majority"})
		if err := h.Heal(bg, 0, "/f"); !errors.Is(err, ErrSplitBrain) {
			t.Fatalf("Heal: %v, want ErrSplitBrain", err)
		}
	})
	if _, err := New(nil, Options{Policy: "coin"}); err == nil {
		t.Error("New accepts an unknown policy")
	}
}

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		path, policy, brick, want string
	}{
		{"/f", "source-brick", "host:/brick1", "one, and bigger"},
		{"/f", "source-brick", "host:/brick2", "base"},
		{"", "source-brick", "host:/brick0", "zero"},
		{"/f", "latest-mtime", "", "zero"},
		{"/f", "bigger-file", "", "one, and bigger"},
		{"", "bigger-file", "", "one, and bigger"},
	} {
		t.Run(tc.policy+tc.path+tc.brick, func(t *testing.T) {
			c := newCluster(t, 3, false)
			splitFile(c, "/f")
			h := c.healer(Options{})
			scan(h) // finds the split-brain and leaves it
			if err := h.Resolve(bg, tc.path, tc.policy, tc.brick); err != nil {
				t.Fatal(err)
			}
			c.healthy()
			sameBytes(t, "/f", c.content(0, "/f"), []byte(tc.want))
			if info, _ := h.Info(bg); info.SplitBrain != 0 {
				t.Fatalf("still %d split-brains", info.SplitBrain)
			}
		})
	}
	c := newCluster(t, 3, true)
	h := c.healer(Options{})
	if err := h.Resolve(bg, "/f", "source-brick", "host:/brick2"); err == nil {
		t.Error("an arbiter accepted as the source of data")
	}
	if err := h.Resolve(bg, "/f", "source-brick", "host:/nowhere"); err == nil {
		t.Error("an unknown brick accepted")
	}
}

func TestDirectoriesMerge(t *testing.T) {
	c := newCluster(t, 3, false)
	c.everywhere(seq(mkdir("/d", layer.NewGfid()), create("/d/both", layer.NewGfid(), []byte("b"))))
	c.on([]int{0}, create("/d/a", layer.NewGfid(), []byte("made on 0")))
	c.on([]int{1}, seq(create("/d/b", layer.NewGfid(), []byte("made on 1")), removeTree("/d/both")))
	h := c.healer(Options{})
	scan(h)
	c.healthy()
	// The union of the names made on either copy; the name 1 removed
	// (recorded as removed there: Removed) stays removed. Before the
	// records, a merge brought it back.
	for _, name := range []string{"/d/a", "/d/b"} {
		if _, err := c.stores[2].Lookup(bg, name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for i := range c.stores {
		if _, err := c.stores[i].Lookup(bg, "/d/both"); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("/d/both, removed on copy 1, on copy %d after the merge: %v, want ENOENT", i, err)
		}
		if left, err := os.ReadDir(filepath.Join(c.stores[i].Root(), posix.RemovedDir)); err != nil || len(left) != 0 {
			t.Errorf("copy %d keeps removal records once healed: %v, %v", i, left, err)
		}
	}
	// One name, two inodes: that name is a split-brain until resolved.
	c.on([]int{0}, create("/d/c", layer.NewGfid(), []byte("c on 0")))
	c.on([]int{1}, create("/d/c", layer.NewGfid(), []byte("c on 1")))
	scan(h)
	sb, err := h.SplitBrain(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(sb) != 1 || sb[0].Path != "/d/c" {
		t.Fatalf("SplitBrain: %+v", sb)
	}
	if err := h.Resolve(bg, "/d/c", "source-brick", "host:/brick1"); err != nil {
		t.Fatal(err)
	}
	scan(h)
	c.healthy()
	sameBytes(t, "/d/c", c.content(0, "/d/c"), []byte("c on 1"))
}

// Directory copies that blame each other are merged without a copy that
// another is ahead of: replica 0 missed a rename of f1 to f5 (1 and 2
// blame it for /d, it blames neither), then 1 and 2 missed each other's
// creates. f1, which only replica 0 still has (with a mark of its own,
// from a write only it took), must not come back (found by the
// simulation, sim/: the merge or the file's own index entry brought the
// renamed name back everywhere, depending on which heal ran first).
func TestMergeLeavesOutTheCopyOthersAreAheadOf(t *testing.T) {
	c := newCluster(t, 3, false)
	g := layer.NewGfid()
	c.everywhere(seq(mkdir("/d", layer.NewGfid()), create("/d/f1", g, []byte("data"))))
	c.on([]int{1, 2}, func(ctx context.Context, l layer.Layer) error { return l.Rename(ctx, "/d/f1", "/d/f5", 0) })
	c.on([]int{0}, write("/d/f1", []byte("DATA"), 0))
	c.on([]int{1}, create("/d/x", layer.NewGfid(), []byte("x")))
	c.on([]int{2}, create("/d/y", layer.NewGfid(), []byte("y")))
	scan(c.healer(Options{}))
	c.healthy()
	for i := range 3 {
		if _, err := c.stores[i].Lookup(bg, "/d/f1"); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("replica %d: /d/f1 renamed away came back: %v", i, err)
		}
		for _, p := range []string{"/d/f5", "/d/x", "/d/y"} {
			if _, err := c.stores[i].Lookup(bg, p); err != nil {
				t.Errorf("replica %d: %s: %v", i, p, err)
			}
		}
	}
}

// A name one copy of a directory removed while another missed it, the
// directory's copies blaming each other, and the file on the copy that
// missed the removal carrying a mark of its own: healed from its own
// index entry, the file must not be given back to the copies that
// removed it (before, the name was judged with no copy distrusted, as a
// merge has none, and came back; sim disperse2+1-full seed 54).
func TestFileUnderMergedDirectoryStaysRemoved(t *testing.T) {
	c := newCluster(t, 3, false)
	g := layer.NewGfid()
	c.everywhere(seq(mkdir("/d", layer.NewGfid()), create("/d/f", g, []byte("removed while 2 was away"))))
	c.without2(seq(removeTree("/d/f"), create("/d/new", layer.NewGfid(), []byte("made while 2 was away"))))
	c.on([]int{2}, seq(create("/d/mine", layer.NewGfid(), []byte("made on 2 alone")), write("/d/f", []byte("a write only 2 took"), 0)))
	h := c.healer(Options{})
	if err := h.Heal(bg, 0, "/d/f"); err != nil {
		t.Fatal(err)
	}
	for i := range c.stores {
		if _, err := c.stores[i].Lookup(bg, "/d/f"); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("/d/f on copy %d after its heal: %v, want ENOENT", i, err)
		}
	}
	scan(h)
	c.healthy()
}
