package protocol

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/locks"
	"github.com/mortarfs/mortar/wire"
)

func wrlck(start, end uint64) layer.Lock {
	return layer.Lock{Type: syscall.F_WRLCK, Start: start, End: end}
}

// lockBrick is a test brick with the locks layer over its store.
func lockBrick(t *testing.T) *testBrick {
	b := newTestBrick(t)
	b.srv.Add("brick-1", testVolume, locks.New(b.store))
	return b
}

// openDB opens /db through c, released when the test ends.
func openDB(t *testing.T, c *Client) layer.File {
	t.Helper()
	f, err := c.Open(context.Background(), "/db", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Release(context.Background()) })
	return f
}

// mustLease takes owner's write lock of byte 0 through f, which must
// bring f a lease.
func mustLease(t *testing.T, f layer.File, owner uint64) {
	t.Helper()
	if err := f.Setlk(context.Background(), owner, wrlck(0, 0), false); err != nil {
		t.Fatal(err)
	}
	if !leased(f) {
		t.Fatal("no lease for the only client locking")
	}
}

func leased(f layer.File) bool {
	pf := f.(*file)
	pf.lmu.Lock()
	defer pf.lmu.Unlock()
	return pf.liveLease() != nil
}

// Two clients of one brick: the first locks alone under a lease, with no
// round trip; the second's request recalls it, and sees exactly the locks
// the first held by then.
func TestLockLeaseAcrossClients(t *testing.T) {
	ctx := context.Background()
	b := lockBrick(t)
	c1, c2 := b.client(t, Config{}), b.client(t, Config{})
	f1 := writeFile(t, c1, "/db", "x")
	defer f1.Release(ctx)
	f2 := openDB(t, c2)

	mustLease(t, f1, 7)
	// Under the lease: unlock 0, take 10-20, test against its own owner.
	unlock := layer.Lock{Type: syscall.F_UNLCK, Start: 0, End: 0}
	if err := f1.Setlk(ctx, 7, unlock, false); err != nil {
		t.Fatal(err)
	}
	if err := f1.Setlk(ctx, 7, wrlck(10, 20), false); err != nil {
		t.Fatal(err)
	}
	if err := f1.Setlk(ctx, 8, wrlck(15, 15), false); err != syscall.EAGAIN {
		t.Fatalf("another owner's lock over a leased one: %v, want EAGAIN", err)
	}
	if lk, err := f1.Getlk(ctx, 8, wrlck(0, 100)); err != nil || lk.Start != 10 || lk.End != 20 {
		t.Fatalf("getlk under the lease: %+v, %v", lk, err)
	}
	if !leased(f1) {
		t.Fatal("the lease ended without a recall")
	}

	// The second client: its requests recall the lease.
	if err := f2.Setlk(ctx, 7, wrlck(12, 12), false); err != syscall.EAGAIN {
		t.Fatalf("lock over the first client's: %v, want EAGAIN", err)
	}
	if leased(f1) {
		t.Fatal("the first client kept a recalled lease")
	}
	if err := f2.Setlk(ctx, 7, wrlck(0, 5), false); err != nil {
		t.Fatalf("lock of a range the first client unlocked under its lease: %v", err)
	}
	if lk, err := f2.Getlk(ctx, 7, wrlck(0, 100)); err != nil || lk.Start != 10 || lk.Type != syscall.F_WRLCK {
		t.Fatalf("getlk from the second client: %+v, %v", lk, err)
	}
	if err := f1.Setlk(ctx, 7, wrlck(3, 3), false); err != syscall.EAGAIN {
		t.Fatalf("first client over the second's lock: %v, want EAGAIN", err)
	}
	if leased(f1) {
		t.Fatal("a lease granted while another client holds locks")
	}

	// A blocking request waits on the brick for the other's unlock.
	done := make(chan error, 1)
	go func() { done <- f1.Setlk(ctx, 7, wrlck(3, 3), true) }()
	if err := f2.Flush(ctx, 7); err != nil { // close(2): drops its locks
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("blocking lock after the other's close: %v", err)
	}
}

// A lease dies with its connection: after a reconnect the client asks the
// brick again.
func TestLockLeaseEndsWithConnection(t *testing.T) {
	ctx := context.Background()
	b := lockBrick(t)
	c := b.client(t, Config{})
	f := writeFile(t, c, "/db", "x")
	defer f.Release(ctx)
	mustLease(t, f, 1)
	old := f.(*file).lease.s
	b.stop()
	<-old.dead
	b.start(b.addr)
	b.srv.Add("brick-1", testVolume, locks.New(b.store))
	if !c.WaitConnected(ctx) {
		t.Fatal("no reconnect")
	}
	if leased(f) {
		t.Fatal("a lease outlived its connection")
	}
	other := b.client(t, Config{})
	g := openDB(t, other)
	if err := g.Setlk(ctx, 1, wrlck(0, 0), false); err != nil {
		t.Fatalf("a lock of a connection that closed stands: %v", err)
	}
}

// A connection whose request slots are all taken by requests waiting for
// a lease it holds still carries the lease's return.
func TestLockLeaseReturnedOnFullConnection(t *testing.T) {
	ctx := context.Background()
	b := lockBrick(t)
	b.srv.SetLimits(brick.Limits{MaxInFlight: 1})
	c := b.client(t, Config{})
	f := writeFile(t, c, "/db", "x")
	defer f.Release(ctx)
	g := openDB(t, c)
	mustLease(t, f, 1)
	// g's request takes the one slot and waits for f's lease.
	if err := g.Setlk(ctx, 2, wrlck(0, 0), false); err != syscall.EAGAIN {
		t.Fatalf("lock over the leased one: %v, want EAGAIN", err)
	}
}

// A client does not keep more locks under a lease than a return carries.
func TestLockLeaseGivenBackWhenFull(t *testing.T) {
	ctx := context.Background()
	b := lockBrick(t)
	c1, c2 := b.client(t, Config{}), b.client(t, Config{})
	f := writeFile(t, c1, "/db", "x")
	defer f.Release(ctx)
	for i := range uint64(wire.MaxLeaseLocks + 10) {
		if err := f.Setlk(ctx, 1, wrlck(2*i, 2*i), false); err != nil {
			t.Fatalf("lock %d: %v", i, err)
		}
	}
	if leased(f) {
		t.Fatal("a lease kept past the locks a return carries")
	}
	g := openDB(t, c2)
	last := 2 * uint64(wire.MaxLeaseLocks+9)
	if err := g.Setlk(ctx, 2, wrlck(last, last), false); err != syscall.EAGAIN {
		t.Fatalf("lock over the first client's last one: %v, want EAGAIN", err)
	}
	if err := g.Setlk(ctx, 2, wrlck(1, 1), false); err != nil {
		t.Fatalf("lock between the first client's: %v", err)
	}
}

// A lease whose brick has not been heard from for a while may have been
// recalled and revoked unheard: the client hands it back before using it.
func TestLockLeaseNotTrustedUnheard(t *testing.T) {
	ctx := context.Background()
	b := lockBrick(t)
	c := b.client(t, Config{PingInterval: time.Hour, PingTimeout: 2 * time.Hour})
	f := writeFile(t, c, "/db", "x")
	defer f.Release(ctx)
	mustLease(t, f, 1)
	s := f.(*file).lease.s
	s.lastRecv.Store(time.Now().Add(-leaseTrust - time.Second).UnixNano())
	if lk, err := f.Getlk(ctx, 2, wrlck(0, 0)); err != nil || lk.Type != syscall.F_WRLCK {
		t.Fatalf("getlk: %+v, %v; want the lock, from the brick", lk, err)
	}
	if leased(f) {
		t.Fatal("a lease used unheard from its brick")
	}
}

// A client told not to ask for leases sends every lock to the brick.
func TestNoLeases(t *testing.T) {
	ctx := context.Background()
	b := lockBrick(t)
	c := b.client(t, Config{NoLeases: true})
	f := writeFile(t, c, "/db", "x")
	defer f.Release(ctx)
	if err := f.Setlk(ctx, 1, wrlck(0, 0), false); err != nil {
		t.Fatal(err)
	}
	if leased(f) {
		t.Fatal("a lease for a client that asks for none")
	}
}
