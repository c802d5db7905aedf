package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"
)

// HandshakeTimeout bounds a server-side handshake in Listen.
const HandshakeTimeout = 10 * time.Second

// recordTypeHandshake is the first byte of every TLS client hello.
const recordTypeHandshake = 0x16

// ErrNotTLS marks a connection whose peer does not speak TLS.
var ErrNotTLS = errors.New("not TLS")

// Sniff reads the first byte of nc and reports whether it opens a TLS
// handshake. The connection returned reads that byte again first, so it
// can be handed to tls.Server, or read as plain text by a server that
// wants to answer a plain client in its own protocol.
func Sniff(nc net.Conn) (net.Conn, bool, error) {
	var b [1]byte
	if _, err := io.ReadFull(nc, b[:]); err != nil {
		return nc, false, err
	}
	return &prefixConn{Conn: nc, prefix: b[:]}, b[0] == recordTypeHandshake, nil
}

type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// Handshake runs the server side of a TLS handshake on nc with
// ServerConfig. A peer that does not open with TLS fails with an error
// wrapping ErrNotTLS; every failure reads "TLS handshake failed: WHY"
// (see DescribeHandshakeError). The caller bounds the time with ctx or
// deadlines on nc, and closes nc on failure.
func (id *Identity) Handshake(ctx context.Context, nc net.Conn) (*tls.Conn, error) {
	nc, isTLS, err := Sniff(nc)
	if err != nil {
		return nil, DescribeHandshakeError(err)
	}
	if !isTLS {
		return nil, DescribeHandshakeError(ErrNotTLS)
	}
	tc := tls.Server(nc, id.ServerConfig())
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, DescribeHandshakeError(err)
	}
	return tc, nil
}

// DescribeHandshakeError turns a server-side handshake error into one
// line that says what went wrong: "TLS handshake failed: no client
// certificate: ...", "...: certificate not signed by this cluster's CA:
// ...", and so on. The error wraps err.
func DescribeHandshakeError(err error) error {
	why := "error"
	var (
		unknown x509.UnknownAuthorityError
		invalid x509.CertificateInvalidError
		oe      *net.OpError
		ne      net.Error
	)
	msg := err.Error()
	switch {
	case errors.Is(err, ErrNotTLS) || strings.Contains(msg, "does not look like a TLS handshake"):
		return fmt.Errorf("TLS handshake failed: not TLS (a plain client, or not mortar's): %w", err)
	case strings.Contains(msg, "didn't provide a certificate"):
		why = "no client certificate"
	case errors.As(err, &unknown):
		why = "certificate not signed by this cluster's CA"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		why = "certificate expired or not yet valid"
	case errors.As(err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
		why = "certificate not made for this use (a client certificate used by a server?)"
	case errors.As(err, &oe) && oe.Op == "remote error":
		why = "the peer refused this side's certificate"
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		why = "timed out"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		why = "the peer closed the connection"
	}
	return fmt.Errorf("TLS handshake failed: %s: %w", why, err)
}

// Listen listens on addr and returns a listener whose Accept returns
// connections (*tls.Conn) that have completed a handshake with
// ServerConfig. Handshakes run concurrently, each bounded by
// HandshakeTimeout; a failed one is logged at once, as a warning, to
// slog.Default(). WrapListener chooses the logger.
func Listen(network, addr string, id *Identity) (net.Listener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	return WrapListener(ln, id, slog.Default()), nil
}

// WrapListener turns ln into a listener like Listen's; refused
// connections are logged to log (nil: not logged).
func WrapListener(ln net.Listener, id *Identity, log *slog.Logger) net.Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &listener{Listener: ln, id: id, log: log, ready: make(chan *tls.Conn), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

type listener struct {
	net.Listener
	id    *Identity
	log   *slog.Logger
	ready chan *tls.Conn
	done  chan struct{}

	mu        sync.Mutex
	err       error // why acceptLoop ended
	closeOnce sync.Once
}

func (l *listener) acceptLoop() {
	backoff := time.Duration(0)
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				l.mu.Lock()
				l.err = err
				l.mu.Unlock()
				l.Close()
				return
			}
			// Out of descriptors, or the like: wait, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.log.Warn("accept failed; retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-l.done:
			}
			continue
		}
		backoff = 0
		go l.handshake(nc)
	}
}

func (l *listener) handshake(nc net.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), HandshakeTimeout)
	defer cancel()
	tc, err := l.id.Handshake(ctx, nc)
	if err != nil {
		l.log.Warn("TLS connection refused", "remote", nc.RemoteAddr().String(), "err", err)
		nc.Close()
		return
	}
	select {
	case l.ready <- tc:
	case <-l.done:
		tc.Close()
	}
}

// Accept returns the next connection whose handshake succeeded.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case tc := <-l.ready:
		return tc, nil
	case <-l.done:
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil && !errors.Is(l.err, net.ErrClosed) {
			return nil, l.err
		}
		return nil, net.ErrClosed
	}
}

func (l *listener) Close() error {
	err := net.ErrClosed
	l.closeOnce.Do(func() {
		close(l.done)
		err = l.Listener.Close()
	})
	return err
}
