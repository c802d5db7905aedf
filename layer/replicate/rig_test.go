package replicate

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/locks"
	"github.com/mortarfs/mortar/layer/protocol"
)

const testVolume = "vol-replicate-test"

// testBrick is a real brick served on 127.0.0.1 that a test can stop (as
// if its process were killed) and start again on the same port.
type testBrick struct {
	t       testing.TB
	id      string
	dir     string
	arbiter bool
	addr    string
	ln      net.Listener
	srv     *brick.Server
	store   *posix.Store
}

func (b *testBrick) start() {
	b.t.Helper()
	st, err := posix.New(b.dir, posix.Options{VolumeID: testVolume, Arbiter: b.arbiter})
	if err != nil {
		b.t.Fatal(err)
	}
	addr := b.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	for i := 0; ; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil || i == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond) // the old socket may linger briefly
	}
	if err != nil {
		b.t.Fatal(err)
	}
	b.store, b.ln, b.addr = st, ln, ln.Addr().String()
	b.srv = brick.NewServer(nil)
	b.srv.Add(b.id, testVolume, locks.New(st))
	go b.srv.Serve(ln)
}

// stop kills the brick: listener and connections closed at once.
func (b *testBrick) stop() {
	if b.srv == nil {
		return
	}
	b.ln.Close()
	b.srv.Close()
	b.store.Close()
	b.srv = nil
}

// rig is a replica set of real bricks, each behind a network client.
type rig struct {
	t       testing.TB
	ctx     context.Context
	bricks  []*testBrick
	clients []*protocol.Client
	r       *Replicate
}

func newRig(t testing.TB, n int, arbiter bool, opts Options) *rig {
	t.Helper()
	g := &rig{t: t, ctx: context.Background()}
	var children []Child
	for i := 0; i < n; i++ {
		b := &testBrick{t: t, id: fmt.Sprintf("brick-%d", i), dir: t.TempDir(), arbiter: arbiter && i == n-1}
		if err := posix.Mark(b.dir, testVolume, false); err != nil {
			t.Fatal(err)
		}
		b.start()
		t.Cleanup(b.stop)
		c := protocol.New(protocol.Config{Addr: b.addr, BrickID: b.id, VolumeID: testVolume,
			ConnectWait: 50 * time.Millisecond})
		t.Cleanup(func() { c.Close() })
		g.bricks = append(g.bricks, b)
		g.clients = append(g.clients, c)
		children = append(children, Child{Name: b.addr + ":" + b.dir, Layer: c, Arbiter: b.arbiter, Up: c.Connected})
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
	g.bricks[i].stop()
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
	g.bricks[i].start()
	g.waitUp(Bit(i))
}

// onBrick returns the storage of brick i, straight (no network).
func (g *rig) onBrick(i int) layer.Layer { return g.bricks[i].store }
