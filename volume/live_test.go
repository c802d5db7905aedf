package volume

import (
	"context"
	"errors"
	"fmt"
	"github.com/mortarfs/mortar/volume/options"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/locks"
)

const liveVolumeID = "0f0f0f0f-1111-2222-3333-444444444444"

// testBrick is a posix brick (with locks) served on 127.0.0.1.
type testBrick struct {
	id  string
	st  *posix.Store
	srv *brick.Server
	ln  net.Listener
}

// serve serves the brick on a new port and returns its address.
func (b *testBrick) serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.ln, b.srv = ln, brick.NewServer(nil)
	b.srv.Add(b.id, liveVolumeID, locks.New(b.st))
	go b.srv.Serve(ln)
	return ln.Addr().String()
}

// stop closes the listener and every connection.
func (b *testBrick) stop() {
	b.ln.Close()
	b.srv.Close()
}

// serveBricks serves n bricks and returns a distribute spec over them.
func serveBricks(t *testing.T, n int) (Spec, []*testBrick) {
	t.Helper()
	spec := Spec{Name: "live", ID: liveVolumeID, Type: Distribute, Version: 1, Options: map[string]string{}}
	var bricks []*testBrick
	for i := range n {
		dir := t.TempDir()
		if err := posix.Mark(dir, liveVolumeID, true); err != nil {
			t.Fatal(err)
		}
		st, err := posix.New(dir, posix.Options{VolumeID: liveVolumeID})
		if err != nil {
			t.Fatal(err)
		}
		b := &testBrick{id: "brick-" + strconv.Itoa(i+1), st: st}
		addr := b.serve(t)
		t.Cleanup(func() {
			b.stop()
			st.Close()
		})
		bricks = append(bricks, b)
		spec.Bricks = append(spec.Bricks, Brick{ID: b.id, Host: "127.0.0.1", Path: dir, Addr: addr})
	}
	return spec, bricks
}

// newLive builds spec's graph, waits until it is connected and wraps it
// in a Live; closed receives the version of every graph closed.
func newLive(t *testing.T, spec Spec) (*Live, <-chan uint64) {
	t.Helper()
	opts := BuildOptions{Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))}
	g, err := Build(spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan uint64, 1000)
	l := NewLive(g, WithBuildOptions(opts), WithGraphClosed(func(s Spec) { closed <- s.Version }))
	t.Cleanup(func() { l.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for !l.Connected() { // no connection event to wait for
		if time.Now().After(deadline) {
			t.Fatal("graph not connected to its bricks")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return l, closed
}

// next returns spec with one option changed and the version raised.
func next(spec Spec, i int) Spec {
	spec.Options = map[string]string{"performance.attr-timeout": strconv.Itoa(i % 7)}
	spec.Version++
	return spec
}

func create(t *testing.T, l layer.Layer, path, data string) layer.File {
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

func readAll(ctx context.Context, f layer.File) (string, error) {
	buf := make([]byte, 4096)
	n, err := f.Read(ctx, buf, 0)
	return string(buf[:n]), err
}

// workload writes, reads back and removes files through l, and reads and
// writes the file held open, until stop; it returns its first error and
// reports every round done on rounds (when there is room).
func workload(l layer.Layer, held layer.File, rounds chan<- int, stop <-chan struct{}) error {
	ctx := context.Background()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		p := fmt.Sprintf("/w%d", i%16)
		want := fmt.Sprintf("round %d of %s", i, p)
		f, _, err := l.Create(ctx, p, layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_TRUNC, Mode: 0o644})
		if err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
		_, err = f.Write(ctx, []byte(want), 0)
		f.Release(ctx)
		if err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		if f, err = l.Open(ctx, p, syscall.O_RDONLY); err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		got, err := readAll(ctx, f)
		f.Release(ctx)
		if err != nil || got != want {
			return fmt.Errorf("read %s: %q, %v; want %q", p, got, err, want)
		}
		if a, err := l.Lookup(ctx, p); err != nil || a.Size != uint64(len(want)) {
			return fmt.Errorf("lookup %s: %+v, %v", p, a, err)
		}
		if _, err := layer.ReadDirAll(ctx, l, "/"); err != nil {
			return fmt.Errorf("readdir: %w", err)
		}
		if _, err := held.Write(ctx, []byte(fmt.Sprintf("%08d", i)), 0); err != nil {
			return fmt.Errorf("write held file: %w", err)
		}
		if got, err := readAll(ctx, held); err != nil || got != fmt.Sprintf("%08d", i) {
			return fmt.Errorf("read held file: %q, %v", got, err)
		}
		select {
		case rounds <- i:
		default:
		}
	}
}

// Operations go on through swaps: files open on an old graph keep working
// there with their locks, and the old graph is closed when the last file
// open on it is released.
func TestLiveSwapUnderLoad(t *testing.T) {
	spec, _ := serveBricks(t, 2)
	l, closed := newLive(t, spec)
	ctx := context.Background()
	held := create(t, l, "/held", "00000000")
	if err := held.Setlk(ctx, 7, layer.Lock{Type: syscall.F_WRLCK, Start: 0, End: 9}, false); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	done := make(chan error, 1)
	rounds := make(chan int)
	go func() { done <- workload(l, held, rounds, stop) }()
	for i := range 20 {
		select { // swap while the workload runs
		case <-rounds:
		case err := <-done:
			t.Fatalf("workload before swap %d: %v", i, err)
		}
		spec = next(spec, i)
		if err := l.Swap(spec); err != nil {
			t.Fatalf("swap %d: %v", i, err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("workload across swaps: %v", err)
	}
	if l.Version() != spec.Version {
		t.Fatalf("version %d, want %d", l.Version(), spec.Version)
	}
	// Every graph between the first (held) and the current one is closed.
	if n := l.Graphs(); n != 2 {
		t.Fatalf("%d graphs open, want 2 (the held file's and the current)", n)
	}
	for range 19 {
		if v := <-closed; v == 1 || v == spec.Version {
			t.Fatalf("graph %d closed while in use", v)
		}
	}

	// The lock taken on the first graph still holds, seen from the new one.
	other, err := l.Open(ctx, "/held", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if lk, err := other.Getlk(ctx, 8, layer.Lock{Type: syscall.F_WRLCK, Start: 0, End: 9}); err != nil || lk.Type != syscall.F_WRLCK {
		t.Fatalf("lock of the held file seen from the new graph: %+v, %v", lk, err)
	}
	if err := other.Setlk(ctx, 8, layer.Lock{Type: syscall.F_WRLCK, Start: 0, End: 9}, false); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("conflicting lock on the new graph: %v", err)
	}
	if got, err := readAll(ctx, other); err != nil || len(got) != 8 {
		t.Fatalf("held file from the new graph: %q, %v", got, err)
	}

	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if v := <-closed; v != 1 {
		t.Fatalf("closed graph %d, want the held file's (1)", v)
	}
	if n := l.Graphs(); n != 1 {
		t.Fatalf("%d graphs after the release, want 1", n)
	}
	// The lock went with the file.
	if err := other.Setlk(ctx, 8, layer.Lock{Type: syscall.F_WRLCK, Start: 0, End: 9}, false); err != nil {
		t.Fatalf("lock after the holder's release: %v", err)
	}
	other.Release(ctx)
}

// Many swaps leave one graph and no goroutines behind.
func TestLiveSwapsBounded(t *testing.T) {
	spec, _ := serveBricks(t, 2)
	l, closed := newLive(t, spec)
	ctx := context.Background()
	before := runtime.NumGoroutine()

	var held layer.File
	for i := range 200 {
		switch i {
		case 50:
			held = create(t, l, "/held", "kept")
		case 150:
			if got, err := readAll(ctx, held); err != nil || got != "kept" {
				t.Fatalf("held file after 100 swaps: %q, %v", got, err)
			}
			held.Release(ctx)
		}
		spec = next(spec, i)
		if err := l.Swap(spec); err != nil {
			t.Fatalf("swap %d: %v", i, err)
		}
		if n := l.Graphs(); n > 2 {
			t.Fatalf("swap %d: %d graphs open", i, n)
		}
	}
	if n := l.Graphs(); n != 1 {
		t.Fatalf("%d graphs after the swaps, want 1", n)
	}
	if len(closed) != 200 {
		t.Fatalf("%d graphs closed, want 200", len(closed))
	}
	if _, err := l.Lookup(ctx, "/held"); err != nil {
		t.Fatal(err)
	}
	// The bricks' ends of closed connections go away in their own time:
	// nothing to wait on but the count.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before+5 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before the swaps:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A brick served again on another port is reached through the new spec.
func TestLiveBrickMoved(t *testing.T) {
	spec, bricks := serveBricks(t, 2)
	l, _ := newLive(t, spec)
	ctx := context.Background()
	for i := range 10 {
		create(t, l, fmt.Sprintf("/f%d", i), fmt.Sprintf("data %d", i)).Release(ctx)
	}
	bricks[0].stop()
	spec.Bricks = slices.Clone(spec.Bricks)
	spec.Bricks[0].Addr = bricks[0].serve(t)
	spec.Version++
	if err := l.Swap(spec); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		p := fmt.Sprintf("/f%d", i)
		f, err := l.Open(ctx, p, syscall.O_RDONLY)
		if err != nil {
			t.Fatalf("open %s after the brick moved: %v", p, err)
		}
		got, err := readAll(ctx, f)
		f.Release(ctx)
		if want := fmt.Sprintf("data %d", i); err != nil || got != want {
			t.Fatalf("read %s: %q, %v; want %q", p, got, err, want)
		}
	}
	if !l.Connected() || l.Graphs() != 1 {
		t.Fatalf("after the move: connected %v, %d graphs", l.Connected(), l.Graphs())
	}
}

// Swap refuses another volume's spec and a spec that does not build, and
// everything fails after Close.
func TestLiveSwapRefusals(t *testing.T) {
	spec, _ := serveBricks(t, 1)
	l, _ := newLive(t, spec)
	other := next(spec, 1)
	other.ID = "another"
	if err := l.Swap(other); err == nil {
		t.Fatal("swapped to another volume")
	}
	bad := next(spec, 1)
	bad.Type = "stripe"
	if err := l.Swap(bad); err == nil {
		t.Fatal("swapped to a spec that does not build")
	}
	if l.Version() != 1 || l.Graphs() != 1 {
		t.Fatalf("after refusals: version %d, %d graphs", l.Version(), l.Graphs())
	}
	f := create(t, l, "/f", "x")
	l.Close()
	if l.Graphs() != 0 {
		t.Fatalf("%d graphs after close", l.Graphs())
	}
	f.Release(context.Background()) // on a closed graph: no panic, no reopen
	if _, err := l.Lookup(context.Background(), "/"); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("lookup after close: %v", err)
	}
	if err := l.Swap(next(spec, 2)); !errors.Is(err, ErrLiveClosed) {
		t.Fatalf("swap after close: %v", err)
	}
}

// watchResult is one answer of a scripted watch.
type watchResult struct {
	spec Spec
	err  error
}

// scriptedWatch answers the calls of Follow from results, sending the
// after of each call to calls.
func scriptedWatch(calls chan<- uint64, results <-chan watchResult) func(context.Context, uint64) (Spec, error) {
	return func(ctx context.Context, after uint64) (Spec, error) {
		calls <- after
		select {
		case r := <-results:
			return r.spec, r.err
		case <-ctx.Done():
			return Spec{}, ctx.Err()
		}
	}
}

// Follow swaps to newer specs only, and rides out failed watches and
// specs it cannot use (watching again from the version it runs: a client
// left on an older graph would be fenced off its layout).
func TestLiveFollow(t *testing.T) {
	saved := []time.Duration{followBackoffMin, followMinInterval}
	followBackoffMin, followMinInterval = time.Millisecond, time.Millisecond
	t.Cleanup(func() { followBackoffMin, followMinInterval = saved[0], saved[1] })

	spec, _ := serveBricks(t, 1)
	l, closed := newLive(t, spec)
	calls := make(chan uint64)
	results := make(chan watchResult)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Follow(ctx, scriptedWatch(calls, results)) }()

	expect := func(after uint64, r watchResult) {
		t.Helper()
		if got := <-calls; got != after {
			t.Fatalf("watch after %d, want %d", got, after)
		}
		results <- r
	}
	v2 := next(spec, 1)
	expect(1, watchResult{spec: v2})
	expect(2, watchResult{err: errors.New("node down")})
	expect(2, watchResult{spec: spec}) // older: ignored
	expect(2, watchResult{spec: v2})   // the same: ignored
	bad := next(v2, 2)
	bad.Type = "stripe"
	expect(2, watchResult{spec: bad}) // cannot build: watched again (after a pause)
	v4 := next(bad, 3)
	v4.Type = Distribute
	expect(2, watchResult{spec: v4})
	if got := <-calls; got != 4 {
		t.Fatalf("watch after %d, want 4", got)
	}
	if l.Version() != 4 || l.Graphs() != 1 {
		t.Fatalf("following: version %d, %d graphs", l.Version(), l.Graphs())
	}
	if v1, v2 := <-closed, <-closed; v1 != 1 || v2 != 2 {
		t.Fatalf("closed graphs %d, %d; want 1, 2", v1, v2)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("follow returned %v", err)
	}
}

func TestSpecChanges(t *testing.T) {
	old := Spec{Type: Distribute, Bricks: []Brick{
		{ID: "1", Host: "h", Path: "/a", Addr: "h:1"},
		{ID: "2", Host: "h", Path: "/b", Addr: "h:2"},
	}, Options: map[string]string{"x": "1", "y": "2"}}
	nu := Spec{Type: Distribute, Bricks: []Brick{
		{ID: "1", Host: "h", Path: "/a", Addr: "h:5"},
		{ID: "3", Host: "h", Path: "/c", Addr: "h:3"},
	}, Options: map[string]string{"x": "1", "z": "3"}}
	got := fmt.Sprint(specChanges(old, nu))
	want := "[brick h:/a moved h:1 → h:5 brick added h:/c brick removed h:/b option z=3 option y reset]"
	if got != want {
		t.Fatalf("changes:\n%s\nwant\n%s", got, want)
	}
}

// Writes acknowledged on a file open on an old graph (write-behind's
// window) are sent before the new graph answers a lookup or a read: the
// graphs of a Live share their windows. (Quick-read is off: its entries
// are per graph, and its own bound, the timeout, would apply.)
func TestLiveWritesBehindAcrossSwaps(t *testing.T) {
	spec, _ := serveBricks(t, 1)
	spec.Options[options.OptQuickRead] = "off"
	l, _ := newLive(t, spec)
	ctx := context.Background()
	w := create(t, l, "/f", "first")
	defer w.Release(ctx)
	spec = next(spec, 0)
	spec.Options[options.OptQuickRead] = "off"
	if err := l.Swap(spec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(ctx, []byte(" second"), 5); err != nil { // into the old graph's window
		t.Fatal(err)
	}
	if a, err := l.Lookup(ctx, "/f"); err != nil || a.Size != 12 {
		t.Fatalf("lookup on the new graph: size %d, %v; want 12", a.Size, err)
	}
	r, err := l.Open(ctx, "/f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	if _, err := w.Write(ctx, []byte("!"), 12); err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(ctx, r); err != nil || got != "first second!" {
		t.Fatalf("read on the new graph: %q, %v", got, err)
	}
}
