package heal

import (
	"fmt"
	"path"
	"testing"
	"time"

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
