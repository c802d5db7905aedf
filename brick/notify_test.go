package brick

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/wire"
)

// watchClient connects a real client that watches the test brick; the
// changes it is told arrive on the returned channel.
func watchClient(t *testing.T, addr string) (*protocol.Client, <-chan layer.Change) {
	t.Helper()
	ch := make(chan layer.Change, 1024)
	c := protocol.New(protocol.Config{Addr: addr, BrickID: testBrick, VolumeID: testVolume,
		ConnectWait: 10 * time.Second, OnChange: func(c layer.Change) { ch <- c }})
	t.Cleanup(func() { c.Close() })
	return c, ch
}

// await reads changes from ch until want has been seen in order (other
// changes between them are fine: a brick may tell a change twice).
func await(t *testing.T, ch <-chan layer.Change, want ...layer.Change) {
	t.Helper()
	var got []layer.Change
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case c := <-ch:
			got = append(got, c)
			if c == want[0] {
				want = want[1:]
			}
		case <-deadline:
			t.Fatalf("still waiting for %v; told %v", want, got)
		}
	}
}

func entry(p string) layer.Change { return layer.Change{Path: p, Entry: true} }
func inode(p string) layer.Change { return layer.Change{Path: p} }

// A watching client is told, in order, every change other clients make
// (a change still queued is not queued twice):
// names made, renamed, linked and removed, and inodes written, truncated
// and chmodded; the client that made them is not told its own.
func TestWatcherToldOthersChanges(t *testing.T) {
	s, _ := newStore(t)
	ts := startServer(t, s, DefaultLimits())
	ctx := context.Background()
	watcher, told := watchClient(t, ts.addr)
	maker, makerTold := watchClient(t, ts.addr)
	other := entryClient(t, ts.addr)
	if _, err := watcher.Lookup(ctx, "/"); err != nil { // connected, watching
		t.Fatal(err)
	}
	if _, err := maker.Mkdir(ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	f, _, err := maker.Create(ctx, "/d/f", layer.CreateIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o644, Flags: syscall.O_RDWR | syscall.O_EXCL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(ctx, []byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	steps := []func() error{
		func() error {
			_, err := maker.Setattr(ctx, "/d/f", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o600})
			return err
		},
		func() error { return maker.Rename(ctx, "/d/f", "/d/g", 0) },
		func() error { _, err := maker.Link(ctx, "/d/g", "/d/h"); return err },
		func() error { return maker.Unlink(ctx, "/d/h") },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	// A change still queued when the same one comes again is told once:
	// expect each change's first telling, in order.
	await(t, told, entry("/d"), entry("/d/f"), inode("/d/f"), entry("/d/g"), inode("/d/g"), entry("/d/h"))

	// A change by a third client reaches the maker too, and is the first
	// thing it is told: none of its own came before.
	if err := <-mkfile(ctx, other, "/sentinel"); err != nil {
		t.Fatal(err)
	}
	await(t, told, entry("/sentinel"))
	select {
	case c := <-makerTold:
		if c != entry("/sentinel") {
			t.Fatalf("the maker was told %v before the sentinel: its own change", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the maker was not told of the sentinel")
	}
}

// A client that reconnects is told that anything may have changed: it
// missed the notices of the time it was away.
func TestWatcherToldAllAfterReconnect(t *testing.T) {
	s, _ := newStore(t)
	ts := startServer(t, s, DefaultLimits())
	ctx := context.Background()
	watcher, told := watchClient(t, ts.addr)
	if _, err := watcher.Lookup(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	ts.srv.Remove(testBrick) // closes the connection
	ts.srv.Add(testBrick, testVolume, s)
	await(t, told, layer.ChangedAll)
	if _, err := watcher.Lookup(ctx, "/"); err != nil {
		t.Fatal(err)
	}
}

// A watcher whose queue overflows is told that anything may have changed
// instead of every change.
func TestOutboxOverflowBecomesAll(t *testing.T) {
	o := &outbox{seen: map[layer.Change]struct{}{}, wake: make(chan struct{}, 1)}
	for i := range maxQueued + 10 {
		o.put([]layer.Change{inode("/f" + string(rune('a'+i%26)) + string(rune(i)))})
	}
	got := o.take()
	if !slices.Equal(got, []layer.Change{layer.ChangedAll}) {
		t.Fatalf("after an overflow: told %d changes, first %v; want only ChangedAll", len(got), got[0])
	}
}

// A request for no answer (a release nothing waits on) runs and gets no
// answer: every answer on the connection is a later request's.
func TestNoReplyRequest(t *testing.T) {
	s, dir := newStore(t)
	ts := startServer(t, s, DefaultLimits())
	c := dial(t, ts.addr)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fh := c.open("/f")
	var e wire.Enc
	(&wire.Request{Op: wire.OpRelease, Fh: fh}).Encode(&e)
	var hb [wire.HeaderSize]byte
	(&wire.Header{Len: uint32(len(e.B)), Kind: wire.KindRequest, Op: wire.OpRelease, ID: 7, Flags: wire.FlagNoReply}).Put(hb[:])
	if _, err := c.nc.Write(append(hb[:], e.B...)); err != nil {
		t.Fatal(err)
	}
	// The release runs beside what follows: ask until it has.
	deadline := time.Now().Add(5 * time.Second)
	for id := uint64(8); ; id++ {
		c.send(id, &wire.Request{Op: wire.OpFgetattr, Fh: fh})
		h, _ := c.recv()
		if h.ID != id {
			t.Fatalf("answer %+v to request %d: the release was answered", h, id)
		}
		if syscall.Errno(h.Errno) == syscall.EBADF {
			return // released
		}
		if time.Now().After(deadline) {
			t.Fatal("the file was not released")
		}
	}
}

// The answer to a watch is the first frame a watcher gets, however busy
// the brick is with others' changes: its client reads only that answer
// before it serves the connection.
func TestWatchAnsweredBeforeNotices(t *testing.T) {
	s, _ := newStore(t)
	ts := startServer(t, s, DefaultLimits())
	ctx := context.Background()
	maker := entryClient(t, ts.addr)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			<-mkfile(ctx, maker, fmt.Sprintf("/busy%d", i))
		}
	}()
	defer func() { close(stop); <-done }()
	for range 50 {
		c := dial(t, ts.addr)
		c.send(1, &wire.Request{Op: wire.OpWatch, Flags: wire.WatchOn})
		if h, _ := c.recv(); h.Kind != wire.KindResponse || h.ID != 1 || h.Errno != 0 {
			t.Fatalf("first frame after a watch: %+v, want its answer", h)
		}
		if h, _ := c.recv(); h.Kind != wire.KindNotify {
			t.Fatalf("after the answer: %+v, want notices of the busy client's creates", h)
		}
		c.nc.Close()
	}
}
