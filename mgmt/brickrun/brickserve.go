package brickrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer/locks"
	"github.com/mortarfs/mortar/layer/readahead"
	"github.com/mortarfs/mortar/tlsconf"
)

// AddrInUseWait is how long a brick asked for a given port retries while
// the port is busy: a brick killed with its node may hold it for a moment
// after the node is back. (A variable for tests.)
var AddrInUseWait = 3 * time.Second

// Config is one brick as it is served, by a brick process (`mortar
// brick`) or inside the node.
type Config struct {
	Volume   string // volume name, for logs
	VolumeID string // the brick directory must be marked with it
	BrickID  string // what clients name in their handshake
	Path     string // the brick directory
	Arbiter  bool   // an arbiter brick (names and metadata, no file data)
	Disperse bool   // a brick of a disperse set (its files are fragments)
	// Replicated: a brick of a replicated set; it marks files that a
	// client went away from with writes for the healer
	// (brick.BrickOptions.MarkAbandoned).
	Replicated bool
	// Listen is the TCP address to serve on; port 0 picks a free port.
	Listen string

	// TLS, when set, makes the brick accept only TLS 1.3 connections with
	// a client certificate of TLS's CA. A brick process loads it from
	// TLSDir and TLSName (mortar brick --tls-dir --tls-name); Args
	// takes them from TLS when they are empty.
	TLS             *tlsconf.Identity
	TLSDir, TLSName string
	// Auth is the volume's auth.allow and auth.reject. AuthFile, when
	// set, holds them instead (tlsconf.WriteAuthFile), read again at every
	// new connection so that they can change while the brick runs; a
	// missing file allows everyone. Served.SetAuth changes Auth of a
	// brick served in-process.
	Auth     tlsconf.AuthRules
	AuthFile string
	// Reserve is the volume's storage.reserve ("": the default; see
	// posix.ParseReserve). ReserveFile, when set, holds it too, read
	// again at every Recheck, so that a change applies while the brick
	// runs; a missing file changes nothing.
	Reserve     string
	ReserveFile string
	// FenceFile, when set, holds the volume's layout fence (decimal):
	// clients of an older spec may not make names (brick.Server.SetFence).
	// Read at the start and at every Recheck; the fence only goes up.
	FenceFile string
	// MaxConnsPerClient bounds the connections one client may hold open
	// (0: brick.DefaultMaxConnsPerClient; < 0: no bound).
	MaxConnsPerClient int
	// Logger receives the brick's logs (default: discarded).
	Logger *slog.Logger
}

// Served is a brick's storage stack served on its own listener: the
// posix storage, the locks layer, and read-ahead for sequential O_DIRECT
// reads on top.
type Served struct {
	cfg   Config
	ln    net.Listener
	srv   *brick.Server
	store *posix.Store

	closeOnce sync.Once
	closeErr  error
}

// Open opens the brick's storage and listens on cfg.Listen. Serve
// then serves it until Close.
func Open(cfg Config) (*Served, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TLS == nil && (cfg.TLSDir != "" || cfg.TLSName != "") {
		id, err := tlsconf.FromFlags(cfg.TLSDir, cfg.TLSName)
		if err != nil {
			return nil, fmt.Errorf("brick TLS: %w", err)
		}
		cfg.TLS = id
	}
	var reserve posix.Reserve
	if cfg.Reserve != "" {
		r, err := posix.ParseReserve(cfg.Reserve)
		if err != nil {
			return nil, err
		}
		reserve = r
	}
	st, err := posix.New(cfg.Path, posix.Options{VolumeID: cfg.VolumeID, Logger: cfg.Logger, Arbiter: cfg.Arbiter, Disperse: cfg.Disperse, Reserve: reserve})
	if err != nil {
		return nil, err
	}
	ln, err := listenBrick(cfg.Listen)
	if err != nil {
		st.Close()
		return nil, err
	}
	srv := brick.NewServer(cfg.Logger)
	if cfg.TLS != nil {
		srv.UseTLS(cfg.TLS)
	}
	switch {
	case cfg.MaxConnsPerClient < 0:
		srv.MaxConnsPerClient = 0
	case cfg.MaxConnsPerClient > 0:
		srv.MaxConnsPerClient = cfg.MaxConnsPerClient
	}
	if cfg.AuthFile != "" {
		srv.SetAuthSource(cfg.VolumeID, tlsconf.AuthFile(cfg.AuthFile))
	} else if !cfg.Auth.Empty() {
		srv.SetAuth(cfg.VolumeID, cfg.Auth)
	}
	// locks on top: its Files lease (layer.LockLeaser)
	srv.AddWith(cfg.BrickID, cfg.VolumeID, locks.New(readahead.New(st)), brick.BrickOptions{MarkAbandoned: cfg.Replicated, MarkAbandonedNames: cfg.Disperse})
	b := &Served{cfg: cfg, ln: ln, srv: srv, store: st}
	b.reloadFence()
	return b, nil
}

// listenBrick listens on addr, waiting up to AddrInUseWait for a given
// port that is still busy.
func listenBrick(addr string) (net.Listener, error) {
	deadline := time.Now().Add(AddrInUseWait)
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
func (b *Served) Addr() string { return b.ln.Addr().String() }

// SetAuth replaces the brick's access rules (and stops reading AuthFile):
// new connections are checked against r.
func (b *Served) SetAuth(r tlsconf.AuthRules) { b.srv.SetAuth(b.cfg.VolumeID, r) }

// Recheck applies the brick's current access rules to the connections it
// has, closing those they now refuse (brick.Server.Recheck), and the
// reserve ReserveFile holds.
func (b *Served) Recheck() {
	b.srv.Recheck()
	b.reloadReserve()
	b.reloadFence()
}

// reloadFence raises the brick's layout fence to what FenceFile holds, if
// there is one.
func (b *Served) reloadFence() {
	if b.cfg.FenceFile == "" {
		return
	}
	data, err := os.ReadFile(b.cfg.FenceFile)
	if err != nil {
		return // none written yet: no fence
	}
	gen, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		b.cfg.Logger.Warn("layout fence not applied", "value", string(data), "err", err)
		return
	}
	b.srv.SetFence(b.cfg.BrickID, gen)
	b.cfg.Logger.Debug("layout fence applied", "spec_version", gen)
}

// reloadReserve applies the reserve in ReserveFile, if there is one.
func (b *Served) reloadReserve() {
	if b.cfg.ReserveFile == "" {
		return
	}
	data, err := os.ReadFile(b.cfg.ReserveFile)
	if err != nil {
		return // none written yet: the reserve the brick started with
	}
	var r posix.Reserve // "": the default
	if v := strings.TrimSpace(string(data)); v != "" {
		if r, err = posix.ParseReserve(v); err != nil {
			b.cfg.Logger.Warn("storage.reserve not applied", "value", v, "err", err)
			return
		}
	}
	b.store.ApplyReserve(r)
	b.cfg.Logger.Info("storage.reserve applied", "value", string(data))
}

// Serve accepts clients until Close.
func (b *Served) Serve() error {
	tlsName := ""
	if b.cfg.TLS != nil {
		tlsName = b.cfg.TLS.Name()
	}
	b.cfg.Logger.Info("brick serving", "path", b.cfg.Path, "addr", b.Addr(), "arbiter", b.cfg.Arbiter, "disperse", b.cfg.Disperse, "replicated", b.cfg.Replicated,
		"tls", tlsName, "auth_file", b.cfg.AuthFile)
	return b.srv.Serve(b.ln)
}

// Close stops accepting, closes every client connection and the storage.
func (b *Served) Close() error {
	b.closeOnce.Do(func() {
		b.ln.Close()
		b.srv.Close()
		b.closeErr = b.store.Close()
	})
	return b.closeErr
}

// Run is the body of a brick process: it opens the brick, writes the
// readiness line to ready ("ok ADDR", or "error: WHY" when the brick
// cannot be served) and closes it, serves until ctx is done, and closes
// the brick. ready may be nil.
func Run(ctx context.Context, cfg Config, ready io.WriteCloser) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // the node changed the access rules
	defer signal.Stop(hup)
	b, err := Open(cfg)
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
	for done := false; !done; {
		select {
		case <-ctx.Done():
			cfg.Logger.Info("brick stopping")
			done = true
		case err = <-served:
			done = true
		case <-hup:
			b.Recheck()
		}
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

func readyLine(b *Served, err error) string {
	if err != nil {
		return readyError + strings.ReplaceAll(err.Error(), "\n", "; ") + "\n"
	}
	return readyOK + b.Addr() + "\n"
}
