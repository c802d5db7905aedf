package brick

import (
	"bytes"
	"encoding/hex"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/internal/wiretap"
	"github.com/mortarfs/mortar/tlsconf"
	"github.com/mortarfs/mortar/wire"
)

// hello sends the first handshake on a new connection to ts and returns
// the connection and the brick's challenge.
func hello(t *testing.T, ts *testServer) (*rawClient, *wire.Request, []byte) {
	t.Helper()
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	req := &wire.Request{Op: wire.OpHandshake, Version: wire.Version, VolumeID: testVolume, BrickID: testBrick}
	h, challenge, err := handshakeFrame(nc, wire.Magic, req)
	if err != nil || h.Errno != 0 || len(challenge) != wire.ChallengeSize {
		t.Fatalf("hello: %v errno %d, challenge %q", err, h.Errno, challenge)
	}
	return &rawClient{t: t, nc: nc}, req, challenge
}

// prove sends the second handshake with proof p and returns the brick's
// errno and message.
func (c *rawClient) prove(req *wire.Request, p []byte) (syscall.Errno, string) {
	c.t.Helper()
	req.Proof = p
	h, msg, err := handshakeFrame(c.nc, "", req)
	if err != nil {
		c.t.Fatalf("proof: %v", err)
	}
	return syscall.Errno(h.Errno), string(msg)
}

// TestHandshakeProvesSecret: a brick admits a client that proves the
// volume's secret without sending it, refuses a wrong secret and a proof
// recorded on another connection, and Recheck closes the connections
// whose proof no longer holds once the secret changes.
func TestHandshakeProvesSecret(t *testing.T) {
	st, _ := newStore(t)
	ts := startServer(t, st, Limits{})
	secret := hex.EncodeToString(bytes.Repeat([]byte{0xa7}, 32))
	ts.srv.SetAuth(testVolume, tlsconf.AuthRules{Secret: secret})

	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	tap := &wiretap.Tap{}
	t.Cleanup(func() { nc.Close() })
	if h, msg, err := ShakeHands(tap.Wrap(nc), testVolume, testBrick, secret); err != nil || h.Errno != 0 {
		t.Fatalf("the volume's secret refused: %v %d %s", err, h.Errno, msg)
	}
	tap.MustNotShow(t, secret)
	good := &rawClient{t: t, nc: nc}
	if errno, _ := good.call(&wire.Request{Op: wire.OpLookup, Path: "/"}); errno != 0 {
		t.Fatalf("lookup on the admitted connection: %v", errno)
	}

	c, req, challenge := hello(t, ts)
	recorded := wire.HandshakeProof(secret, testVolume, testBrick, challenge)
	if errno, msg := c.prove(req, wire.HandshakeProof(strings.Repeat("0", 64), testVolume, testBrick, challenge)); errno != syscall.EACCES || !strings.Contains(msg, "did not prove") {
		t.Fatalf("a wrong secret: %v %q, want EACCES", errno, msg)
	}
	c, req, _ = hello(t, ts)
	if errno, msg := c.prove(req, recorded); errno != syscall.EACCES {
		t.Fatalf("a proof recorded for another challenge: %v %q, want EACCES", errno, msg)
	}
	ts.log.waitLog(t, "brick connection refused", "did not prove")

	ts.srv.Recheck()
	if errno, _ := good.call(&wire.Request{Op: wire.OpLookup, Path: "/"}); errno != 0 {
		t.Fatalf("lookup after a Recheck with the same secret: %v", errno)
	}
	ts.srv.SetAuth(testVolume, tlsconf.AuthRules{Secret: strings.Repeat("1", 64)})
	ts.srv.Recheck()
	good.waitClosed()
}
