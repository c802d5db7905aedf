package replicate

import (
	"errors"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// A replica that missed a file's creation answers its removal with
// ENOENT: the name is absent there, which is what the removal makes. With
// another replica up that removes it, the removal is done on a quorum:
// it succeeds (it failed with EIO, or ENOENT when the directory's copies
// blamed each other: the simulation, replica3x2-full seed 62), and the
// replica that lacked the name records that the one away missed it.
func TestRemovalWhereAReplicaMissedTheCreate(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	g.kill(1)
	if err := g.writeFile("/d/f", []byte("made while 1 was away")); err != nil {
		t.Fatal(err)
	}
	g.revive(1)
	g.kill(0)
	if err := g.r.Unlink(g.ctx, "/d/f"); err != nil {
		t.Fatalf("unlink with replica 0 away and replica 1 lacking the name: %v", err)
	}
	if _, err := g.r.Lookup(g.ctx, "/d/f"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup after the unlink: %v, want ENOENT", err)
	}
	if m := g.pending(1, "/d"); !m.Has(0) {
		t.Errorf("replica 1's /d blames %b; want replica 0, which missed the removal", m)
	}
}
