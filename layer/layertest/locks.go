package layertest

import (
	"context"
	"math"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// RunLocks runs the lock conformance tests: POSIX locks and flock through
// Files. newLayer is as for Run; the stack must include a locks layer.
func RunLocks(t *testing.T, newLayer func(t *testing.T) layer.Layer) {
	tests := []struct {
		name string
		fn   func(k *lockC)
	}{
		{"Conflict", testLockConflict},
		{"ReadShare", testLockReadShare},
		{"Split", testLockSplit},
		{"UpgradeDowngrade", testLockUpgrade},
		{"SameOwnerTwoFiles", testLockSameOwner},
		{"OtherInode", testLockOtherInode},
		{"HardLink", testLockHardLink},
		{"Wait", testLockWait},
		{"Cancel", testLockCancel},
		{"FlushReleases", testLockFlush},
		{"ReleaseReleases", testLockRelease},
		{"Flock", testFlock},
		{"FlockPosixIndependent", testFlockPosix},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &C{T: t, L: newLayer(t), Ctx: context.Background()}
			c.File("/f", "0123456789")
			k := &lockC{C: c, a: c.open("/f"), b: c.open("/f")}
			tc.fn(k)
		})
	}
}

// lockC is a lock test with two Files a and b of /f.
type lockC struct {
	*C
	a, b layer.File
}

func (c *C) open(p string) layer.File {
	c.Helper()
	f, err := c.L.Open(c.Ctx, p, syscall.O_RDWR)
	c.OK(err, "open %s", p)
	c.Cleanup(func() { f.Release(context.Background()) })
	return f
}

// Lock types, named for brevity.
const (
	rd = syscall.F_RDLCK
	wr = syscall.F_WRLCK
	un = syscall.F_UNLCK
)

// toEOF is the End of a lock to end of file.
const toEOF = math.MaxUint64

func lk(typ uint32, start, end uint64) layer.Lock {
	return layer.Lock{Type: typ, Start: start, End: end, Pid: 1000 + typ}
}

// set takes lock l for owner through f and fails the test on error.
func (k *lockC) set(f layer.File, owner uint64, l layer.Lock) {
	k.Helper()
	k.OK(f.Setlk(k.Ctx, owner, l, false), "owner %d setlk %+v", owner, l)
}

// busy fails unless taking l for owner through f fails with EAGAIN.
func (k *lockC) busy(f layer.File, owner uint64, l layer.Lock) {
	k.Helper()
	k.Errno(f.Setlk(k.Ctx, owner, l, false), syscall.EAGAIN, "owner %d setlk %+v (should conflict)", owner, l)
}

// getlk fails unless Getlk of l for owner reports want (Type F_UNLCK: no
// conflict).
func (k *lockC) getlk(f layer.File, owner uint64, l layer.Lock, want layer.Lock) {
	k.Helper()
	got, err := f.Getlk(k.Ctx, owner, l)
	k.OK(err, "owner %d getlk %+v", owner, l)
	if got.Type != want.Type || (want.Type != un &&
		(got.Start != want.Start || got.End != want.End || got.Pid != want.Pid)) {
		k.Fatalf("owner %d getlk %+v: got %+v, want %+v", owner, l, got, want)
	}
}

func testLockConflict(k *lockC) {
	k.getlk(k.a, 1, lk(wr, 0, toEOF), lk(un, 0, 0))
	k.set(k.a, 1, lk(wr, 0, 99))
	k.busy(k.b, 2, lk(rd, 50, 60))
	k.busy(k.b, 2, lk(wr, 99, 99))
	k.getlk(k.b, 2, lk(rd, 50, 60), lk(wr, 0, 99))
	k.getlk(k.a, 1, lk(wr, 0, 10), lk(un, 0, 0))
	k.set(k.b, 2, lk(wr, 100, 200))
	k.busy(k.a, 1, lk(rd, 1, 0)) // End < Start: 1..EOF covers 100..200
	k.getlk(k.a, 1, lk(rd, 150, 0), lk(wr, 100, 200))
}

func testLockReadShare(k *lockC) {
	k.set(k.a, 1, lk(rd, 0, 99))
	k.set(k.b, 2, lk(rd, 50, 150))
	k.set(k.b, 3, lk(rd, 0, toEOF))
	k.busy(k.b, 2, lk(wr, 0, 10))
	k.busy(k.a, 1, lk(wr, 120, 130))
	k.getlk(k.a, 4, lk(rd, 0, toEOF), lk(un, 0, 0))
}

func testLockSplit(k *lockC) {
	k.set(k.a, 1, lk(wr, 0, toEOF))
	k.set(k.a, 1, lk(un, 100, 199))
	k.set(k.b, 2, lk(wr, 100, 199))
	k.busy(k.b, 2, lk(wr, 99, 99))
	k.busy(k.b, 2, lk(rd, 200, 200))
	k.busy(k.b, 2, lk(rd, 1<<40, 1<<40))
	k.getlk(k.b, 2, lk(rd, 300, 300), lk(wr, 200, toEOF))
	k.getlk(k.b, 2, lk(rd, 0, 0), lk(wr, 0, 99))
	k.set(k.a, 1, lk(un, 0, toEOF))
	k.set(k.b, 2, lk(wr, 0, 99))
}

func testLockUpgrade(k *lockC) {
	k.set(k.a, 1, lk(rd, 0, 99))
	k.set(k.a, 1, lk(wr, 0, 99)) // upgrade by the same owner
	k.busy(k.b, 2, lk(rd, 0, 0))
	k.set(k.a, 1, lk(rd, 50, 99)) // downgrade part of it
	k.set(k.b, 2, lk(rd, 50, 60))
	k.busy(k.b, 2, lk(rd, 49, 49))
	k.busy(k.a, 1, lk(wr, 55, 55)) // owner 2 reads there now
	k.getlk(k.b, 2, lk(wr, 0, toEOF), lk(wr, 0, 49))
}

func testLockSameOwner(k *lockC) {
	// Locks belong to the owner, not the File.
	k.set(k.a, 1, lk(wr, 0, 9))
	k.set(k.b, 1, lk(wr, 5, 20))
	k.set(k.b, 1, lk(un, 0, toEOF))
	k.set(k.a, 2, lk(wr, 0, 20))
}

func testLockOtherInode(k *lockC) {
	k.File("/g", "")
	g := k.open("/g")
	k.set(k.a, 1, lk(wr, 0, toEOF))
	k.set(g, 2, lk(wr, 0, toEOF))
}

func testLockHardLink(k *lockC) {
	_, err := k.L.Link(k.Ctx, "/f", "/h")
	k.OK(err, "link /f /h")
	h := k.open("/h")
	k.set(k.a, 1, lk(wr, 0, 0))
	k.busy(h, 2, lk(wr, 0, 0))
}

func testLockWait(k *lockC) {
	k.set(k.a, 1, lk(wr, 0, 99))
	done := make(chan error, 1)
	go func() { done <- k.b.Setlk(k.Ctx, 2, lk(wr, 10, 20), true) }()
	select {
	case err := <-done:
		k.Fatalf("blocking setlk returned %v while the lock was held", err)
	case <-time.After(50 * time.Millisecond):
	}
	k.set(k.a, 1, lk(un, 0, 5)) // does not free 10..20
	select {
	case err := <-done:
		k.Fatalf("blocking setlk returned %v after an unrelated unlock", err)
	case <-time.After(50 * time.Millisecond):
	}
	k.set(k.a, 1, lk(un, 0, toEOF))
	select {
	case err := <-done:
		k.OK(err, "blocking setlk after unlock")
	case <-time.After(5 * time.Second):
		k.Fatalf("blocking setlk not woken by unlock")
	}
	k.busy(k.a, 1, lk(rd, 15, 15))
}

func testLockCancel(k *lockC) {
	k.set(k.a, 1, lk(wr, 0, toEOF))
	ctx, cancel := context.WithTimeout(k.Ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := k.b.Setlk(ctx, 2, lk(rd, 0, 0), true)
	k.Errno(err, syscall.EINTR, "blocking setlk whose context ends")
	if d := time.Since(start); d > 3*time.Second {
		k.Fatalf("cancelled setlk took %v", d)
	}
	k.busy(k.b, 2, lk(rd, 0, 0)) // the lock is still held
	k.getlk(k.a, 1, lk(wr, 0, toEOF), lk(un, 0, 0))
}

func testLockFlush(k *lockC) {
	k.set(k.a, 1, lk(wr, 0, 9))
	k.set(k.a, 3, lk(wr, 20, 29))
	k.set(k.b, 1, lk(wr, 40, 49)) // same owner, other File: close drops it too
	k.OK(k.b.Flush(k.Ctx, 1), "flush owner 1")
	k.set(k.b, 2, lk(wr, 0, 9))
	k.set(k.b, 2, lk(wr, 40, 49))
	k.busy(k.b, 2, lk(wr, 20, 20)) // owner 3 still holds its lock
}

func testLockRelease(k *lockC) {
	a, err := k.L.Open(k.Ctx, "/f", syscall.O_RDWR) // released by the test
	k.OK(err, "open /f")
	k.set(a, 1, lk(wr, 0, 9))
	k.set(a, 1, layer.Lock{Type: wr, Flock: true})
	k.set(k.a, 1, lk(wr, 50, 59)) // same owner through another File: stays
	k.set(k.b, 3, lk(wr, 20, 29))
	done := make(chan error, 1)
	go func() { done <- k.b.Setlk(k.Ctx, 2, lk(wr, 0, 0), true) }()
	time.Sleep(20 * time.Millisecond)
	k.OK(a.Release(k.Ctx), "release")
	select {
	case err := <-done:
		k.OK(err, "waiter after release")
	case <-time.After(5 * time.Second):
		k.Fatalf("waiter not woken by release")
	}
	k.set(k.b, 2, layer.Lock{Type: wr, Flock: true})
	k.busy(k.b, 2, lk(wr, 20, 20))
	k.busy(k.b, 2, lk(wr, 55, 55))
}

func testFlock(k *lockC) {
	fl := func(typ uint32) layer.Lock { return layer.Lock{Type: typ, Flock: true, Pid: 7} }
	k.set(k.a, 1, fl(rd))
	k.set(k.b, 2, fl(rd))
	k.busy(k.b, 2, fl(wr))
	k.set(k.a, 1, fl(un))
	k.set(k.b, 2, fl(wr)) // upgrade
	k.busy(k.a, 1, fl(rd))
	got, err := k.a.Getlk(k.Ctx, 1, fl(rd))
	k.OK(err, "getlk flock")
	if got.Type != wr || !got.Flock {
		k.Fatalf("getlk flock: %+v", got)
	}
	k.set(k.b, 2, fl(rd)) // downgrade
	k.set(k.a, 1, fl(rd))
}

func testFlockPosix(k *lockC) {
	k.set(k.a, 1, layer.Lock{Type: wr, Flock: true})
	k.set(k.b, 2, lk(wr, 0, toEOF)) // POSIX locks ignore flocks
	k.busy(k.b, 2, layer.Lock{Type: rd, Flock: true})
	k.OK(k.a.Flush(k.Ctx, 1), "flush") // close drops POSIX locks, not flocks
	k.busy(k.b, 2, layer.Lock{Type: rd, Flock: true})
	k.set(k.a, 1, layer.Lock{Type: un, Flock: true})
	k.set(k.b, 2, layer.Lock{Type: rd, Flock: true})
	k.busy(k.a, 1, lk(rd, 0, 0))
}
