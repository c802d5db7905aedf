package distribute

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// A directory renamed on some children only (the client died, or its
// rollback failed) is settled by a listing of its parent to the name its
// decider holds, on every child, with every file; before that, nothing
// makes it again under its other name (which would leave it under both,
// the files split between them; sim replica3x2-dirs, 2026-11-29).
func TestDirectoryRenamedOnSomeChildrenSettled(t *testing.T) {
	for _, forward := range []bool{true, false} {
		t.Run(fmt.Sprintf("decider renamed %v", forward), func(t *testing.T) {
			r := newRig(t, 3, nil)
			d, err := r.d.Mkdir(r.ctx, "/d", layer.MkdirIn{Mode: 0o755})
			r.ok(err, "mkdir /d")
			for i := range 12 {
				r.write(fmt.Sprintf("/d/f%d", i), fmt.Sprintf("data %d", i))
			}
			dec := 0        // the decider: the first child
			var moved []int // the children the rename reached
			for i := range r.stores {
				if (i == dec) == forward || (forward && len(moved) == 1 && i != dec) {
					moved = append(moved, i)
				}
			}
			if len(moved) == 0 || len(moved) == len(r.stores) {
				t.Fatalf("bad rig: moved %v", moved)
			}
			for _, i := range moved {
				r.ok(r.stores[i].Rename(r.ctx, "/d", "/d~", 0), "rename on one child")
			}
			// A create needing the directory on a child that has it under
			// the other name does not make it again there.
			for i := range 30 {
				p := fmt.Sprintf("/d/new%d", i)
				if f, _, err := r.d.Create(r.ctx, p, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644}); err == nil {
					f.Release(r.ctx)
				}
			}
			for i, s := range r.stores {
				_, herr := s.Lookup(r.ctx, "/d")
				_, aerr := s.Lookup(r.ctx, "/d~")
				if herr == nil && aerr == nil {
					t.Fatalf("child %d holds the directory under both names before any listing", i)
				}
			}
			ents, err := layer.ReadDirAll(r.ctx, r.d, "/")
			r.ok(err, "list /")
			keep, drop := "/d", "/d~"
			if forward {
				keep, drop = drop, keep
			}
			if len(ents) != 1 || "/"+ents[0].Name != keep || ents[0].Attr.Gfid != d.Gfid {
				t.Fatalf("listing of / after the split: %+v, want %s alone", ents, keep)
			}
			for i, s := range r.stores {
				if _, err := s.Lookup(r.ctx, drop); !errors.Is(err, syscall.ENOENT) {
					t.Errorf("child %d still holds %s: %v", i, drop, err)
				}
				if a, err := s.Lookup(r.ctx, keep); err != nil || a.Gfid != d.Gfid {
					t.Errorf("child %d's %s: %+v, %v", i, keep, a, err)
				}
			}
			for i := range 12 {
				if got := r.read(fmt.Sprintf("%s/f%d", keep, i)); got != fmt.Sprintf("data %d", i) {
					t.Errorf("%s/f%d: %q", keep, i, got)
				}
			}
		})
	}
}

// splitRig makes /d with 12 files on 3 children and renames it to /d~ on
// the decider only (a client died after the first step).
func splitRig(t *testing.T) *rig {
	r := newRig(t, 3, nil)
	_, err := r.d.Mkdir(r.ctx, "/d", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir /d")
	for i := range 12 {
		r.write(fmt.Sprintf("/d/f%d", i), fmt.Sprintf("data %d", i))
	}
	dec := 0 // the decider
	r.ok(r.stores[dec].Rename(r.ctx, "/d", "/d~", 0), "rename on the decider")
	return r
}

// A rebalance (or fix-layout) settles a split directory as a listing
// does, rather than stopping at it (a review, 2026-11-29: the walk
// stopped on the first directory it could not make).
func TestRebalanceSettlesASplitDirectory(t *testing.T) {
	for _, fix := range []bool{true, false} {
		t.Run(fmt.Sprintf("fixlayout=%v", fix), func(t *testing.T) {
			r := splitRig(t)
			_, err := r.d.Rebalance(r.ctx, RebalanceOptions{FixLayout: fix})
			if err != nil {
				t.Fatalf("rebalance with a split directory: %v", err)
			}
			for i, s := range r.stores {
				if _, err := s.Lookup(r.ctx, "/d"); !errors.Is(err, syscall.ENOENT) {
					t.Errorf("child %d still holds /d after the rebalance: %v", i, err)
				}
			}
		})
	}
}

// A rename over an existing empty directory that reached the decider
// only: the other children still hold /b (the replaced target, another
// gfid); settling replaces it there (a review, 2026-11-29: it failed with
// EEXIST at every listing, the files under /a out of sight).
func TestSplitOverAReplacedTargetSettled(t *testing.T) {
	r := newRig(t, 3, nil)
	a, err := r.d.Mkdir(r.ctx, "/a", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir /a")
	_, err = r.d.Mkdir(r.ctx, "/b", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir /b")
	for i := range 12 {
		r.write(fmt.Sprintf("/a/f%d", i), fmt.Sprintf("data %d", i))
	}
	dec := 0 // the decider
	r.ok(r.stores[dec].Rename(r.ctx, "/a", "/b", 0), "rename over /b on the decider")
	for range 2 {
		ents, err := layer.ReadDirAll(r.ctx, r.d, "/")
		r.ok(err, "list /")
		_ = ents
	}
	if got := r.names("/"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after listings, / holds %v, want [b]", got)
	}
	for i := range 12 {
		p := fmt.Sprintf("/b/f%d", i)
		if _, err := r.d.Lookup(r.ctx, p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if got, _ := r.d.Lookup(r.ctx, "/b"); got.Gfid != a.Gfid {
		t.Errorf("/b is %v, want %v", got.Gfid, a.Gfid)
	}
}

func names(es []layer.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

// layoutChild wraps child i of client A: after A's rename of /a on it,
// client B (another layout) lists / (a concurrent `ls`).
type layoutChild struct {
	layer.Layer
	after func()
}

func (c layoutChild) Rename(ctx context.Context, o, n string, flags uint32) error {
	err := c.Layer.Rename(ctx, o, n, flags)
	if err == nil && o == "/a" && c.after != nil {
		c.after()
	}
	return err
}

// Two clients with different layouts (a spec being rolled out, before
// the fence) agree on the decider: B's listing while A's rename runs does
// not undo the rename (a review, 2026-11-29: with the decider the hashed
// child of a name, B moved A's decider back, and a rename that succeeded
// was undone).
func TestClientsOfTwoLayoutsAgreeOnTheDecider(t *testing.T) {
	var after func()
	r := newRig(t, 3, nil)
	// Find a layout for B whose decider for /a differs from A's.
	da := r.hashed("/a")
	dec := 0 // the decider
	var rb []Range
	for rot := 1; rot < 3; rot++ {
		rb = nil
		for i := range 3 {
			rb = append(rb, Range{Start: uint32(uint64(i) * (1 << 32) / 3), Child: brickID((i + rot) % 3)})
		}
		b0, _ := New([]Child{{ID: "b0", Layer: r.stores[0]}, {ID: "b1", Layer: r.stores[1]}, {ID: "b2", Layer: r.stores[2]}}, Options{Layout: rb})
		if h, _ := b0.hashedChild(r.ctx, "/a"); h != da {
			break
		}
	}
	var bc, ac []Child
	for i, s := range r.stores {
		bc = append(bc, Child{ID: brickID(i), Layer: s})
		var l layer.Layer = s
		if i == dec {
			l = layoutChild{Layer: s, after: func() {
				if after != nil {
					after()
				}
			}}
		}
		ac = append(ac, Child{ID: brickID(i), Layer: l})
	}
	B, err := New(bc, Options{Layout: rb})
	r.ok(err, "B")
	A, err := New(ac, Options{})
	r.ok(err, "A")
	if db, _ := B.hashedChild(r.ctx, "/a"); db == da {
		t.Fatal("bad rig: /a hashes to the same child in both layouts")
	}
	_, err = A.Mkdir(r.ctx, "/a", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir /a")
	after = func() {
		after = nil
		ents, err := layer.ReadDirAll(r.ctx, B, "/")
		if err != nil {
			t.Errorf("B lists / during A's rename: %v", err)
		}
		_ = ents
	}
	r.ok(A.Rename(r.ctx, "/a", "/b", 0), "A renames /a to /b")
	ents, err := layer.ReadDirAll(r.ctx, A, "/")
	r.ok(err, "A lists /")
	if got := names(ents); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after A's successful rename of /a to /b and a listing, / holds %v", got)
	}
	_, err = A.Lookup(r.ctx, "/b")
	if err != nil {
		t.Errorf("lookup /b after its rename succeeded: %v", err)
	}
}
