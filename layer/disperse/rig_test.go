package disperse

import (
	"bytes"
	"context"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/layer/replicate"
)

const testVolume = "vol-disperse-test"

// rig is a disperse set of real bricks, each behind a network client.
type rig struct {
	t        testing.TB
	ctx      context.Context
	set      *testbrick.Set
	bricks   []*testbrick.Brick
	clients  []*protocol.Client
	children []replicate.Child
	d        *Disperse
}

func newRig(t testing.TB, n, m int) *rig {
	t.Helper()
	return rigOf(t, testbrick.NewSet(t, n, testVolume, func(int) posix.Options { return posix.Options{Disperse: true} }), m)
}

// newLeasingRig is newRig with clients that take directory leases: a
// directory made through the rig's layer leases it its names.
func newLeasingRig(t testing.TB, n, m int) *rig {
	t.Helper()
	return rigOf(t, testbrick.NewLeasingSet(t, n, testVolume, func(int) posix.Options { return posix.Options{Disperse: true} }), m)
}

func rigOf(t testing.TB, set *testbrick.Set, m int) *rig {
	t.Helper()
	g := &rig{t: t, ctx: context.Background(), set: set, bricks: set.Bricks, clients: set.Clients}
	for i, c := range set.Clients {
		g.children = append(g.children, replicate.Child{Name: set.Name(i), Layer: c, Up: c.Connected})
	}
	d, err := New(g.children, m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g.d = d
	return g
}

// writeFile creates path holding data, and waits until its release (which
// clears the Dirty mark in the background) is done.
func (g *rig) writeFile(path string, data []byte) {
	g.t.Helper()
	f, _, err := g.d.Create(g.ctx, path, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := f.Write(g.ctx, data, 0); err != nil {
		g.t.Fatal(err)
	}
	f.Release(g.ctx)
	g.d.Idle()
}

// readBack fails the test unless path, opened anew, holds want.
func (g *rig) readBack(path string, want []byte) {
	g.t.Helper()
	rf, err := g.d.Open(g.ctx, path, syscall.O_RDONLY)
	if err != nil {
		g.t.Fatal(err)
	}
	defer rf.Release(g.ctx)
	back := make([]byte, len(want))
	if n, err := rf.Read(g.ctx, back, 0); err != nil || n != len(want) || !bytes.Equal(back, want) {
		g.t.Fatalf("read back %d bytes, %v; equal %v", n, err, bytes.Equal(back, want))
	}
}

// kill stops brick i and waits until its client has noticed.
func (g *rig) kill(i int) { g.t.Helper(); g.set.Kill(i) }

// revive starts brick i again on its port and waits for its client.
func (g *rig) revive(i int) { g.t.Helper(); g.set.Revive(i) }
