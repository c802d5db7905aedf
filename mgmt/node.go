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

	"github.com/mortarfs/mortar/brick"
)

// shutdownTimeout bounds how long Close waits for HTTP requests in flight.
const shutdownTimeout = 5 * time.Second

// Node is a running management daemon: the HTTP API, the node's bricks and
// the cluster state, all behind one TCP port.
type Node struct {
	log    *slog.Logger
	id     string
	addr   string // advertised host:port
	dir    string
	lock   *os.File
	store  Store
	ln     net.Listener
	httpLn *connListener
	http   *http.Server
	bricks *brick.Server

	// opMu serialises the operations that change volumes, so that checks
	// and the command that follows them see the same state.
	opMu sync.Mutex

	runMu   sync.Mutex
	running map[string]*runningBrick // by brick id
	failed  map[string]string        // brick id → why it did not start

	connMu  sync.Mutex
	pending map[net.Conn]struct{} // connections being sniffed
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
		running: map[string]*runningBrick{},
		failed:  map[string]string{},
		pending: map[net.Conn]struct{}{},
	}
	if err := n.open(cfg); err != nil {
		n.Close()
		return nil, err
	}
	n.restoreBricks()
	n.serve()
	n.log.Info("node started", "id", n.id, "listen", n.ln.Addr().String(), "advertise", n.addr, "data", n.dir)
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
	n.bricks = brick.NewServer(n.log.With("component", "brick-server"))
	return nil
}

// serve starts the accept loop and the HTTP server.
func (n *Node) serve() {
	n.httpLn = newConnListener(n.ln.Addr())
	n.http = &http.Server{
		Handler:           n.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
	}
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		if err := n.http.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server stopped", "err", err)
		}
	}()
	go func() {
		defer n.wg.Done()
		n.acceptLoop()
	}()
}

// acceptLoop accepts connections and hands each to the brick server or
// the HTTP server by its first bytes.
func (n *Node) acceptLoop() {
	for {
		c, err := n.ln.Accept()
		if err != nil {
			if !isClosedErr(err) {
				n.log.Error("accept failed; node stops accepting", "err", err)
			}
			return
		}
		if !n.track(c) {
			c.Close()
			return
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.dispatch(c)
		}()
	}
}

// track records c as being sniffed; false if the node is closing.
func (n *Node) track(c net.Conn) bool {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	if n.closed {
		return false
	}
	n.pending[c] = struct{}{}
	return true
}

func (n *Node) untrack(c net.Conn) {
	n.connMu.Lock()
	delete(n.pending, c)
	n.connMu.Unlock()
}

func (n *Node) dispatch(c net.Conn) {
	sc, isBrick, err := sniff(c)
	n.untrack(c)
	if err != nil {
		n.log.Debug("connection closed before its protocol was known", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	if isBrick {
		n.log.Debug("brick connection", "remote", c.RemoteAddr().String())
		n.bricks.ServeConn(sc)
		return
	}
	n.httpLn.push(sc)
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
	if n.ln != nil {
		n.ln.Close()
	}
	if n.http != nil {
		n.httpLn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		if err := n.http.Shutdown(ctx); err != nil {
			n.http.Close()
		}
		cancel()
	}
	if n.bricks != nil {
		if err := n.bricks.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close brick server: %w", err))
		}
		n.closeAllBricks()
	}
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
