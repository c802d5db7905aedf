package disperse

import (
	"bytes"
	"errors"
	"math"
	"syscall"
	"testing"
)

// A disperse 2 + 1 set with one brick down and another full: a write
// would reach one brick only, overwriting its fragments there while the
// full brick keeps the old ones and the brick down holds neither, so no
// version of those stripes would be on K bricks. It is refused with
// ENOSPC before anything is written, and the file keeps what it held.
// With every brick up, the full brick's refusal costs nothing: the write
// succeeds and the brick is marked for heal; but a write another full
// brick would refuse is refused whole too.
func TestWriteWithKUpAndOneFullIsRefusedWhole(t *testing.T) {
	g := newRig(t, 3, 1)
	old := bytes.Repeat([]byte("old content "), 20000) // 240 kB: two stripes
	g.writeFile("/f", old)
	g.kill(2)
	free := g.bricks[1].Store.SetReserve(math.MaxUint64)
	f, err := g.d.Open(g.ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(g.ctx, bytes.Repeat([]byte("new"), 50000), 1000); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write with brick 2 down and brick 1 full: %v, want ENOSPC", err)
	}
	f.Release(g.ctx)
	g.d.Idle()
	g.readBack("/f", old)
	g.bricks[1].Store.SetReserve(free)
	g.readBack("/f", old) // from bricks 0 and 1 only: 2 is still down

	g.revive(2)
	g.bricks[0].Store.SetReserve(math.MaxUint64)
	f, err = g.d.Open(g.ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(old)
	copy(want[1000:], bytes.Repeat([]byte("new"), 50000))
	if _, err := f.Write(g.ctx, want[1000:151000], 1000); err != nil {
		t.Fatalf("write with every brick up and brick 0 full: %v", err)
	}
	// Brick 0 is known to be full now: with brick 1 full too, the next
	// write is refused whole.
	g.bricks[1].Store.SetReserve(math.MaxUint64)
	if _, err := f.Write(g.ctx, []byte("lost"), 0); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write with bricks 0 and 1 full: %v, want ENOSPC", err)
	}
	g.bricks[1].Store.SetReserve(free)
	f.Release(g.ctx)
	g.d.Idle()
	g.bricks[0].Store.SetReserve(free)
	if a, err := g.bricks[1].Store.Lookup(g.ctx, "/f"); err != nil || a.Pending == 0 {
		t.Fatalf("brick 1's /f after a write brick 0 refused: pending %b, %v; want brick 0 blamed", a.Pending, err)
	}
	g.readBack("/f", want)

	// Fewer than K bricks up: that is what the write says, whatever the
	// room of the one left (the simulation, seed 13 of disperse2+1-full).
	f, err = g.d.Open(g.ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(g.ctx)
	if _, err := f.Write(g.ctx, []byte("y"), 0); err != nil { // takes the writers' lock
		t.Fatal(err)
	}
	g.kill(0)
	g.kill(2)
	g.bricks[1].Store.SetReserve(math.MaxUint64)
	defer g.bricks[1].Store.SetReserve(free)
	if _, err := f.Write(g.ctx, []byte("x"), 0); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write with one brick of three up (and full): %v, want EROFS", err)
	}
}
