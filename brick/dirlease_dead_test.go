package brick

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/mortarfs/mortar/wire"
)

// A mkdir of a connection that is shutting down that reaches enter after
// shutdown released its leases is granted none: the next client touching
// the directory would wait RecallTimeout for a dead connection. (Found by
// review.)
func TestDirLeaseNotGrantedAfterRelease(t *testing.T) {
	tbl := newDirLeases()
	a1, a2 := net.Pipe()
	defer a2.Close()
	dead := newConn(a1, wire.NewWriter(a1, 0), "b", nil)
	dead.limits.RecallTimeout = 500 * time.Millisecond
	// shutdown: cancel, close, release...
	dead.cancel()
	dead.nc.Close()
	tbl.release(dead)
	// ...while a request goroutine of it was still on its way to enter.
	mk := &wire.Request{Op: wire.OpMkdir, Path: "/d", Flags: wire.MkdirLease}
	leave, err := tbl.enter(dead.ctx, dead, mk)
	if err != nil {
		t.Fatalf("enter: %v", err)
	}
	if id := leave(nil); id != 0 {
		t.Errorf("lease %d granted to a connection already released", id)
	}
	b1, b2 := net.Pipe()
	defer b2.Close()
	other := newConn(b1, wire.NewWriter(b1, 0), "b", nil)
	start := time.Now()
	lk := &wire.Request{Op: wire.OpLookup, Path: "/d/x"}
	leave2, err := tbl.enter(context.Background(), other, lk)
	if err != nil {
		t.Fatal(err)
	}
	leave2(nil)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("another client's lookup waited %v (RecallTimeout) for a lease of a dead connection", d)
	}
}
