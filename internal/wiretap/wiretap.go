// Package wiretap records what a program writes on its connections, for
// tests that check what crosses the network: that a secret, say, is never
// in it. Dial through a Tap (Tap.Dial fits net.Dialer.DialContext's
// place: an http.Transport's DialContext, protocol.Config.Dial), or wrap a
// connection with Wrap; then Sent gives every byte written, in order.
package wiretap

import (
	"bytes"
	"context"
	"encoding/hex"
	"net"
	"sync"
	"testing"
)

// Tap records what is written on the connections it made or wrapped.
type Tap struct {
	mu   sync.Mutex
	sent bytes.Buffer
}

// Dial connects as net.Dialer.DialContext does, on a recorded connection.
func (t *Tap) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return t.Wrap(c), nil
}

// Wrap returns c, recording what is written on it.
func (t *Tap) Wrap(c net.Conn) net.Conn { return &conn{Conn: c, t: t} }

// Sent returns a copy of every byte written so far.
func (t *Tap) Sent() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.sent.Bytes())
}

// MustNotShow fails tb if nothing was written, or if one of secrets, as
// it is or hex-decoded, is in what was.
func (t *Tap) MustNotShow(tb testing.TB, secrets ...string) {
	tb.Helper()
	sent := t.Sent()
	if len(sent) == 0 {
		tb.Fatal("wiretap: nothing was written")
	}
	for _, s := range secrets {
		raw, _ := hex.DecodeString(s)
		if bytes.Contains(sent, []byte(s)) || len(raw) > 0 && bytes.Contains(sent, raw) {
			tb.Fatalf("wiretap: the secret %.8s… is in what crossed the wire (%d bytes): %q", s, len(sent), sent)
		}
	}
}

// conn is a recorded connection.
type conn struct {
	net.Conn
	t *Tap
}

func (c *conn) Write(p []byte) (int, error) {
	c.t.mu.Lock()
	c.t.sent.Write(p)
	c.t.mu.Unlock()
	return c.Conn.Write(p)
}
