package brick

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/locks"
	"github.com/mortarfs/mortar/wire"
)

// gated is a brick layer whose Lookup of /block, and the Write and waiting
// Setlk of the files it opens, block until release is closed (or their
// context ends), counting how many run at once.
type gated struct {
	layer.Base
	release chan struct{}
	running atomic.Int32
	most    atomic.Int32
	waiting atomic.Int32 // Setlk waits under way
	ended   atomic.Int32 // Setlk waits ended by their context
}

func newGated(child layer.Layer) *gated {
	return &gated{Base: layer.Base{Child: child}, release: make(chan struct{})}
}

func (g *gated) block(ctx context.Context) error {
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gated) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	if path == "/block" {
		return layer.Attr{}, g.block(ctx)
	}
	return g.Base.Lookup(ctx, path)
}

func (g *gated) Getxattr(ctx context.Context, path, name string) ([]byte, error) {
	if name == "user.huge" {
		return make([]byte, wire.MaxPayload+1), nil
	}
	return g.Base.Getxattr(ctx, path, name)
}

func (g *gated) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	return gatedFile{g: g}, nil
}

type gatedFile struct {
	layer.File
	g *gated
}

func (f gatedFile) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return len(p), f.g.block(ctx)
}

func (f gatedFile) Setlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool) error {
	if !wait {
		return nil
	}
	f.g.waiting.Add(1)
	defer f.g.waiting.Add(-1)
	<-ctx.Done()
	f.g.ended.Add(1)
	return ctx.Err()
}

func (gatedFile) Getattr(context.Context) (layer.Attr, error) { return layer.Attr{}, nil }
func (gatedFile) Release(context.Context) error               { return nil }

// eventually polls cond for up to 5 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestLimitsDefaults(t *testing.T) {
	d := DefaultLimits()
	if d.MaxFrame != wire.MaxPayload || d.MaxInFlight != MaxInFlight || d.MaxInFlightBytes != DefaultMaxInFlightBytes ||
		d.MaxLockWaits != DefaultMaxLockWaits {
		t.Fatalf("defaults: %+v", d)
	}
	if got := (Limits{}).withDefaults(); got != d {
		t.Fatalf("zero limits give %+v, want the defaults", got)
	}
	got := (Limits{MaxFrame: wire.MaxPayload * 2, MaxInFlight: 3, MaxInFlightBytes: -1}).withDefaults()
	if got.MaxFrame != wire.MaxPayload || got.MaxInFlight != 3 || got.MaxInFlightBytes != DefaultMaxInFlightBytes {
		t.Fatalf("limits not capped or defaulted: %+v", got)
	}
	s := NewServer(nil)
	if s.Limits() != d {
		t.Fatalf("a new server's limits: %+v", s.Limits())
	}
	s.SetLimits(Limits{MaxInFlight: 7})
	if s.Limits().MaxInFlight != 7 || s.Limits().MaxFrame != wire.MaxPayload {
		t.Fatalf("after SetLimits: %+v", s.Limits())
	}
}

// A connection runs at most MaxInFlight requests at once; the others wait
// unread (back-pressure) and run as slots free up. Other connections are
// not held up.
func TestInFlightBound(t *testing.T) {
	store, _ := newStore(t)
	g := newGated(store)
	ts := startServer(t, g, Limits{MaxInFlight: 4})
	c := dial(t, ts.addr)
	const n = 10
	for i := range n {
		c.send(uint64(100+i), &wire.Request{Op: wire.OpLookup, Path: "/block"})
	}
	eventually(t, "4 requests running", func() bool { return g.running.Load() == 4 })
	other := dial(t, ts.addr)
	if errno, _ := other.call(&wire.Request{Op: wire.OpLookup, Path: "/"}); errno != 0 {
		t.Fatalf("another connection is held up: %v", errno)
	}
	time.Sleep(50 * time.Millisecond)
	if g.most.Load() != 4 {
		t.Fatalf("%d requests ran at once, the limit is 4", g.most.Load())
	}
	close(g.release)
	seen := map[uint64]bool{}
	for range n {
		h, _ := c.recv()
		if h.Errno != 0 || seen[h.ID] {
			t.Fatalf("answer %+v", h)
		}
		seen[h.ID] = true
	}
	if g.most.Load() > 4 {
		t.Fatalf("%d requests ran at once, the limit is 4", g.most.Load())
	}
}

// The payload bytes of running requests are bounded too.
func TestInFlightBytesBound(t *testing.T) {
	g := newGated(layer.Base{})
	ts := startServer(t, g, Limits{MaxInFlightBytes: 20000})
	c := dial(t, ts.addr)
	fh := c.open("/f")
	data := make([]byte, 8192)
	for i := range 5 {
		c.send(uint64(10+i), &wire.Request{Op: wire.OpWrite, Fh: fh, Data: data})
	}
	eventually(t, "2 writes running", func() bool { return g.running.Load() == 2 })
	time.Sleep(50 * time.Millisecond)
	if g.most.Load() != 2 {
		t.Fatalf("%d writes of 8 KiB ran at once under a 20000-byte limit", g.most.Load())
	}
	close(g.release)
	for range 5 {
		if h, p := c.recv(); h.Errno != 0 || len(p) != 4 {
			t.Fatalf("write answer %+v %x", h, p)
		}
	}
}

// Blocking lock waits do not take request slots (a connection full of them
// could not carry the unlock), have their own bound, and end when the
// connection closes.
func TestLockWaitsBounded(t *testing.T) {
	g := newGated(layer.Base{})
	ts := startServer(t, g, Limits{MaxInFlight: 1, MaxLockWaits: 2})
	c := dial(t, ts.addr)
	fh := c.open("/f")
	lk := layer.Lock{Type: syscall.F_WRLCK}
	for i := range 2 {
		c.send(uint64(10+i), &wire.Request{Op: wire.OpSetlk, Fh: fh, LockOwner: 1, Lock: lk, Wait: true})
	}
	eventually(t, "2 lock waits", func() bool { return g.waiting.Load() == 2 })
	if errno, _ := c.call(&wire.Request{Op: wire.OpSetlk, Fh: fh, LockOwner: 2, Lock: lk, Wait: true}); errno != syscall.ENOLCK {
		t.Fatalf("a third lock wait: errno %v, want ENOLCK", errno)
	}
	if errno, _ := c.call(&wire.Request{Op: wire.OpSetlk, Fh: fh, LockOwner: 2, Lock: lk}); errno != 0 {
		t.Fatalf("a lock without waiting, under lock waits: %v", errno)
	}
	if errno, _ := c.call(&wire.Request{Op: wire.OpFgetattr, Fh: fh}); errno != 0 {
		t.Fatalf("a request under lock waits: %v", errno)
	}
	ts.log.waitLog(t, "too many lock waits", "limit=2")
	// A cancelled wait frees its place.
	var hb [wire.HeaderSize]byte
	(&wire.Header{Kind: wire.KindCancel, ID: 10}).Put(hb[:])
	c.nc.Write(hb[:])
	if h, _ := c.recv(); h.ID != 10 || syscall.Errno(h.Errno) != syscall.EINTR {
		t.Fatalf("cancelled lock wait answered %+v", h)
	}
	c.send(12, &wire.Request{Op: wire.OpSetlk, Fh: fh, LockOwner: 3, Lock: lk, Wait: true})
	eventually(t, "the freed place taken", func() bool { return g.waiting.Load() == 2 })
	c.nc.Close()
	eventually(t, "lock waits ended by the close", func() bool { return g.ended.Load() == 3 })
}

// Frames over the limit close the connection before their payload is read
// (the client sends none here: a server waiting for it would hang), with a
// log line saying why; frames at the limit are served.
func TestFrameLimit(t *testing.T) {
	store, _ := newStore(t)
	ts := startServer(t, newGated(store), Limits{MaxFrame: 4096})
	keep := dial(t, ts.addr)
	for _, n := range []uint32{4097, wire.MaxPayload, wire.MaxPayload + 1, 1<<32 - 1} {
		c := dial(t, ts.addr)
		var hb [wire.HeaderSize]byte
		(&wire.Header{Len: n, Kind: wire.KindRequest, Op: wire.OpWrite, ID: 1}).Put(hb[:])
		c.nc.Write(hb[:])
		c.waitClosed()
	}
	ts.log.waitLog(t, "closing brick connection", "frame too large", "4096-byte limit")
	ts.log.waitLog(t, "closing brick connection", "frame too large", "4294967295-byte payload")
	// A frame of exactly MaxFrame is served.
	r := &wire.Request{Op: wire.OpSetxattr, Path: "/nothing", Name: "user.x"}
	var e wire.Enc
	r.Encode(&e)
	r.Value = make([]byte, 4096-len(e.B))
	if errno, _ := keep.call(r); errno != syscall.ENOENT {
		t.Fatalf("setxattr in a frame of the largest size: %v", errno)
	}
	// A write whose data takes the frame over the limit is refused.
	fh := keep.open("/f")
	keep.send(2, &wire.Request{Op: wire.OpWrite, Fh: fh, Data: make([]byte, 4096)})
	keep.waitClosed()
}

// An answer too large for a frame fails that request, not the connection.
func TestAnswerTooLarge(t *testing.T) {
	store, _ := newStore(t)
	ts := startServer(t, newGated(store), Limits{})
	c := dial(t, ts.addr)
	if errno, _ := c.call(&wire.Request{Op: wire.OpGetxattr, Path: "/", Name: "user.huge"}); errno != syscall.EOVERFLOW {
		t.Fatalf("huge getxattr: errno %v, want EOVERFLOW", errno)
	}
	if errno, _ := c.call(&wire.Request{Op: wire.OpLookup, Path: "/"}); errno != 0 {
		t.Fatalf("lookup after a huge answer: %v", errno)
	}
	ts.log.waitLog(t, "answer too large for a frame", "op=getxattr")
}

func TestFitHealIndex(t *testing.T) {
	long := strings.Repeat("x", 1000)
	entries := make([]layer.HealEntry, 10)
	for i := range entries {
		entries[i].Path = "/" + long
	}
	per := 16 + 4 + 1001 + 8
	if got := fitHealIndex(entries, 3*per); len(got) != 3 {
		t.Fatalf("%d entries fit, want 3", len(got))
	}
	if got := fitHealIndex(entries, 10); len(got) != 1 {
		t.Fatalf("%d entries when none fits, want 1", len(got))
	}
	if got := fitHealIndex(entries, 100*per); len(got) != 10 {
		t.Fatalf("%d entries, want all 10", len(got))
	}
}

// A client that sends nothing for IdleTimeout is taken for dead: the
// connection is closed and its files and locks released, as if it had
// closed it. A client that pings is kept.
func TestIdleClientClosed(t *testing.T) {
	store, _ := newStore(t)
	f, _, err := store.Create(context.Background(), "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	f.Release(context.Background())
	ts := startServer(t, locks.New(store), Limits{IdleTimeout: 300 * time.Millisecond})
	pinging := dial(t, ts.addr)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		var hb [wire.HeaderSize]byte
		(&wire.Header{Kind: wire.KindPing}).Put(hb[:])
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				pinging.nc.Write(hb[:])
			}
		}
	}()
	silent := dial(t, ts.addr)
	fh := silent.open("/f")
	lk := layer.Lock{Type: syscall.F_WRLCK, Domain: layer.DomainInternal}
	if errno, _ := silent.call(&wire.Request{Op: wire.OpSetlk, Fh: fh, LockOwner: 1, Lock: lk}); errno != 0 {
		t.Fatalf("lock: %v", errno)
	}
	silent.waitClosed()
	ts.log.waitLog(t, "closing brick connection", "sent nothing for 300ms")
	// The silent client's lock went with it: another client takes it,
	// waiting if need be (the release may still be under way).
	other := dial(t, ts.addr)
	ofh := other.open("/f")
	if errno, _ := other.call(&wire.Request{Op: wire.OpSetlk, Fh: ofh, LockOwner: 1, Lock: lk, Wait: true}); errno != 0 {
		t.Fatalf("lock after the silent client was dropped: %v", errno)
	}
	// Pings alone kept the other connection, idle as long.
	close(stop)
	<-stopped
	pinging.send(1, &wire.Request{Op: wire.OpOpen, Path: "/f", Flags: syscall.O_RDWR})
	for {
		h, _, err := pinging.tryRecv(5 * time.Second)
		if err != nil {
			t.Fatalf("the pinging client's connection: %v", err)
		}
		if h.Kind == wire.KindResponse {
			if h.Errno != 0 {
				t.Fatalf("open through the pinging client: %v", syscall.Errno(h.Errno))
			}
			break
		}
	}
}
