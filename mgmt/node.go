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
	"sync"
	"time"
)

// shutdownTimeout bounds how long Close waits for HTTP requests in flight.
const shutdownTimeout = 5 * time.Second

// Node is a running management daemon: the HTTP API on the node's port,
// the cluster state, and the node's bricks, each on its own port.
type Node struct {
	log       *slog.Logger
	id        string
	addr      string // advertised host:port
	dir       string
	lock      *os.File
	store     Store
	ln        net.Listener
	http      *http.Server
	runner    brickRunner
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
	}
	if err := n.open(cfg); err != nil {
		n.Close()
		return nil, err
	}
	n.restoreBricks()
	n.serve()
	n.log.Info("node started", "id", n.id, "listen", n.ln.Addr().String(), "advertise", n.addr, "data", n.dir, "brick-processes", cfg.BrickExec != "")
	return n, nil
}

// open takes the data directory, loads the state and listens.
func (n *Node) open(cfg Config) error {
	var err error
	if n.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return err
	}
	if n.id, err = loadIdentity(filepath.Join(cfg.DataDir, "node.json")); err != nil {
		return err
	}
	if n.store, err = openFileStore(filepath.Join(cfg.DataDir, "state.json")); err != nil {
		return err
	}
	if n.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	n.addr = cfg.Advertise
	if n.addr == "" {
		n.addr = deriveAdvertise(n.ln.Addr().String())
	}
	if old, ok := n.store.State().Nodes[n.id]; !ok || old.Addr != n.addr {
		if err := n.store.Apply(Command{Op: OpSetNode, Node: &NodeState{ID: n.id, Addr: n.addr}}); err != nil {
			return fmt.Errorf("register node: %w", err)
		}
	}
	n.brickHost, _, _ = net.SplitHostPort(cfg.Listen)
	if cfg.BrickExec != "" {
		n.runner = newProcRunner(cfg.BrickExec, filepath.Join(cfg.DataDir, "logs", "bricks"), cfg.BrickLogLevel, n.log)
	} else {
		n.runner = inProcRunner{}
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
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	if n.lock != nil {
		errs = append(errs, n.lock.Close())
	}
	if n.http != nil {
		n.log.Info("node stopped", "id", n.id)
	}
	return errors.Join(errs...)
}
