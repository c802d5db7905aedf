package disperse

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/layer/replicate"
)

const testVolume = "vol-disperse-test"

// rig is a disperse set of real bricks, each behind a network client.
type rig struct {
	t        testing.TB
	ctx      context.Context
	bricks   []*testbrick.Brick
	clients  []*protocol.Client
	children []replicate.Child
	d        *Disperse
}

func newRig(t testing.TB, n, m int) *rig {
	t.Helper()
	g := &rig{t: t, ctx: context.Background()}
	for i := 0; i < n; i++ {
		b := testbrick.New(t, fmt.Sprintf("brick-%d", i), testVolume, posix.Options{Disperse: true})
		c := protocol.New(protocol.Config{Addr: b.Addr, BrickID: b.ID, VolumeID: testVolume,
			ConnectWait: 50 * time.Millisecond})
		t.Cleanup(func() { c.Close() })
		g.bricks = append(g.bricks, b)
		g.clients = append(g.clients, c)
		g.children = append(g.children, replicate.Child{Name: b.Addr + ":" + b.Dir, Layer: c, Up: c.Connected})
	}
	d, err := New(g.children, m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g.d = d
	g.waitUp(d.all())
	return g
}

// waitUp waits until the bricks in m are connected.
func (g *rig) waitUp(m replicate.Mask) {
	g.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.d.up()&m != m {
		if time.Now().After(deadline) {
			g.t.Fatalf("bricks %b not up after 10s (up: %b)", m, g.d.up())
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
	g.waitUp(replicate.Bit(i))
}
