package brick

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

const (
	testVolume = "vol-brick-test"
	testBrick  = "brick-1"
)

// logBuf collects a server's log lines, for tests that check what it says.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitLog waits until the log holds all of parts on one line.
func (l *logBuf) waitLog(t *testing.T, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, line := range strings.Split(l.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q in:\n%s", parts, l.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testServer is a brick server on a loopback port serving one layer.
type testServer struct {
	srv  *Server
	addr string
	log  *logBuf
}

func startServer(t *testing.T, l layer.Layer, lim Limits) *testServer {
	t.Helper()
	return startServerWith(t, l, lim, BrickOptions{})
}

func startServerWith(t *testing.T, l layer.Layer, lim Limits, o BrickOptions) *testServer {
	t.Helper()
	ts := &testServer{log: &logBuf{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", ts.log.String())
		}
	})
	ts.srv = NewServer(slog.New(slog.NewTextHandler(ts.log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ts.srv.SetLimits(lim)
	ts.srv.AddWith(testBrick, testVolume, l, o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	go ts.srv.Serve(ln)
	t.Cleanup(func() {
		ln.Close()
		ts.srv.Close()
	})
	return ts
}

// newStore makes a marked posix brick in a fresh temporary directory.
func newStore(t *testing.T) (*posix.Store, string) {
	t.Helper()
	root := t.TempDir()
	if err := posix.Mark(root, testVolume, true); err != nil {
		t.Fatal(err)
	}
	s, err := posix.New(root, posix.Options{VolumeID: testVolume})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, root
}

// rawClient speaks the wire protocol by hand, frame by frame.
type rawClient struct {
	t  *testing.T
	nc net.Conn
}

// dial connects and hands shakes with the test brick.
func dial(t *testing.T, addr string) *rawClient {
	t.Helper()
	return dialVersion(t, addr, wire.Version)
}

// dialVersion is dial as a client of protocol version v.
func dialVersion(t *testing.T, addr string, v uint32) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &rawClient{t: t, nc: nc}
	h, p, err := shakeHandsVersion(nc, v, testVolume, testBrick, "")
	if err != nil || h.Errno != 0 {
		t.Fatalf("handshake refused: %v %s", err, p)
	}
	return c
}

// ShakeHands (for tls_test.go too) speaks the handshake as protocol.Client does: the magic and
// a hello, then, if the brick answers with a challenge, the proof of
// secret. It returns the brick's last answer.
func ShakeHands(nc net.Conn, volumeID, brickID, secret string) (wire.Header, []byte, error) {
	return shakeHandsVersion(nc, wire.Version, volumeID, brickID, secret)
}

func shakeHandsVersion(nc net.Conn, v uint32, volumeID, brickID, secret string) (wire.Header, []byte, error) {
	req := wire.Request{Op: wire.OpHandshake, Version: v, VolumeID: volumeID, BrickID: brickID}
	h, challenge, err := handshakeFrame(nc, wire.Magic, &req)
	if err != nil || h.Errno != 0 {
		return h, challenge, err
	}
	req.Proof = wire.HandshakeProof(secret, volumeID, brickID, challenge)
	return handshakeFrame(nc, "", &req)
}

// handshakeFrame sends prefix and a handshake request, and reads the
// answer.
func handshakeFrame(nc net.Conn, prefix string, req *wire.Request) (wire.Header, []byte, error) {
	var body wire.Enc
	req.Encode(&body)
	var hb [wire.HeaderSize]byte
	(&wire.Header{Kind: wire.KindRequest, Op: wire.OpHandshake, Len: uint32(len(body.B))}).Put(hb[:])
	if _, err := nc.Write(append(append([]byte(prefix), hb[:]...), body.B...)); err != nil {
		return wire.Header{}, nil, err
	}
	h, err := wire.ReadHeader(nc, &hb)
	if err != nil {
		return h, nil, err
	}
	p := make([]byte, h.Len)
	_, err = io.ReadFull(nc, p)
	return h, p, err
}

// send writes one request frame (with r.Data after its fields).
func (c *rawClient) send(id uint64, r *wire.Request) {
	c.t.Helper()
	var e wire.Enc
	r.Encode(&e)
	e.B = append(e.B, r.Data...)
	var hb [wire.HeaderSize]byte
	(&wire.Header{Len: uint32(len(e.B)), Kind: wire.KindRequest, Op: r.Op, ID: id}).Put(hb[:])
	if _, err := c.nc.Write(append(hb[:], e.B...)); err != nil {
		c.t.Fatalf("send %s: %v", wire.OpName(r.Op), err)
	}
}

// recv reads one response frame.
func (c *rawClient) recv() (wire.Header, []byte) {
	c.t.Helper()
	h, p, err := c.tryRecv(5 * time.Second)
	if err != nil {
		c.t.Fatalf("reading a response: %v", err)
	}
	return h, p
}

func (c *rawClient) tryRecv(wait time.Duration) (wire.Header, []byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(wait))
	defer c.nc.SetReadDeadline(time.Time{})
	var hb [wire.HeaderSize]byte
	h, err := wire.ReadHeader(c.nc, &hb)
	if err != nil {
		return h, nil, err
	}
	p := make([]byte, h.Len)
	_, err = io.ReadFull(c.nc, p)
	return h, p, err
}

// call sends r and returns its answer's errno and payload.
func (c *rawClient) call(r *wire.Request) (syscall.Errno, []byte) {
	c.t.Helper()
	c.send(1, r)
	h, p := c.recv()
	if h.Kind != wire.KindResponse || h.ID != 1 || h.Op != r.Op {
		c.t.Fatalf("%s: unexpected answer %+v", wire.OpName(r.Op), h)
	}
	return syscall.Errno(h.Errno), p
}

// open opens path and returns the file handle.
func (c *rawClient) open(path string) uint64 {
	c.t.Helper()
	errno, p := c.call(&wire.Request{Op: wire.OpOpen, Path: path, Flags: syscall.O_RDWR})
	if errno != 0 {
		c.t.Fatalf("open %s: %v", path, errno)
	}
	d := wire.Dec{B: p}
	return d.U64()
}

// waitClosed checks that the server closes the connection, reading and
// dropping whatever it still sends.
func (c *rawClient) waitClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c.nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatal("the server did not close the connection")
	}
}
