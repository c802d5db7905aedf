package mgmt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mortarfs/mortar/internal/atomicfile"
	"github.com/mortarfs/mortar/internal/proof"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/brickrun"
	"github.com/mortarfs/mortar/mgmt/raftstore"
	"github.com/mortarfs/mortar/mgmt/rebalance"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/tlsconf"
	"github.com/mortarfs/mortar/volume"
)

// shutdownTimeout bounds how long Close waits for HTTP requests in flight.
const shutdownTimeout = 5 * time.Second

// Node is a running management daemon: the HTTP API on the node's port,
// the cluster state, and the node's bricks, each on its own port.
type Node struct {
	log      *slog.Logger
	id       string
	addr     string // advertised host:port
	dir      string
	lock     *os.File
	store    Store
	raft     *raftstore.Store // the same store, with its cluster operations
	raftAddr string           // advertised address of the Raft traffic
	raftLn   net.Listener
	peerHTTP *http.Client           // requests to other nodes
	dial     volume.Dial            // connects to bricks (nil: plain TCP)
	tls      *tlsconf.Identity      // nil: plain TCP everywhere
	secretV  atomic.Pointer[string] // the cluster secret (secret.go)
	signed   *proof.Replays         // nonces of the signed requests accepted (sign.go)
	done     chan struct{}          // closed when the node closes
	kick     chan struct{}          // wakes reconcile
	kickOnce sync.Once
	specs    *specNotifier // wakes the spec watches
	watchers watchers      // the clients that watch specs here (takeup.go)

	taskMu    sync.Mutex
	tasks     map[string]bool  // ids of the tasks this node orchestrates
	mover     *rebalance.Mover // this node's part of its volumes' tasks
	ln        net.Listener
	http      *http.Server
	runner    brickrun.Runner
	brickHost string // host the bricks listen on (that of Config.Listen)

	// opMu serialises the operations that change volumes, so that checks
	// and the command that follows them see the same state.
	opMu sync.Mutex

	runMu   sync.Mutex
	vols    map[string]*volumeRun // by volume id: the volumes running here
	closing bool

	connMu  sync.Mutex
	pending map[net.Conn]struct{} // HTTP connections that sent nothing yet
	closed  bool

	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Start starts a node as configured: it opens the state in cfg.DataDir,
// listens, restarts the bricks of started volumes and serves until Close.
func Start(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	n := &Node{
		log:     cfg.Logger,
		dir:     cfg.DataDir,
		vols:    map[string]*volumeRun{},
		pending: map[net.Conn]struct{}{},
		done:    make(chan struct{}),
		specs:   newSpecNotifier(),
		peerHTTP: &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     30 * time.Second,
		}},
	}
	if err := n.open(cfg); err != nil {
		n.Close()
		return nil, err
	}
	n.settle()
	n.restoreBricks()
	n.runner.Settle()
	n.serve()
	n.raft.OnChange(n.changed)
	n.raft.OnLead(n.resumeTasks)
	n.resumeTasks()
	n.log.Info("node started", "id", n.id, "listen", n.ln.Addr().String(), "advertise", n.addr, "data", n.dir, "brick-processes", cfg.BrickExec != "")
	return n, nil
}

// open takes the data directory, loads the state and listens.
func (n *Node) open(cfg Config) error {
	var err error
	if n.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return err
	}
	idPath := filepath.Join(cfg.DataDir, "node.json")
	ident, err := loadIdentity(idPath)
	if err != nil {
		return err
	}
	n.id = ident.ID
	secret, err := loadSecret(cfg.DataDir)
	if err != nil {
		return err
	}
	n.secretV.Store(&secret)
	n.signed = proof.NewReplays(signWindow, maxSigned)
	if n.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if n.tls = cfg.TLS; n.tls != nil {
		n.ln = tlsconf.WrapListener(n.ln, n.tls, n.log)
		n.peerHTTP = &http.Client{Transport: api.Transport(n.tls.ClientConfig())}
		n.dial = n.tls.Dialer(5 * time.Second)
	}
	n.mover = rebalance.New(n.id, filepath.Join(n.dir, "rebalance"), n.dial, n.log, n.inodesOf, n.done)
	n.addr = cfg.Advertise
	if n.addr == "" {
		n.addr = deriveAdvertise(n.ln.Addr().String())
	}
	if n.raftLn, err = listenRaft(cfg, n.ln.Addr(), ident.RaftPort); err != nil {
		return err
	}
	if port := portOf(n.raftLn.Addr().String()); port != ident.RaftPort {
		ident.RaftPort = port
		if err := atomicfile.WriteJSON(idPath, ident); err != nil {
			return fmt.Errorf("save node identity: %w", err)
		}
	}
	advHost, _ := api.SplitHostPortDefault(n.addr)
	n.raftAddr = net.JoinHostPort(advHost, strconv.Itoa(portOf(n.raftLn.Addr().String())))
	if n.raft, err = raftstore.Open(cfg.DataDir, n.id, n.raftLn, n.raftAddr, n.tls, n.secret, n.log); err != nil {
		return err
	}
	n.raft.SetForward(n.forwardApply)
	n.store = n.raft
	n.brickHost, _, _ = net.SplitHostPort(cfg.Listen)
	if cfg.BrickExec != "" {
		n.runner = brickrun.Processes(cfg.BrickExec, filepath.Join(cfg.DataDir, "logs", "bricks"), cfg.BrickLogLevel,
			cfg.DataDir, cfg.BrickMultiplex, cfg.KeepBricks, n.log)
	} else {
		n.runner = brickrun.InProc{}
	}
	return nil
}

// serve starts the HTTP server.
func (n *Node) serve() {
	n.http = &http.Server{
		Handler:           n.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
		ConnState:         n.trackConn,
	}
	n.wg.Go(func() {
		if err := n.http.Serve(n.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server stopped", "err", err)
		}
	})
}

// trackConn keeps the connections that have not sent a request yet, which
// http.Server.Shutdown would otherwise wait for, so that Close can close
// them at once.
func (n *Node) trackConn(c net.Conn, state http.ConnState) {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	switch {
	case state == http.StateNew && n.closed:
		c.Close()
	case state == http.StateNew:
		n.pending[c] = struct{}{}
	default:
		delete(n.pending, c)
	}
}

// Addr returns the address others use to reach the node (host:port).
func (n *Node) Addr() string { return n.addr }

// ListenAddr returns the address the node listens on.
func (n *Node) ListenAddr() string { return n.ln.Addr().String() }

// LoopbackOnly reports whether the node listens on a loopback address
// only (its default), out of reach of other machines.
func (n *Node) LoopbackOnly() bool {
	ip := net.ParseIP(n.brickHost)
	return ip != nil && ip.IsLoopback()
}

// ID returns the node's id.
func (n *Node) ID() string { return n.id }

// Close stops serving, stops the node's bricks (the volumes stay started in
// the state and come back when the node starts again) and releases the
// data directory.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.shutdown() })
	return n.closeErr
}

func (n *Node) shutdown() error {
	var errs []error
	n.connMu.Lock()
	if !n.closed && n.done != nil {
		close(n.done)
		n.specs.close() // watches end before Shutdown waits for them
	}
	n.closed = true
	for c := range n.pending {
		c.Close()
	}
	n.connMu.Unlock()
	if n.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		if err := n.http.Shutdown(ctx); err != nil {
			n.http.Close()
		}
		cancel()
	} else if n.ln != nil {
		n.ln.Close()
	}
	// A request still changing volumes finishes first.
	n.opMu.Lock()
	n.stopAllBricks()
	n.opMu.Unlock()
	n.wg.Wait()
	if n.mover != nil {
		n.mover.Wait()
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	} else if n.raftLn != nil {
		n.raftLn.Close()
	}
	if n.lock != nil {
		errs = append(errs, n.lock.Close())
	}
	if n.http != nil {
		n.log.Info("node stopped", "id", n.id)
	}
	return errors.Join(errs...)
}

// listenRaft listens for the node's Raft traffic: on cfg.RaftListen if
// set; else on the API's host, at the port the node used before (kept in
// its identity, as the other nodes know it by it), or on a first start the
// API's port + 1 (7421 by default) when free, or any free port.
func listenRaft(cfg Config, api net.Addr, kept int) (net.Listener, error) {
	if cfg.RaftListen != "" {
		ln, err := net.Listen("tcp", cfg.RaftListen)
		if err != nil {
			return nil, fmt.Errorf("listen for raft: %w", err)
		}
		return ln, nil
	}
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen address %s: %w", cfg.Listen, err)
	}
	if kept != 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(kept)))
		if err != nil {
			return nil, fmt.Errorf("listen for raft on the port this node always used: %w", err)
		}
		return ln, nil
	}
	if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(portOf(api.String())+1))); err == nil {
		return ln, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen for raft: %w", err)
	}
	return ln, nil
}

// settle waits for the cluster to have a leader and records this node's
// addresses. A one-node cluster elects itself at once; a node of a larger
// cluster whose peers are down registers in the background, and meanwhile
// serves from the state it last applied.
func (n *Node) settle() {
	if n.raft.Voters() <= 1 {
		if err := n.raft.WaitLeader(raftstore.LeaderWait); err != nil {
			n.log.Warn("no leader yet", "err", err)
		}
		n.raft.CatchUp(raftstore.LeaderWait)
		n.register()
		return
	}
	if n.raft.WaitLeader(3*time.Second) == nil {
		n.raft.CatchUp(3 * time.Second)
	}
	n.wg.Go(n.register)
}

// changed is called after every change of the cluster state. It wakes the
// reconciler, which makes this node run what the state says it should.
func (n *Node) changed() {
	n.notifySpecs()
	n.connMu.Lock() // no reconciler starts once Close waits for them
	closed := n.closed
	if !closed {
		n.kickOnce.Do(func() {
			n.kick = make(chan struct{}, 1)
			n.wg.Go(n.reconcile)
		})
	}
	n.connMu.Unlock()
	if closed {
		return
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// reconcile starts this node's bricks of started volumes that it does not
// run yet (a volume started while the node was away) and stops those of
// volumes that are gone, until the node closes. Stopping and starting a
// volume otherwise come from the leader, which asks every node.
func (n *Node) reconcile() {
	for {
		select {
		case <-n.done:
			return
		case <-n.kick:
		}
		st := n.store.State()
		n.writeRevoked(st)
		for _, name := range st.VolumeNames() {
			v := st.Volumes[name]
			n.writeAuth(v)    // auth.allow or auth.reject may have changed
			n.writeReserve(v) // or storage.reserve
			n.writeFence(v)   // or the layout
			if v.Status != api.StatusStarted || !slices.ContainsFunc(v.Bricks, func(b state.Brick) bool { return b.Node == n.id }) {
				continue
			}
			n.runMu.Lock()
			_, running := n.vols[v.ID]
			n.runMu.Unlock()
			if !running {
				n.log.Info("starting the bricks of a volume started elsewhere", "volume", v.Name)
				if err := n.startBricks(v, st.Index, false); err != nil {
					n.log.Error("bricks did not start", "volume", v.Name, "err", err)
				}
			}
		}
		n.sweep(st)
	}
}

// sweep stops this node's runs of volumes that st, a state read by the
// reconciler, no longer has (deleted while the node was away). A run
// made from a state newer than st (st.Index below the run's made: the
// volume was created and started after st was read, or started on a
// request from a leader whose state is ahead of this node's) is not st's
// to judge.
func (n *Node) sweep(st *state.State) {
	ids := map[string]bool{}
	for _, v := range st.Volumes {
		ids[v.ID] = true
	}
	n.runMu.Lock()
	var gone []string
	for id, vr := range n.vols {
		switch {
		case ids[id]:
			vr.known, vr.made = true, max(vr.made, st.Index)
		case vr.known && st.Index >= vr.made:
			gone = append(gone, id)
		}
	}
	n.runMu.Unlock()
	for _, id := range gone {
		n.stopVolumeRun(id)
	}
}
