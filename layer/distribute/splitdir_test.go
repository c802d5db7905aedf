package distribute

import (
	"errors"
	"fmt"
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
			dec := r.hashed("/d") // the smaller name's
			var moved []int       // the children the rename reached
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
