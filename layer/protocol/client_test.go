package protocol

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

const testVolume = "11111111-2222-3333-4444-555555555555"

// testBrick is a real brick server on 127.0.0.1 serving a posix store.
type testBrick struct {
	t     *testing.T
	root  string
	store *posix.Store
	srv   *brick.Server
	l     net.Listener
	addr  string
}

func newTestBrick(t *testing.T) *testBrick {
	t.Helper()
	b := &testBrick{t: t, root: t.TempDir()}
	if err := posix.Mark(b.root, testVolume, true); err != nil {
		t.Fatal(err)
	}
	store, err := posix.New(b.root, posix.Options{VolumeID: testVolume})
	if err != nil {
		t.Fatal(err)
	}
	b.store = store
	t.Cleanup(func() { store.Close() })
	b.start("127.0.0.1:0")
	t.Cleanup(b.stop)
	return b
}

func (b *testBrick) start(addr string) {
	b.t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		b.t.Fatal(err)
	}
	b.l, b.addr = l, l.Addr().String()
	b.srv = brick.NewServer(nil)
	b.srv.Add("brick-1", testVolume, b.store)
	go b.srv.Serve(l)
}

func (b *testBrick) stop() {
	b.l.Close()
	b.srv.Close()
}

func (b *testBrick) client(t *testing.T, cfg Config) *Client {
	cfg.Addr, cfg.BrickID = b.addr, "brick-1"
	if cfg.VolumeID == "" {
		cfg.VolumeID = testVolume
	}
	c := New(cfg)
	t.Cleanup(func() { c.Close() })
	return c
}

func writeFile(t *testing.T, l layer.Layer, path, data string) layer.File {
	t.Helper()
	ctx := context.Background()
	f, _, err := l.Create(ctx, path, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	if _, err := f.Write(ctx, []byte(data), 0); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return f
}

func TestDeadBrickFailsFastAndRecovers(t *testing.T) {
	b := newTestBrick(t)
	c := b.client(t, Config{PingInterval: 100 * time.Millisecond, PingTimeout: time.Second, ConnectWait: 500 * time.Millisecond})
	ctx := context.Background()
	f := writeFile(t, c, "/f", "hello")
	defer f.Release(ctx)

	b.stop()
	start := time.Now()
	if _, err := c.Lookup(ctx, "/f"); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("lookup on a dead brick: %v, want ENOTCONN", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("dead brick noticed after %s", d)
	}

	b.start(b.addr) // same address, new server process state
	deadline := time.Now().Add(10 * time.Second)
	for !c.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("client did not reconnect")
		}
		time.Sleep(20 * time.Millisecond) // polling a state with no event to wait on
	}
	buf := make([]byte, 5)
	if n, err := f.Read(ctx, buf, 0); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read through a reopened file: %q, %v", buf[:n], err)
	}
}

// A brick that stops answering without closing the connection (a hung
// machine, a cut cable) is detected by pings.
func TestHungBrickDetectedByPing(t *testing.T) {
	b := newTestBrick(t)
	p := newFreezeProxy(t, b.addr)
	c := New(Config{Addr: p.addr(), BrickID: "brick-1", VolumeID: testVolume,
		PingInterval: 100 * time.Millisecond, PingTimeout: 700 * time.Millisecond, ConnectWait: 300 * time.Millisecond})
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Lookup(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	p.freeze()
	start := time.Now()
	_, err := c.Lookup(ctx, "/")
	if !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("lookup on a hung brick: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("hung brick noticed after %s", d)
	}
}

func TestWrongVolumeRefused(t *testing.T) {
	b := newTestBrick(t)
	c := b.client(t, Config{VolumeID: "other-volume", ConnectWait: 300 * time.Millisecond})
	if _, err := c.Lookup(context.Background(), "/"); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("lookup through a refused handshake: %v", err)
	}
}

// Malformed frames close that connection only; the server goes on.
func TestMalformedFramesCloseConnection(t *testing.T) {
	b := newTestBrick(t)
	good := b.client(t, Config{})
	ctx := context.Background()
	bad := [][]byte{
		[]byte("GET / HTTP/1.0\r\n\r\n"),
		append([]byte(wire.Magic), make([]byte, wire.HeaderSize)...), // kind 0
		append([]byte(wire.Magic), oversized()...),
		append(handshake(), oversized()...),                                                          // after a good handshake
		append(handshake(), 0, 0, 0, 0, 1, 99, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), // unknown op
	}
	for i, frame := range bad {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(frame)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(nc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("frame %d: connection not closed by the server: %v", i, err)
		}
		nc.Close()
		if _, err := good.Lookup(ctx, "/"); err != nil {
			t.Fatalf("after bad frame %d the server stopped serving: %v", i, err)
		}
	}
}

// Escapes are refused at the server before reaching storage.
func TestPathEscapesRefused(t *testing.T) {
	b := newTestBrick(t)
	c := b.client(t, Config{})
	ctx := context.Background()
	for _, p := range []string{"/../etc/passwd", "/a/../../etc", "../x", "/a\x00b", "etc/passwd", "/a//b"} {
		if _, err := c.Lookup(ctx, p); err == nil {
			t.Errorf("lookup %q succeeded", p)
		}
		if _, _, err := c.Create(ctx, p, layer.CreateIn{Mode: 0o644}); err == nil {
			t.Errorf("create %q succeeded", p)
		}
	}
	if err := c.Rename(ctx, "/", "/../x", 0); err == nil {
		t.Error("rename to an escaping path succeeded")
	}
}

// blocker is a brick layer whose Lookup blocks until its context ends, so a
// client's cancellation must travel to the brick.
type blocker struct {
	layer.Base
	cancelled chan struct{}
}

func (b *blocker) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	<-ctx.Done()
	close(b.cancelled)
	return layer.Attr{}, syscall.EINTR
}

func TestCancelReachesBrick(t *testing.T) {
	srv := brick.NewServer(nil)
	bl := &blocker{cancelled: make(chan struct{})}
	srv.Add("b", "v", bl)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer func() { l.Close(); srv.Close() }()
	c := New(Config{Addr: l.Addr().String(), BrickID: "b", VolumeID: "v"})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.Lookup(ctx, "/x"); !errors.Is(err, syscall.EINTR) {
		t.Fatalf("cancelled lookup: %v, want EINTR", err)
	}
	select {
	case <-bl.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the brick never saw the cancellation")
	}
}

// Many operations in flight on one connection complete independently.
func TestPipelinedOperations(t *testing.T) {
	b := newTestBrick(t)
	c := b.client(t, Config{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "/f" + string(rune('A'+i%26)) + string(rune('a'+i/26))
			f, _, err := c.Create(ctx, name, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o600})
			if err != nil {
				errs <- err
				return
			}
			defer f.Release(ctx)
			data := make([]byte, 300<<10)
			for j := range data {
				data[j] = byte(i + j)
			}
			if _, err := f.Write(ctx, data, 0); err != nil {
				errs <- err
				return
			}
			got := make([]byte, len(data))
			if n, err := f.Read(ctx, got, 0); err != nil || n != len(data) || string(got) != string(data) {
				errs <- errors.New("read back differs from write in " + name)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func oversized() []byte {
	var b [wire.HeaderSize]byte
	(&wire.Header{Len: wire.MaxPayload + 1, Kind: wire.KindRequest, Op: wire.OpLookup}).Put(b[:])
	return b[:]
}

func handshake() []byte {
	var e wire.Enc
	(&wire.Request{Op: wire.OpHandshake, Version: wire.Version, VolumeID: testVolume, BrickID: "brick-1"}).Encode(&e)
	var b [wire.HeaderSize]byte
	(&wire.Header{Len: uint32(len(e.B)), Kind: wire.KindRequest, Op: wire.OpHandshake}).Put(b[:])
	return append(append([]byte(wire.Magic), b[:]...), e.B...)
}

func posixMark(dir string) error { return posix.Mark(dir, testVolume, true) }

func posixNew(dir string) (*posix.Store, error) {
	return posix.New(dir, posix.Options{VolumeID: testVolume})
}

// attemptCounter is a slog handler that records the highest "attempt" a
// client logged while it could not reach its brick.
type attemptCounter struct {
	mu  sync.Mutex
	max int64
}

func (a *attemptCounter) Enabled(context.Context, slog.Level) bool { return true }
func (a *attemptCounter) WithAttrs([]slog.Attr) slog.Handler       { return a }
func (a *attemptCounter) WithGroup(string) slog.Handler            { return a }
func (a *attemptCounter) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(at slog.Attr) bool {
		if at.Key == "attempt" {
			a.mu.Lock()
			a.max = max(a.max, at.Value.Int64())
			a.mu.Unlock()
		}
		return true
	})
	return nil
}

func (a *attemptCounter) attempts() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.max
}

// A client whose brick has been down long enough for its backoff to grow
// (1.6 s after the fifth failed dial) reconnects at once on Redial once
// the brick is back, not at the end of the backoff.
func TestRedialCutsBackoff(t *testing.T) {
	c := downLongEnough(t)
	start := time.Now()
	c.Redial()
	waitFor(t, 5*time.Second, "reconnection", c.Connected)
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Fatalf("reconnected %s after Redial; the backoff was 1.6 s", d)
	}
	c.Redial() // connected: ignored
	if !c.Connected() {
		t.Fatal("Redial dropped a live connection")
	}
}

// downLongEnough returns the client of a brick that was down
// for five failed dials (the client's backoff is then 1.6 s) and is back.
func downLongEnough(t *testing.T) *Client {
	b := newTestBrick(t)
	count := &attemptCounter{}
	c := b.client(t, Config{Logger: slog.New(count)})
	waitFor(t, 5*time.Second, "first connection", c.Connected)
	b.stop()
	waitFor(t, 10*time.Second, "five failed dials", func() bool { return count.attempts() >= 5 })
	b.start(b.addr)
	return c
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond) // polling a state with no event to wait on
	}
}

// A client in use (its Up asked before every operation, as replicate
// does) reconnects to a restarted brick within demandFloor or so, not at
// the end of a backoff grown while the brick was down.
func TestUpDialsOnDemand(t *testing.T) {
	c := downLongEnough(t)
	start := time.Now()
	waitFor(t, 5*time.Second, "reconnection", c.Up)
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Fatalf("reconnected %s after the brick came back although in use; the backoff was 1.6 s", d)
	}
}

// LookupData brings a small file's content with its attributes, and only
// the attributes of a larger one or of a directory.
func TestLookupData(t *testing.T) {
	b := newTestBrick(t)
	c := b.client(t, Config{})
	ctx := context.Background()
	writeFile(t, c, "/small", "small").Release(ctx)
	writeFile(t, c, "/empty", "").Release(ctx)
	for _, tc := range []struct {
		path, want string
		given      bool
		max        int
	}{{"/small", "small", true, 5}, {"/small", "", false, 4}, {"/empty", "", true, 64 << 10}, {"/", "", false, 64 << 10}} {
		a, data, err := c.LookupData(ctx, tc.path, tc.max)
		want, _ := c.Lookup(ctx, tc.path)
		if err != nil || a.Gfid != want.Gfid || (data != nil) != tc.given || string(data) != tc.want {
			t.Errorf("%s max %d: %+v, %q (given %v), %v; want %q (given %v)", tc.path, tc.max, a, data, data != nil, err, tc.want, tc.given)
		}
	}
	if _, _, err := c.LookupData(ctx, "/missing", 1024); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing: %v, want ENOENT", err)
	}
}

// A listing brings symlinks' targets (wire.ReaddirTargets); other
// entries have none.
func TestReaddirTargets(t *testing.T) {
	b := newTestBrick(t)
	c := b.client(t, Config{})
	ctx := context.Background()
	writeFile(t, c, "/f", "f").Release(ctx)
	if _, err := c.Symlink(ctx, "/l", layer.SymlinkIn{Target: "../some/where", Owner: layer.Owner{Gfid: layer.NewGfid()}}); err != nil {
		t.Fatal(err)
	}
	entries, err := layer.ReadDirAll(ctx, c, "/")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		got[e.Name] = e.Target
	}
	if len(got) != 2 || got["l"] != "../some/where" || got["f"] != "" {
		t.Fatalf("listing's targets: %q", got)
	}
}

// A client that closes cleanly says goodbye, and its replicated brick
// marks nothing; one whose connection is cut leaves the directories it
// changed marked Dirty for the healer (brick/abandoned.go).
func TestGoodbye(t *testing.T) {
	ctx := context.Background()
	for _, cut := range []bool{false, true} {
		root := t.TempDir()
		if err := posix.Mark(root, testVolume, true); err != nil {
			t.Fatal(err)
		}
		store, err := posix.New(root, posix.Options{VolumeID: testVolume})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		if _, err := store.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := brick.NewServer(nil)
		srv.AddWith("brick-1", testVolume, store, brick.BrickOptions{MarkAbandoned: true})
		go srv.Serve(l)
		var mu sync.Mutex
		var conns []net.Conn
		c := New(Config{Addr: l.Addr().String(), BrickID: "brick-1", VolumeID: testVolume,
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				mu.Lock()
				conns = append(conns, nc)
				mu.Unlock()
				return nc, err
			}})
		writeFile(t, c, "/d/f", "x").Release(ctx)
		if cut {
			mu.Lock()
			for _, nc := range conns {
				nc.Close()
			}
			mu.Unlock()
		}
		c.Close()
		l.Close()
		srv.Close() // waits for the brick to be done with the connection
		a, err := store.Lookup(ctx, "/d")
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Pending&layer.Dirty != 0; got != cut {
			t.Errorf("connection cut %v: /d pending %#x, want Dirty %v", cut, a.Pending, cut)
		}
	}
}
