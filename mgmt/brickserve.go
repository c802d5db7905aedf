package mgmt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer/locks"
	"github.com/mortarfs/mortar/layer/readahead"
)

// addrInUseWait is how long a brick asked for a given port retries while
// the port is busy: a brick killed with its node may hold it for a moment
// after the node is back. (A variable for tests.)
var addrInUseWait = 3 * time.Second

// BrickConfig is one brick as it is served, by a brick process (`mortar
// brick`) or inside the node.
type BrickConfig struct {
	Volume   string // volume name, for logs
	VolumeID string // the brick directory must be marked with it
	BrickID  string // what clients name in their handshake
	Path     string // the brick directory
	Arbiter  bool   // an arbiter brick (names and metadata, no file data)
	Disperse bool   // a brick of a disperse set (its files are fragments)
	// Listen is the TCP address to serve on; port 0 picks a free port.
	Listen string
	// Logger receives the brick's logs (default: discarded).
	Logger *slog.Logger
}

// ServedBrick is a brick's storage stack served on its own listener: the
// posix storage, the locks layer, and read-ahead for sequential O_DIRECT
// reads on top.
type ServedBrick struct {
	cfg   BrickConfig
	ln    net.Listener
	srv   *brick.Server
	store *posix.Store

	closeOnce sync.Once
	closeErr  error
}

// OpenBrick opens the brick's storage and listens on cfg.Listen. Serve
// then serves it until Close.
func OpenBrick(cfg BrickConfig) (*ServedBrick, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	st, err := posix.New(cfg.Path, posix.Options{VolumeID: cfg.VolumeID, Logger: cfg.Logger, Arbiter: cfg.Arbiter, Disperse: cfg.Disperse})
	if err != nil {
		return nil, err
	}
	ln, err := listenBrick(cfg.Listen)
	if err != nil {
		st.Close()
		return nil, err
	}
	srv := brick.NewServer(cfg.Logger)
	srv.Add(cfg.BrickID, cfg.VolumeID, readahead.New(locks.New(st)))
	return &ServedBrick{cfg: cfg, ln: ln, srv: srv, store: st}, nil
}

// listenBrick listens on addr, waiting up to addrInUseWait for a given
// port that is still busy.
func listenBrick(addr string) (net.Listener, error) {
	deadline := time.Now().Add(addrInUseWait)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln, nil
		}
		_, port, _ := net.SplitHostPort(addr)
		if !errors.Is(err, syscall.EADDRINUSE) || port == "0" || port == "" {
			return nil, fmt.Errorf("listen: %w", err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("port %s, this brick's port, is in use by another program; free it and run \"mortar volume start VOLUME force\" (clients look for the brick on that port): %w", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addr returns the address the brick listens on.
func (b *ServedBrick) Addr() string { return b.ln.Addr().String() }

// Serve accepts clients until Close.
func (b *ServedBrick) Serve() error {
	b.cfg.Logger.Info("brick serving", "path", b.cfg.Path, "addr", b.Addr(), "arbiter", b.cfg.Arbiter, "disperse", b.cfg.Disperse)
	return b.srv.Serve(b.ln)
}

// Close stops accepting, closes every client connection and the storage.
func (b *ServedBrick) Close() error {
	b.closeOnce.Do(func() {
		b.ln.Close()
		b.srv.Close()
		b.closeErr = b.store.Close()
	})
	return b.closeErr
}

// RunBrick is the body of a brick process: it opens the brick, writes the
// readiness line to ready ("ok ADDR", or "error: WHY" when the brick
// cannot be served) and closes it, serves until ctx is done, and closes
// the brick. ready may be nil.
func RunBrick(ctx context.Context, cfg BrickConfig, ready io.WriteCloser) error {
	b, err := OpenBrick(cfg)
	if err == nil {
		cfg = b.cfg // with defaults
	}
	if ready != nil {
		io.WriteString(ready, readyLine(b, err)) //nolint:errcheck // the node may be gone; it kills us then
		ready.Close()
	}
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- b.Serve() }()
	select {
	case <-ctx.Done():
		cfg.Logger.Info("brick stopping")
	case err = <-served:
	}
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return err
}

// The readiness line a brick process writes on its pipe.
const (
	readyOK    = "ok "
	readyError = "error: "
)

func readyLine(b *ServedBrick, err error) string {
	if err != nil {
		return readyError + strings.ReplaceAll(err.Error(), "\n", "; ") + "\n"
	}
	return readyOK + b.Addr() + "\n"
}
