package writebehind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
	"github.com/mortarfs/mortar/layer/locks"
)

const testVolume = "vol-writebehind-test"

var bg = context.Background()

func newStore(t *testing.T) *posix.Store { return testbrick.NewStore(t, testVolume) }

// rig is the layer over a store, through a fault injector and a counter.
type rig struct {
	t     *testing.T
	fault *layertest.Fault
	count *layertest.Counting
	l     *Layer
}

func newRig(t *testing.T, window int) *rig {
	r := &rig{t: t, fault: layertest.NewFault(newStore(t))}
	r.count = layertest.NewCounting(r.fault)
	r.l = New(r.count, Options{WindowSize: window})
	return r
}

func (r *rig) create(path string, flags uint32) layer.File {
	r.t.Helper()
	f, _, err := r.l.Create(bg, path, layer.CreateIn{Mode: 0o644, Flags: flags | syscall.O_CREAT, Owner: layer.Owner{Gfid: layer.NewGfid()}})
	if err != nil {
		r.t.Fatal(err)
	}
	return f
}

func (r *rig) write(f layer.File, p []byte, off int64) {
	r.t.Helper()
	if n, err := f.Write(bg, p, off); err != nil || n != len(p) {
		r.t.Fatalf("write of %d bytes at %d: %d, %v", len(p), off, n, err)
	}
}

func (r *rig) content(path string) []byte {
	r.t.Helper()
	f, err := r.count.Open(bg, path, syscall.O_RDONLY) // under the layer: what the bricks have
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Release(bg)
	buf := make([]byte, 1<<20)
	n, err := f.Read(bg, buf, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	return buf[:n]
}

// Small sequential writes are acknowledged without reaching the child and
// go in one write when the file is closed.
func TestSequentialWritesAggregated(t *testing.T) {
	r := newRig(t, 64<<10)
	f := r.create("/f", syscall.O_WRONLY)
	chunk := bytes.Repeat([]byte("x"), 4096)
	for i := range 8 {
		r.write(f, chunk, int64(i*4096))
	}
	if n := r.count.Count("Write"); n != 0 {
		t.Fatalf("%d writes reached the child before the close, want 0", n)
	}
	if err := f.Flush(bg, 1); err != nil {
		t.Fatal(err)
	}
	if n := r.count.Count("Write"); n != 1 {
		t.Fatalf("%d writes reached the child for 8 sequential ones, want 1", n)
	}
	f.Release(bg)
	if got := r.content("/f"); !bytes.Equal(got, bytes.Repeat(chunk, 8)) {
		t.Fatalf("the child has %d bytes, want 32768 x", len(got))
	}
}

// A full window goes; a write that does not continue the window sends it
// first; a write as big as the window goes through.
func TestWindowBounds(t *testing.T) {
	r := newRig(t, 8192)
	f := r.create("/f", syscall.O_RDWR)
	defer f.Release(bg)
	r.write(f, make([]byte, 4096), 0)
	r.write(f, make([]byte, 4096), 4096)
	r.write(f, make([]byte, 10), 8192) // would pass the window: it goes
	if n := r.count.Count("Write"); n != 1 {
		t.Fatalf("after filling the window: %d child writes, want 1", n)
	}
	r.write(f, []byte("B"), 0) // not where the window ends
	if n := r.count.Count("Write"); n != 2 {
		t.Fatalf("after a write elsewhere: %d child writes, want 2", n)
	}
	r.write(f, make([]byte, 8192), 100) // as big as the window
	if n := r.count.Count("Write"); n != 4 {
		t.Fatalf("after a window-sized write: %d child writes, want 4", n)
	}
}

// What a program wrote is what it reads, stats and lists, through the
// same file, another one, or a name.
func TestWritesSeenEverywhere(t *testing.T) {
	r := newRig(t, 1<<20)
	w := r.create("/f", syscall.O_WRONLY)
	defer w.Release(bg)
	r.write(w, []byte("hello"), 0)
	if a, err := r.l.Lookup(bg, "/f"); err != nil || a.Size != 5 {
		t.Fatalf("lookup after a write: size %d, %v", a.Size, err)
	}
	r.write(w, []byte(" world"), 5)
	rd, err := r.l.Open(bg, "/f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release(bg)
	r.write(w, []byte("!"), 11)
	buf := make([]byte, 64)
	n, err := rd.Read(bg, buf, 0)
	if err != nil || string(buf[:n]) != "hello world!" {
		t.Fatalf("read through another file: %q, %v", buf[:n], err)
	}
	r.write(w, []byte("?"), 12)
	if a, err := w.Getattr(bg); err != nil || a.Size != 13 {
		t.Fatalf("getattr of the writing file: size %d, %v", a.Size, err)
	}
}

// Of two files of one inode, the later write wins (20 files: the order
// in which windows are sent at a close is otherwise a coin toss).
func TestLaterWriteWinsAcrossFiles(t *testing.T) {
	r := newRig(t, 1<<20)
	for i := range 20 {
		path := fmt.Sprintf("/f%d", i)
		a := r.create(path, syscall.O_WRONLY)
		b, err := r.l.Open(bg, path, syscall.O_WRONLY)
		if err != nil {
			t.Fatal(err)
		}
		r.write(a, []byte("aaaa"), 0)
		r.write(b, []byte("bb"), 0)
		a.Flush(bg, 1)
		b.Flush(bg, 1)
		a.Release(bg)
		b.Release(bg)
		if got := r.content(path); string(got) != "bbaa" {
			t.Fatalf("%s: the child has %q, want bbaa (b wrote last)", path, got)
		}
	}
}

// A window that fails to reach the bricks fails the close, once.
func TestFailedWindowFailsClose(t *testing.T) {
	r := newRig(t, 1<<20)
	f := r.create("/f", syscall.O_WRONLY)
	defer f.Release(bg)
	r.write(f, []byte("lost"), 0)
	r.fault.Fail("Write", syscall.ENOSPC)
	if err := f.Flush(bg, 1); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("close after a failed window: %v, want ENOSPC", err)
	}
	r.fault.Clear()
	if err := f.Flush(bg, 1); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("second close: %v, want ENOSPC again (a child's close may have heard it first)", err)
	}
	if err := f.Fsync(bg, false); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fsync: %v, want ENOSPC", err)
	}
	if err := f.Flush(bg, 1); err != nil {
		t.Fatalf("close after the fsync reported it: %v, want nil", err)
	}
	// Failed by another operation's sending: the file's next one says so.
	r.write(f, []byte("lost too"), 0)
	r.fault.Fail("Write", syscall.EIO)
	if _, err := r.l.Lookup(bg, "/f"); err != nil {
		t.Fatalf("the lookup that sent the window: %v", err)
	}
	r.fault.Clear()
	if err := f.Fsync(bg, false); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync after a window failed: %v, want EIO", err)
	}
}

// O_DIRECT, O_SYNC, O_DSYNC and O_APPEND writes go through at once.
func TestUnbufferedOpens(t *testing.T) {
	for _, flag := range []uint32{syscall.O_DIRECT, syscall.O_SYNC, syscall.O_DSYNC, syscall.O_APPEND} {
		r := newRig(t, 1<<20)
		f := r.create("/f", syscall.O_WRONLY|flag)
		buf := make([]byte, 4096) // O_DIRECT wants aligned sizes
		r.write(f, buf, 0)
		if n := r.count.Count("Write"); n != 1 {
			t.Errorf("flags %#x: %d child writes after one write, want 1", flag, n)
		}
		f.Release(bg)
	}
}

// The whole contract holds with the layer on top.
func TestConformance(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer { return New(newStore(t), Options{}) })
}

func TestLocksConformance(t *testing.T) {
	layertest.RunLocks(t, func(t *testing.T) layer.Layer { return New(locks.New(newStore(t)), Options{}) })
}

// A caller that releases without Flush (the Go client library's Close)
// gets a failed window's error from Release.
func TestFailedWindowFailsRelease(t *testing.T) {
	r := newRig(t, 1<<20)
	f := r.create("/f", syscall.O_WRONLY)
	r.write(f, []byte("lost"), 0)
	r.fault.Fail("Write", syscall.ENOSPC)
	if err := f.Release(bg); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("release after a failed window: %v, want ENOSPC", err)
	}
}

// Past MaxBytes held by all files, writes go through at once.
func TestMaxBytesBound(t *testing.T) {
	r := newRig(t, 1<<20)
	r.l.w.max = 8192
	a, b := r.create("/a", syscall.O_WRONLY), r.create("/b", syscall.O_WRONLY)
	defer a.Release(bg)
	defer b.Release(bg)
	r.write(a, make([]byte, 6000), 0)
	r.write(b, make([]byte, 6000), 0) // 12000 > 8192: through
	if n := r.count.Count("Write"); n != 1 {
		t.Fatalf("%d child writes, want 1 (b's, past the bound)", n)
	}
	a.Flush(bg, 1)
	if got := r.l.w.bytes.Load(); got != 0 {
		t.Fatalf("%d bytes counted as held after every window went", got)
	}
}

// A window goes by itself once it is MaxAge old: a program that writes
// a line and keeps its file open has it on the bricks all the same.
// (Found by review: nothing bounded how long a window waited.)
func TestWindowSentWhenOld(t *testing.T) {
	r := newRig(t, 1<<20)
	r.l.maxAge = 50 * time.Millisecond
	f := r.create("/f", syscall.O_WRONLY)
	defer f.Release(bg)
	r.write(f, []byte("a line\n"), 0)
	if n := r.count.Count("Write"); n != 0 {
		t.Fatalf("%d child writes right after the write, want 0", n)
	}
	// The counter counts a write when it starts: wait for what it wrote
	// (a read right after the count saw nothing, once, under load).
	deadline := time.Now().Add(10 * time.Second)
	for string(r.content("/f")) != "a line\n" {
		if time.Now().After(deadline) {
			t.Fatalf("the window was not sent within 10 s: the child has %q after %d writes", r.content("/f"), r.count.Count("Write"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
