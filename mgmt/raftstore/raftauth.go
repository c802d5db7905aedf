package raftstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/mortarfs/mortar/internal/proof"
)

// A Raft connection between nodes without TLS opens with a challenge: the
// listener sends raftMagic and raftNonce random bytes, the dialer answers
// with proof.MAC(cluster secret, raftLabel, those bytes) or the listener
// closes the connection unanswered. The secret never crosses the network,
// and an answer is good for its one challenge only. Then Raft's own
// traffic follows, in clear.
const (
	raftMagic = "mortar-raft2"
	raftNonce = 32
	raftLabel = "mortar-raft"
	// handshakeWait bounds how long a new Raft connection may take to
	// answer the challenge.
	handshakeWait = 10 * time.Second
)

// answer reads the listener's challenge from c, before deadline, and
// answers it with secret (the dialer's side).
func answer(c net.Conn, secret string, deadline time.Time) error {
	c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	challenge := make([]byte, len(raftMagic)+raftNonce)
	if _, err := io.ReadFull(c, challenge); err != nil {
		return fmt.Errorf("raft: reading the challenge: %w", err)
	}
	if string(challenge[:len(raftMagic)]) != raftMagic {
		return fmt.Errorf("raft: %s does not speak mortar's Raft without TLS (it sent %q)", c.RemoteAddr(), challenge[:len(raftMagic)])
	}
	_, err := c.Write(proof.MAC(secret, raftLabel, string(challenge[len(raftMagic):])))
	return err
}

// secretListener accepts Raft connections that answer a challenge with
// the cluster secret: the challenge runs at the connection's first read,
// so that a slow caller does not hold up Accept.
type secretListener struct {
	net.Listener
	secret func() string
	log    *slog.Logger
}

func (l secretListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &secretConn{Conn: c, l: l}, nil
}

// secretConn is a Raft connection whose challenge is answered before
// anything else is read from it.
type secretConn struct {
	net.Conn
	l    secretListener
	once sync.Once
	err  error
}

func (c *secretConn) Read(p []byte) (int, error) {
	c.once.Do(c.check)
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(p)
}

// check challenges the dialer and closes the connection if its answer is
// wrong.
func (c *secretConn) check() {
	err := c.challenge()
	if err != nil {
		c.l.log.Warn("raft connection refused", "remote", c.RemoteAddr().String(), "err", err)
		c.err = fmt.Errorf("raft connection from %s refused: %w", c.RemoteAddr(), err)
		c.Conn.Close()
	}
}

// challenge sends a challenge and checks the answer, within handshakeWait.
func (c *secretConn) challenge() error {
	c.Conn.SetDeadline(time.Now().Add(handshakeWait))
	defer c.Conn.SetDeadline(time.Time{})
	nonce := proof.Nonce(raftNonce)
	if _, err := c.Conn.Write(append([]byte(raftMagic), nonce...)); err != nil {
		return err
	}
	answer := make([]byte, proof.Size)
	if _, err := io.ReadFull(c.Conn, answer); err != nil {
		return err
	}
	if !proof.Valid(answer, c.l.secret(), raftLabel, string(nonce)) {
		return errors.New("it did not prove this cluster's secret")
	}
	return nil
}
