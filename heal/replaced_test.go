package heal

import (
	"context"
	"sync"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// racing is a replica whose first open of path first runs race: a client
// renaming another file over path while the healer is between looking at
// the copies and healing them.
type racing struct {
	countingStore
	path string
	once sync.Once
	race func()
}

func (r *racing) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	if path == r.path {
		r.once.Do(r.race)
	}
	return r.countingStore.Open(ctx, path, flags)
}

func (r *racing) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	if path == r.path {
		r.once.Do(r.race)
	}
	return r.countingStore.Mknod(ctx, path, in)
}

func (r *racing) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	if path == r.path {
		r.once.Do(r.race)
	}
	return r.countingStore.Mkdir(ctx, path, in)
}

// A file replica 2 missed a write and a chmod of is replaced by a rename
// over its name after the healer looked at the copies and before it
// copies anything: the healer must not give the file renamed there the
// data and mode of the one it judged (the replicas would differ, with no
// mark left to say so), and once the index is done every replica holds
// the same.
func TestNameReplacedWhileHealing(t *testing.T) {
	c := newCluster(t, 3, false)
	c.everywhere(seq(
		mkdir("/d", layer.NewGfid()),
		create("/d/x", layer.NewGfid(), pattern(20000, 1)),
		create("/d/y", layer.NewGfid(), pattern(30000, 2)),
	))
	c.without2(seq(
		write("/d/x", pattern(20000, 3), 0),
		setattr("/d/x", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o677}),
	))
	c.set[2].Layer = &racing{countingStore: c.set[2].Layer.(countingStore), path: "/d/x", race: func() {
		c.everywhere(rename("/d/y", "/d/x"))
	}}
	h := c.healer(Options{})
	if err := h.Heal(bg, 0, "/d/x"); err == nil {
		t.Log("the first heal reported no error") // it may: the sink is simply left blamed
	}
	sameBytes(t, "replica 2's /d/x after the race", c.content(2, "/d/x"), pattern(30000, 2))
	c.scanSettled(h)
	c.healthy()
}

// A file (or a directory) replica 2 lacks is healed from its own index
// entry while a client removes it (from the good copies: replica 2 has no
// such name) and the parent's heal, finding the name on no copy, clears
// the parent's marks — all before the healer makes the name on replica 2.
// The healer then finds the source gone: it must take back the name it
// made, which nothing would blame any more.
func TestNameRemovedWhileHealing(t *testing.T) {
	for _, dir := range []bool{false, true} {
		t.Run(map[bool]string{false: "file", true: "directory"}[dir], func(t *testing.T) {
			c := newCluster(t, 3, false)
			made := create("/n1", layer.NewGfid(), pattern(5000, 1))
			if dir {
				made = seq(mkdir("/n1", layer.NewGfid()), create("/n1/f", layer.NewGfid(), pattern(100, 2)))
			}
			c.without2(made)
			h := c.healer(Options{})
			c.set[2].Layer = &racing{countingStore: c.set[2].Layer.(countingStore), path: "/n1", race: func() {
				c.on([]int{0, 1}, removeTree("/n1"))
				if err := h.Heal(bg, 0, "/"); err != nil {
					t.Errorf("heal of the parent: %v", err)
				}
			}}
			h = c.healer(Options{}) // over the racing replica
			h.Heal(bg, 0, "/n1")    //nolint:errcheck // the source is gone: it may say so
			c.scanSettled(h)
			c.healthy()
		})
	}
}
