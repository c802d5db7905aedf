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

// A brick that missed a write (it was full) holds the old chunk of the
// stripe; with another brick down, the two left hold different versions
// and no version is on K bricks. That is not a torn stripe (a client
// that died mid-write, old or new per chunk): the old chunk is stale,
// and a read must fail rather than return it (the simulation,
// disperse2+1-full seed 40, read the old content of a small file).
func TestStaleChunkIsNotReadAsTorn(t *testing.T) {
	g := newRig(t, 3, 1)
	old := bytes.Repeat([]byte("o"), 1135) // all in brick 0's data chunk
	g.writeFile("/f", old)
	free := g.bricks[0].Store.SetReserve(math.MaxUint64)
	f, err := g.d.Open(g.ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(g.ctx, bytes.Repeat([]byte("n"), 1135), 0); err != nil {
		t.Fatalf("write with brick 0 full: %v", err)
	}
	f.Release(g.ctx)
	g.d.Idle()
	g.bricks[0].Store.SetReserve(free)
	g.kill(2)
	rf, err := g.d.Open(g.ctx, "/f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Release(g.ctx)
	p := make([]byte, len(old))
	if n, err := rf.Read(g.ctx, p, 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read with the brick that missed the write and one that took it: %d bytes (%q...), %v; want EIO", n, p[:min(n, 8)], err)
	}
}
