package brick

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/protocol"
)

// entryClient connects a real client to the test brick.
func entryClient(t *testing.T, addr string) *protocol.Client {
	t.Helper()
	c := protocol.New(protocol.Config{Addr: addr, BrickID: testBrick, VolumeID: testVolume, ConnectWait: 10 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// mkfile creates name and reports when the brick answered.
func mkfile(ctx context.Context, c *protocol.Client, path string) <-chan error {
	done := make(chan error, 1)
	go func() {
		f, _, err := c.Create(ctx, path, layer.CreateIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o644, Flags: syscall.O_EXCL})
		if err == nil {
			f.Release(ctx)
		}
		done <- err
	}()
	return done
}

// A directory a healer holds: other clients' creates in it wait until it
// is let go, its holder's own operations and those elsewhere do not, and
// a second healer is refused.
func TestEntryLockHoldsNamesStill(t *testing.T) {
	s, _ := newStore(t)
	ts := startServer(t, s, DefaultLimits())
	ctx := context.Background()
	healer, client, other := entryClient(t, ts.addr), entryClient(t, ts.addr), entryClient(t, ts.addr)
	if _, err := client.Mkdir(ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := healer.LockEntries(ctx, "/d"); err != nil {
		t.Fatal(err)
	}
	if err := other.LockEntries(ctx, "/d"); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("a second healer's hold: %v, want EAGAIN", err)
	}
	waiting := mkfile(ctx, client, "/d/x")
	if err := <-mkfile(ctx, healer, "/d/mine"); err != nil {
		t.Fatalf("the holder's own create: %v", err)
	}
	if err := <-mkfile(ctx, client, "/elsewhere"); err != nil {
		t.Fatalf("a create in another directory: %v", err)
	}
	select {
	case err := <-waiting:
		t.Fatalf("a create in the held directory went ahead (err %v)", err)
	default:
	}
	if err := healer.UnlockEntries(ctx, "/d"); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatalf("the create once let go: %v", err)
	}
}

// A healer whose connection ends lets its directories go.
func TestEntryLockGoesWithItsConnection(t *testing.T) {
	s, _ := newStore(t)
	ts := startServer(t, s, DefaultLimits())
	ctx := context.Background()
	healer, client := entryClient(t, ts.addr), entryClient(t, ts.addr)
	if err := healer.LockEntries(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	waiting := mkfile(ctx, client, "/x")
	healer.Close()
	held := ts.srv.bricks[testBrick].entries
	for deadline := time.Now().Add(10 * time.Second); held.n.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the directory is still held by a healer whose connection ended")
		}
	}
	if err := <-waiting; err != nil {
		t.Fatal(err)
	}
}

// An operation does not wait for a held directory forever: holding is
// for the healer's progress, not a lock clients depend on.
func TestEntryLockWaitIsBounded(t *testing.T) {
	var e entryLocks
	holder, waiter := &conn{}, &conn{}
	if err := e.lock("/d", holder); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e.wait(context.Background(), waiter, "/d"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < entryWaitMax {
		t.Fatalf("waited %v for a held directory, want %v", d, entryWaitMax)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.wait(ctx, waiter, "/d"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v", err)
	}
}

// The heal lease: one connection holds it at a time (taking it again
// keeps it), it holds no names still, and it goes with an unlease or the
// holder's connection.
func TestHealLeaseOneHolder(t *testing.T) {
	s, _ := newStore(t)
	ts := startServer(t, s, DefaultLimits())
	ctx := context.Background()
	a, b, client := entryClient(t, ts.addr), entryClient(t, ts.addr), entryClient(t, ts.addr)
	for range 2 {
		if err := a.LeaseHeal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.LeaseHeal(ctx); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("a second healer's lease: %v, want EAGAIN", err)
	}
	if err := <-mkfile(ctx, client, "/x"); err != nil {
		t.Fatalf("a create while the lease is held: %v", err)
	}
	if err := a.UnleaseHeal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.LeaseHeal(ctx); err != nil {
		t.Fatalf("the lease let go: %v", err)
	}
	b.Close()
	for deadline := time.Now().Add(10 * time.Second); a.LeaseHeal(ctx) != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lease is still held by a healer whose connection ended")
		}
	}
}
