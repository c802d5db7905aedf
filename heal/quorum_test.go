package heal

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// empty makes an empty file at path (no write: nothing marks the file).
func empty(path string, g layer.Gfid) func(context.Context, layer.Layer) error {
	return func(ctx context.Context, l layer.Layer) error {
		f, _, err := l.Create(ctx, path, layer.CreateIn{Owner: layer.Owner{Gfid: g}, Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
		if err == nil {
			err = f.Release(ctx)
		}
		return err
	}
}

func (c *cluster) gfid(i int, path string) layer.Gfid {
	c.t.Helper()
	a, err := c.stores[i].Lookup(bg, path)
	if err != nil {
		c.t.Fatal(err)
	}
	return a.Gfid
}

// majority is the quorum rule of a replica 3 volume (quorum-type auto).
func majority(_ int, m replicate.Mask) bool { return replicate.Quorate(replicate.QuorumAuto, 0, 3, m) }

// A client died making a file in /d on replica 1 alone: the create failed
// with EIO (nothing acknowledged), and replica 1's copy of /d blames the
// two others for missing it. Then, with replica 1 away, replicas 0 and 2
// replaced /d/f (a rename over it, acknowledged by a quorum) and blame
// it. The copies of /d blame each other; merged, /d/f is a gfid
// split-brain (found by the simulation, replica 3x2 seeds 31 and 48: a
// name no heal resolved). Replica 1's blame cannot come from a change a
// quorum made, so with the volume's quorum rule the two others are the
// source: /d/f is theirs on every replica, and the half-made file goes.
// Without the rule the healer leaves the split-brain, as before.
func TestMinorityChangeYieldsToQuorum(t *testing.T) {
	setup := func(t *testing.T) *cluster {
		c := newCluster(t, 3, false)
		c.everywhere(seq(mkdir("/d", layer.NewGfid()), create("/d/f", layer.NewGfid(), []byte("the old file"))))
		c.on([]int{1}, create("/d/half", layer.NewGfid(), []byte("half made")))
		// An empty file, as distribute's pointers are: only /d's marks
		// say replica 1 missed it.
		c.on([]int{0, 2}, seq(empty("/d/g", layer.NewGfid()), rename("/d/g", "/d/f")))
		for i, want := range []uint64{0b010, 0b101, 0b010} {
			if got := c.pending(i, "/d"); got != want {
				t.Fatalf("/d on replica %d blames %b, want %b", i, got, want)
			}
			if got := c.pending(i, "/d/f"); got != 0 {
				t.Fatalf("/d/f on replica %d blames %b, want nothing", i, got)
			}
		}
		return c
	}
	t.Run("quorum", func(t *testing.T) {
		c := setup(t)
		h := c.healer(Options{Quorate: majority})
		scan(h)
		c.healthy()
		if a, b := c.gfid(0, "/d/f"), c.gfid(1, "/d/f"); a != b {
			t.Errorf("/d/f is %s on replica 0, %s on replica 1", a, b)
		}
		if _, err := c.stores[1].Lookup(bg, "/d/half"); !os.IsNotExist(err) {
			t.Errorf("the half-made file on replica 1: %v, want it gone", err)
		}
		if sb, err := h.SplitBrain(bg); err != nil || len(sb) > 0 {
			t.Errorf("split-brain after heal: %v %v", sb, err)
		}
	})
	t.Run("no quorum rule", func(t *testing.T) {
		c := setup(t)
		h := c.healer(Options{})
		scan(h)
		if sb, err := h.SplitBrain(bg); err != nil || len(sb) == 0 {
			t.Errorf("split-brain after heal: %v %v; want /d/f", sb, err)
		}
	})
}
