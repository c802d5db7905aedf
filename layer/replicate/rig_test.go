package replicate

import (
	"context"
	"fmt"
	"testing"
	"time"

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
	bricks  []*testbrick.Brick
	clients []*protocol.Client
	r       *Replicate
}

func newRig(t testing.TB, n int, arbiter bool, opts Options) *rig {
	t.Helper()
	g := &rig{t: t, ctx: context.Background()}
	var children []Child
	for i := 0; i < n; i++ {
		arb := arbiter && i == n-1
		b := testbrick.New(t, fmt.Sprintf("brick-%d", i), testVolume, posix.Options{Arbiter: arb})
		c := protocol.New(protocol.Config{Addr: b.Addr, BrickID: b.ID, VolumeID: testVolume,
			ConnectWait: 50 * time.Millisecond})
		t.Cleanup(func() { c.Close() })
		g.bricks = append(g.bricks, b)
		g.clients = append(g.clients, c)
		children = append(children, Child{Name: b.Addr + ":" + b.Dir, Layer: c, Arbiter: arb, Up: c.Connected})
	}
	r, err := New(children, opts)
	if err != nil {
		t.Fatal(err)
	}
	g.r = r
	g.waitUp(g.r.all)
	return g
}

// waitUp waits until the replicas in m are connected.
func (g *rig) waitUp(m Mask) {
	g.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.r.up()&m != m {
		if time.Now().After(deadline) {
			g.t.Fatalf("replicas %b not up after 10s (up: %b)", m, g.r.up())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kill stops brick i and waits until its client has noticed.
func (g *rig) kill(i int) {
	g.t.Helper()
	g.bricks[i].Stop()
	deadline := time.Now().Add(10 * time.Second)
	for g.clients[i].Connected() {
		if time.Now().After(deadline) {
			g.t.Fatalf("client of brick %d still connected 10s after it stopped", i)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// revive starts brick i again on its port and waits for its client.
func (g *rig) revive(i int) {
	g.t.Helper()
	g.bricks[i].Start()
	g.waitUp(Bit(i))
}

// onBrick returns the storage of brick i, straight (no network).
func (g *rig) onBrick(i int) layer.Layer { return g.bricks[i].Store }
