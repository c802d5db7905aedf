package replicate

import (
	"errors"
	"math"
	"syscall"
	"testing"
)

// A replica whose disk is full misses the writes it refuses, as one down
// does: the copies that took a write blame it, never the other way round.
// Counted as a refusal that stands (brick 0 full and brick 2 down: brick
// 1 alone took the write, brick 0 blamed it), a later write that brick 0
// missed again while the others took it had them blame brick 0 back: a
// split-brain, every read of the file EIO.
func TestFullReplicaMissesWrites(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if err := g.writeFile("/f", []byte("1111")); err != nil {
		t.Fatal(err)
	}
	g.kill(2)
	g.bricks[0].Store.SetReserve(math.MaxUint64)
	if err := g.overwrite("/f", "2222"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write taken by one replica of three, one full: %v, want ENOSPC", err)
	}
	g.revive(2)
	if err := g.overwrite("/f", "3333"); err != nil {
		t.Fatalf("write with one replica full of three: %v", err)
	}
	if got, err := g.readFile("/f"); err != nil || string(got) != "3333" {
		t.Fatalf("read: %q, %v; want the last write", got, err)
	}
	if m := g.pending(0, "/f"); m.Has(1) || m.Has(2) {
		t.Errorf("the full replica blames %b: it refused, it did not do", m)
	}
	if m := g.pending(1, "/f"); !m.Has(0) {
		t.Errorf("replica 1 blames %b: want the full replica 0", m)
	}
}

// overwrite writes data at offset 0 of the existing file path.
func (g *rig) overwrite(path, data string) error {
	f, err := g.r.Open(g.ctx, path, syscall.O_RDWR)
	if err != nil {
		return err
	}
	defer f.Release(g.ctx)
	_, err = f.Write(g.ctx, []byte(data), 0)
	return err
}
