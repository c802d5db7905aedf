package replicate

import (
	"context"
	"testing"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/protocol"
)

const testVolume = "vol-replicate-test"

// rig is a replica set of real bricks, each behind a network client.
type rig struct {
	t       testing.TB
	ctx     context.Context
	set     *testbrick.Set
	bricks  []*testbrick.Brick
	clients []*protocol.Client
	r       *Replicate
}

func newRig(t testing.TB, n int, arbiter bool, opts Options) *rig {
	t.Helper()
	arb := func(i int) bool { return arbiter && i == n-1 }
	set := testbrick.NewSet(t, n, testVolume, func(i int) posix.Options { return posix.Options{Arbiter: arb(i)} })
	g := &rig{t: t, ctx: context.Background(), set: set, bricks: set.Bricks, clients: set.Clients}
	var children []Child
	for i, c := range set.Clients {
		children = append(children, Child{Name: set.Name(i), Layer: c, Arbiter: arb(i), Up: c.Connected})
	}
	r, err := New(children, opts)
	if err != nil {
		t.Fatal(err)
	}
	g.r = r
	return g
}

// kill stops brick i and waits until its client has noticed.
func (g *rig) kill(i int) { g.t.Helper(); g.set.Kill(i) }

// revive starts brick i again on its port and waits for its client.
func (g *rig) revive(i int) { g.t.Helper(); g.set.Revive(i) }

// onBrick returns the storage of brick i, straight (no network).
func (g *rig) onBrick(i int) layer.Layer { return g.bricks[i].Store }
