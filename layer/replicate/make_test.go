package replicate

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
	"github.com/mortarfs/mortar/layer/locks"
	"github.com/mortarfs/mortar/layer/protocol"
)

// faultyStore is a brick's storage whose operations fail when told, and
// that keeps the heal records.
type faultyStore struct {
	*layertest.Fault
	layer.HealStore
}

// A file made in one go (create, write, setattr) that fails part-way on
// one replica is marked on the others, the file itself as well as its
// directory: the healer must copy its content and attributes, not only
// its name.
func TestMakeFailingOnOneReplicaIsMarked(t *testing.T) {
	ctx := context.Background()
	var stores []*posix.Store
	var faults []*layertest.Fault
	var children []Child
	for i := range 3 {
		st := testbrick.NewStore(t, testVolume)
		f := layertest.NewFault(st)
		srv := brick.NewServer(nil)
		id := "brick-" + string(rune('a'+i))
		srv.Add(id, testVolume, locks.New(faultyStore{f, st}))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		t.Cleanup(func() { ln.Close(); srv.Close() })
		c := protocol.New(protocol.Config{Addr: ln.Addr().String(), BrickID: id, VolumeID: testVolume})
		t.Cleanup(func() { c.Close() })
		stores, faults = append(stores, st), append(faults, f)
		children = append(children, Child{Name: id, Layer: c, Up: c.Connected})
	}
	r, err := New(children, Options{ConnectWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ok := c.Layer.(*protocol.Client).WaitConnected(wctx)
		cancel()
		if !ok {
			t.Fatal("a brick's client did not connect")
		}
	}
	faults[1].Fail("Write", syscall.EIO) // after its create: the brick removes the file again
	in := layer.CreateIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Flags: syscall.O_WRONLY | syscall.O_EXCL, Mode: 0o644,
		Data: []byte("made in one go"), Set: layer.SetattrIn{Valid: layer.SetMode, Mode: 0o600}}
	f, _, err := r.Create(ctx, "/f", in)
	if err != nil {
		t.Fatalf("a make that fails on one replica of three: %v", err)
	}
	f.Release(ctx)
	for _, i := range []int{0, 2} {
		for _, p := range []string{"/", "/f"} {
			a, err := stores[i].Lookup(ctx, p)
			if err != nil || Mask(a.Pending) != Bit(1) {
				t.Errorf("replica %d, %s: pending %b (%v), want the failed replica blamed", i, p, a.Pending, err)
			}
		}
	}
	if _, err := stores[1].Lookup(ctx, "/f"); err != syscall.ENOENT {
		t.Fatalf("the failed replica kept a half-made file: %v", err)
	}
}
