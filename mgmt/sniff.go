package mgmt

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/mortarfs/mortar/wire"
)

// sniffTimeout bounds how long a new connection may take to send the bytes
// that tell the brick protocol from HTTP.
const sniffTimeout = 10 * time.Second

// prefixConn is a connection whose first bytes were already read; Read
// returns them again before reading on.
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

// sniff reads the first len(wire.Magic) bytes of c and reports whether
// they are wire.Magic. The returned connection replays them.
func sniff(c net.Conn) (net.Conn, bool, error) {
	buf := make([]byte, len(wire.Magic))
	if err := c.SetReadDeadline(time.Now().Add(sniffTimeout)); err != nil {
		return nil, false, err
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, false, err
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return nil, false, err
	}
	return &prefixConn{Conn: c, prefix: buf}, string(buf) == wire.Magic, nil
}

// connListener is a net.Listener fed with connections accepted elsewhere
// (the HTTP side of the shared port).
type connListener struct {
	addr  net.Addr
	conns chan net.Conn

	once sync.Once
	done chan struct{}
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to Accept; it closes c if the listener is closed.
func (l *connListener) push(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }

// isClosedErr reports whether err says the listener was closed on purpose.
func isClosedErr(err error) bool { return errors.Is(err, net.ErrClosed) }
