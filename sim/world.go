package sim

import (
	"context"
	"fmt"
	"github.com/mortarfs/mortar/volume/options"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/heal"
	"github.com/mortarfs/mortar/layer/disperse"
	"github.com/mortarfs/mortar/layer/locks"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/layer/replicate"
	"github.com/mortarfs/mortar/volume"
)

const volumeID = "5e5e5e5e-0000-4000-8000-000000000001"

// healerClient is the network identity of the healer's connections: no
// fault is ever injected on them.
const healerClient = -1

// brickNode is one brick: a posix store in a directory, served while up.
type brickNode struct {
	id, dir, addr string
	opts          posix.Options
	replicated    bool
	store         *posix.Store
	srv           *brick.Server
	// full: its disk is full (Config.FullDisks), across restarts; kept is
	// its store's reserve from before.
	full bool
	kept uint64
}

// world is one run's volume: its bricks, clients, network and healer.
type world struct {
	cfg     Config
	spec    volume.Spec
	net     *network
	bricks  []*brickNode
	clients []*client
	nextID  int // network identity of the next client graph
	healer  *heal.Healer
	sets    []heal.Set
	hclient []*protocol.Client
	reb     *rebalancer // the rebalance under way (Config.Grow), or nil
}

// client is one mount's graph, as volume.Build makes it.
type client struct {
	id    int // its network identity
	graph *volume.Graph
	open  []*openFile // files it holds open across steps
	// old are graphs of earlier specs (before a layout change), kept for
	// the files opened through them, as a mount's volume.Live keeps them.
	old []*volume.Graph
}

// graphs returns every graph of c, the current one first.
func (c *client) graphs() []*volume.Graph {
	return append([]*volume.Graph{c.graph}, c.old...)
}

func newWorld(cfg Config, dir string) (*world, error) {
	w := &world{cfg: cfg, net: newNetwork()}
	w.spec = volume.Spec{Name: "sim", ID: volumeID, Version: 1, Options: map[string]string{
		options.OptClientCache: "off", // the model checks what every client reads at once
	}}
	switch {
	case cfg.Disperse > 0:
		w.spec.Type, w.spec.Disperse, w.spec.Redundancy = volume.Disperse, cfg.Disperse, cfg.Redundancy
	default:
		w.spec.Type, w.spec.Replica = volume.Replicate, cfg.Replica
	}
	for i := range cfg.Bricks {
		b := &brickNode{id: fmt.Sprintf("brick-%d", i), dir: filepath.Join(dir, fmt.Sprintf("b%d", i)),
			addr: fmt.Sprintf("sim-%d:7000", i), replicated: cfg.Disperse == 0,
			opts: posix.Options{VolumeID: volumeID, Disperse: cfg.Disperse > 0}}
		if err := os.Mkdir(b.dir, 0o755); err != nil {
			return nil, err
		}
		if err := posix.Mark(b.dir, volumeID, true); err != nil {
			return nil, err
		}
		w.bricks = append(w.bricks, b)
		w.spec.Bricks = append(w.spec.Bricks, volume.Brick{ID: b.id, Host: fmt.Sprintf("sim-%d", i), Path: b.dir, Addr: b.addr})
	}
	if cfg.Grow {
		// The last set was just added: in no range of the layout until a
		// rebalance gives it one (rebalance.go).
		ids := w.spec.SetIDs()
		l := volume.EvenLayout(ids[:len(ids)-1])
		w.spec.Layout = &l
	}
	if err := w.spec.Validate(); err != nil {
		return nil, err
	}
	for _, b := range w.bricks {
		if err := w.start(b); err != nil {
			return nil, err
		}
	}
	for range cfg.Clients {
		c, err := w.newClient()
		if err != nil {
			return nil, err
		}
		w.clients = append(w.clients, c)
	}
	if err := w.settled(); err != nil {
		return nil, err
	}
	return w, w.newHealer()
}

// start opens a brick's storage and serves it.
func (w *world) start(b *brickNode) error {
	st, err := posix.New(b.dir, b.opts)
	if err != nil {
		return err
	}
	srv := brick.NewServer(nil)
	srv.MaxConnsPerClient = 0
	srv.AddWith(b.id, volumeID, locks.New(st), brick.BrickOptions{MarkAbandoned: b.replicated, MarkAbandonedNames: !b.replicated})
	b.store, b.srv = st, srv
	if b.full {
		b.kept = st.SetReserve(math.MaxUint64)
	}
	w.net.serve(b.addr, srv)
	return nil
}

// fill makes b's disk full or gives it its room back.
func (w *world) fill(b *brickNode, full bool) {
	b.full = full
	switch {
	case b.store == nil:
	case full:
		b.kept = b.store.SetReserve(math.MaxUint64)
	default:
		b.store.SetReserve(b.kept)
	}
}

// anyFull reports whether a brick's disk is full.
func (w *world) anyFull() bool {
	for _, b := range w.bricks {
		if b.full {
			return true
		}
	}
	return false
}

// crash stops a brick as a kill would: connections cut, nothing flushed
// beyond what the storage already wrote.
func (w *world) crash(b *brickNode) {
	if b.srv == nil {
		return
	}
	w.net.serve(b.addr, nil)
	b.srv.Close()
	b.store.Close()
	b.srv, b.store = nil, nil
}

// newClient builds a graph under a new network identity.
func (w *world) newClient() (*client, error) {
	id := w.nextID
	w.nextID++
	opts := volume.BuildOptions{Dial: w.net.dialer(id)}
	if os.Getenv("MORTAR_SIM_CLIENT_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("client", id)
	}
	g, err := volume.Build(w.spec, opts)
	if err != nil {
		return nil, err
	}
	// Not waiting for its connections: a brick may be down, and an
	// operation waits for a brick that is up (protocol's ConnectWait).
	return &client{id: id, graph: g}, nil
}

// crashClient makes client i die: its links are cut for good (nothing
// it still sends arrives, its files stay open on the bricks until they
// see the connections end), and a new client takes its place.
func (w *world) crashClient(i int) error {
	old := w.clients[i]
	w.net.isolate(old.id)
	for _, g := range old.graphs() {
		go g.Close() // cannot reach anything any more
	}
	c, err := w.newClient()
	w.clients[i] = c
	return err
}

func (w *world) addrs() []string {
	var a []string
	for _, b := range w.bricks {
		a = append(a, b.addr)
	}
	return a
}

// newHealer connects the healer's clients and builds it (not started:
// the run heals at its end).
func (w *world) newHealer() error {
	for _, set := range w.spec.Sets() {
		var hs heal.Set
		for _, b := range set {
			cfg := volume.BrickClientConfig(w.spec, b)
			cfg.Dial, cfg.ConnectWait = w.net.dialer(healerClient), 100*time.Millisecond
			c := protocol.New(cfg)
			w.hclient = append(w.hclient, c)
			hs = append(hs, heal.Replica{Name: b.Name(), Layer: c, Arbiter: b.Arbiter, Up: c.Connected})
		}
		w.sets = append(w.sets, hs)
	}
	opts := heal.Options{Interval: 50 * time.Millisecond, Quiet: 50 * time.Millisecond,
		Quorate: func(_ int, m replicate.Mask) bool { return w.spec.Quorate(m) }}
	if os.Getenv("MORTAR_SIM_HEAL_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if w.spec.Type == volume.Disperse {
		sets := make([][]replicate.Child, len(w.sets))
		for i, s := range w.sets {
			sets[i] = s
		}
		dh, err := disperse.NewDataHealer(sets, w.spec.Redundancy)
		if err != nil {
			return err
		}
		dh.Quiet = 50 * time.Millisecond
		opts.Data = dh
	}
	var err error
	w.healer, err = heal.New(w.sets, opts)
	return err
}

// close stops everything.
func (w *world) close() {
	for _, c := range w.clients {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		for _, f := range c.open {
			f.f.Release(ctx)
		}
		cancel()
		for _, g := range c.graphs() {
			g.Close()
		}
	}
	w.reb.close()
	for _, c := range w.hclient {
		c.Close()
	}
	for _, b := range w.bricks {
		w.crash(b)
	}
}

// settled waits until every live client sees each brick as the network
// has it: connected to a brick that is up and not cut off from it, and
// not to the others. Operations then find the same state whatever the
// timing of reconnections, and a seed replays the same run.
func (w *world) settled() error {
	err := waitFor(10*time.Second, func() bool {
		for _, c := range w.clients {
			for _, g := range c.graphs() {
				if !w.sees(c.id, g) {
					return false
				}
			}
		}
		return w.reb == nil || w.sees(rebalancerClient, w.reb.graph)
	})
	if err != nil {
		return fmt.Errorf("clients' connections did not settle: %w", err)
	}
	return nil
}

// sees reports whether graph g of network identity id is connected to
// every brick up it is not cut off from, and to no other.
func (w *world) sees(id int, g *volume.Graph) bool {
	for i, pc := range g.Clients() {
		b := w.bricks[i]
		if pc.Connected() != (b.srv != nil && !w.net.isCut(link{id, b.addr})) {
			return false
		}
	}
	return true
}

// waitFor polls cond until it holds or within passes: a connection being
// made, a heal being done, have no event to wait on from outside.
func waitFor(within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not so after %v", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
