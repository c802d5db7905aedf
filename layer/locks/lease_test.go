package locks_test

import (
	"context"
	"math"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/locks"
)

// holder is a lease holder that reports recalls and revocations.
type holder struct {
	recalls chan uint64
	revoked chan struct{}
}

func newHolder() *holder {
	return &holder{recalls: make(chan uint64, 8), revoked: make(chan struct{}, 8)}
}

func (h *holder) Recall(id uint64) { h.recalls <- id }
func (h *holder) Revoke()          { h.revoked <- struct{}{} }

func wrlck(start, end uint64) layer.Lock {
	return layer.Lock{Type: syscall.F_WRLCK, Start: start, End: end}
}

// leaseStack is a locks layer with /f open twice (a and b), and leases
// granted again at once after a recall.
func leaseStack(t *testing.T) (a, b layer.File) {
	t.Helper()
	quiet := locks.Quiet
	locks.Quiet = 0
	t.Cleanup(func() { locks.Quiet = quiet })
	l := newStack(t)
	a = createF(t, l)
	b, err := l.Open(context.Background(), "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Release(context.Background()) })
	return a, b
}

func lease(t *testing.T, f layer.File, owner uint64, lk layer.Lock, h layer.LeaseHolder) uint64 {
	t.Helper()
	id, err := f.(layer.LockLeaser).SetlkLease(context.Background(), owner, lk, h)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// run runs fn in the background; its error arrives on the channel.
func run(fn func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	return done
}

// Another File's lock request recalls the lease and waits for it; the
// locks the holder returns are the ones in force afterwards.
func TestLeaseRecalledAndReturned(t *testing.T) {
	ctx := context.Background()
	a, b := leaseStack(t)
	h := newHolder()
	id := lease(t, a, 1, wrlck(0, 9), h)
	if id == 0 {
		t.Fatal("no lease for the only file locking")
	}
	// Meanwhile the holder released 0-4 on its own and kept 5-9.
	done := run(func() error { return b.Setlk(ctx, 2, wrlck(0, 4), false) })
	if got := <-h.recalls; got != id {
		t.Fatalf("recalled lease %d, want %d", got, id)
	}
	select {
	case err := <-done:
		t.Fatalf("the lock request ran before the lease came back: %v", err)
	default:
	}
	held := []layer.HeldLock{{Owner: 1, Lock: wrlck(5, 9)}}
	if err := a.(layer.LockLeaser).ReturnLease(ctx, id, held, false); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("lock of a range the holder gave up: %v", err)
	}
	if err := b.Setlk(ctx, 2, wrlck(7, 7), false); err != syscall.EAGAIN {
		t.Fatalf("lock of a range the holder returned: %v, want EAGAIN", err)
	}
	if id := lease(t, a, 1, wrlck(20, 20), newHolder()); id != 0 {
		t.Fatal("lease granted while another file holds locks")
	}
}

// The client starts its table with the lock that brought the lease: no
// lease while the file holds other locks, which that table would miss.
func TestLeaseOnlyWithTheOneLock(t *testing.T) {
	ctx := context.Background()
	a, _ := leaseStack(t)
	if err := a.Setlk(ctx, 1, wrlck(5, 5), false); err != nil {
		t.Fatal(err)
	}
	if id := lease(t, a, 1, wrlck(0, 0), newHolder()); id != 0 {
		t.Fatal("lease granted while the file holds another lock")
	}
	unlock := layer.Lock{Type: syscall.F_UNLCK, End: math.MaxUint64}
	if id := lease(t, a, 1, unlock, newHolder()); id == 0 {
		t.Fatal("no lease once the file holds no lock")
	}
}

// Getlk and Flush through another File recall the lease too: the lease's
// locks are not on the brick's table until it comes back.
func TestLeaseRecalledByGetlkAndFlush(t *testing.T) {
	ctx := context.Background()
	a, b := leaseStack(t)
	h := newHolder()
	id := lease(t, a, 1, wrlck(0, 0), h)
	back := func() {
		got := <-h.recalls
		held := []layer.HeldLock{{Owner: 1, Lock: wrlck(3, 3)}}
		if err := a.(layer.LockLeaser).ReturnLease(ctx, got, held, false); err != nil {
			t.Error(err)
		}
	}
	go back()
	lk, err := b.Getlk(ctx, 2, wrlck(0, 9))
	if err != nil || lk.Type != syscall.F_WRLCK || lk.Start != 3 {
		t.Fatalf("getlk after the recall: %+v, %v; want the returned lock at 3", lk, err)
	}
	id = lease(t, a, 1, wrlck(3, 3), h)
	if id == 0 {
		t.Fatal("no lease for the only file locking")
	}
	go back()
	if err := b.Flush(ctx, 1); err != nil { // owner 1 closes another descriptor
		t.Fatal(err)
	}
	if err := b.Setlk(ctx, 2, wrlck(3, 3), false); err != nil {
		t.Fatalf("owner 1's locks survived its close: %v", err)
	}
}

// A lease ends with its File, and a holder that keeps a recalled lease is
// revoked.
func TestLeaseEndsWithReleaseOrRevocation(t *testing.T) {
	ctx := context.Background()
	timeout := locks.RecallTimeout
	locks.RecallTimeout = time.Millisecond
	t.Cleanup(func() { locks.RecallTimeout = timeout })
	a, b := leaseStack(t)
	h := newHolder()
	lease(t, a, 1, wrlck(0, 0), h)
	done := run(func() error { return b.Setlk(ctx, 2, wrlck(1, 1), false) })
	<-h.recalls
	<-h.revoked
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := b.Setlk(ctx, 2, wrlck(0, 0), false); err != nil {
		t.Fatalf("a revoked holder's lock stands: %v", err)
	}
	// A lease that ends with its file is not waited for.
	locks.RecallTimeout = timeout
	if id := lease(t, b, 2, layer.Lock{Type: syscall.F_UNLCK, End: math.MaxUint64}, newHolder()); id == 0 {
		t.Fatal("no lease for the only file locking")
	}
	done = run(func() error { return a.Setlk(ctx, 1, wrlck(5, 5), false) })
	b.Release(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A close through another File whose wait for the recall is interrupted
// still drops the owner's locks: those the holder returns too.
func TestLeaseInterruptedFlushDropsOwner(t *testing.T) {
	a, b := leaseStack(t)
	h := newHolder()
	id := lease(t, a, 1, wrlck(0, 0), h)
	ctx, cancel := context.WithCancel(context.Background())
	done := run(func() error { return b.Flush(ctx, 1) })
	<-h.recalls
	cancel()
	<-done
	held := []layer.HeldLock{{Owner: 1, Lock: wrlck(0, 0)}, {Owner: 3, Lock: wrlck(1, 1)}}
	if err := a.(layer.LockLeaser).ReturnLease(context.Background(), id, held, false); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	if err := b.Setlk(bg, 2, wrlck(0, 0), false); err != nil {
		t.Fatalf("the lock of an owner that closed came back: %v", err)
	}
	if err := b.Setlk(bg, 2, wrlck(1, 1), false); err != syscall.EAGAIN {
		t.Fatalf("another owner's returned lock: %v, want EAGAIN", err)
	}
}

// A lock request through the leased File itself comes from a client that
// does not know of the lease: the lease ends, the table stands.
func TestLeaseEndsWithRequestThroughItsFile(t *testing.T) {
	ctx := context.Background()
	a, b := leaseStack(t)
	h := newHolder()
	lease(t, a, 1, wrlck(0, 0), h)
	if err := a.Setlk(ctx, 1, wrlck(1, 1), false); err != nil {
		t.Fatal(err)
	}
	if err := b.Setlk(ctx, 2, wrlck(0, 1), false); err != syscall.EAGAIN {
		t.Fatalf("lock over the table's locks: %v, want EAGAIN", err)
	}
	select {
	case id := <-h.recalls:
		t.Fatalf("lease %d recalled after it ended", id)
	default:
	}
}
