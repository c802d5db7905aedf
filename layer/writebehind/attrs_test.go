package writebehind

import (
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// tarSet is what tar does to a file it wrote: times, owner, mode.
var tarSet = []layer.SetattrIn{
	{Valid: layer.SetAtime | layer.SetMtime, Atime: layer.Timespec{Sec: 1000}, Mtime: layer.Timespec{Sec: 2000}},
	{Valid: layer.SetUid | layer.SetGid, Uid: 7, Gid: 8},
	{Valid: layer.SetMode, Mode: 0o751},
}

// The attribute changes tar makes to a file it created and wrote are
// answered at once, with the attributes they make, and reach the child
// with the file's close, after its writes: the times are the ones set.
func TestAttributesBehindWrites(t *testing.T) {
	r := newRig(t, 64<<10)
	f := r.create("/f", syscall.O_WRONLY)
	r.write(f, []byte("hello"), 0)
	var a layer.Attr
	for _, in := range tarSet {
		var err error
		if a, err = f.Setattr(bg, in); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.count.Count("Write") + r.count.Count("FileSetattr"); n != 0 {
		t.Fatalf("%d writes and setattrs reached the child before the close", n)
	}
	if a.Size != 5 || a.Mode != syscall.S_IFREG|0o751 || a.Uid != 7 || a.Gid != 8 || a.Mtime.Sec != 2000 || a.Atime.Sec != 1000 {
		t.Fatalf("answered attributes %+v", a)
	}
	r.flush(f)
	if w, s := r.count.Count("Write"), r.count.Count("FileSetattr"); w != 1 || s != 1 {
		t.Fatalf("close sent %d writes and %d setattrs, want 1 and 1", w, s)
	}
	got, err := r.count.Lookup(bg, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != 5 || got.Mode != a.Mode || got.Uid != 7 || got.Gid != 8 || got.Mtime != a.Mtime || got.Atime != a.Atime {
		t.Fatalf("the child has %+v, the layer answered %+v", got, a)
	}
	f.Release(bg)
}

// A write after an attribute change sends the change first: its times
// are then the write's.
func TestWriteAfterAttributesSendsThem(t *testing.T) {
	r := newRig(t, 64<<10)
	f := r.create("/f", syscall.O_WRONLY)
	defer f.Release(bg)
	if _, err := f.Setattr(bg, tarSet[0]); err != nil {
		t.Fatal(err)
	}
	r.write(f, []byte("x"), 0)
	if n := r.count.Count("FileSetattr"); n != 1 {
		t.Fatalf("%d setattrs sent before the write, want 1", n)
	}
	r.flush(f)
	if r.onBricks("/f").Mtime.Sec == 2000 {
		t.Fatal("the write came before the time change made before it")
	}
}

// Only what the layer knows is answered: after another operation (which
// may have changed the file), after a size change or "now" times, and on
// a file opened rather than created, changes go at once.
func TestAttributesGoAtOnceWhenUnknown(t *testing.T) {
	r := newRig(t, 64<<10)
	f := r.create("/f", syscall.O_WRONLY)
	defer f.Release(bg)
	if _, err := r.l.Lookup(bg, "/"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Setattr(bg, tarSet[2]); err != nil || r.count.Count("FileSetattr") != 1 {
		t.Fatalf("setattr after another operation: %v, %d sent", err, r.count.Count("FileSetattr"))
	}
	// The answer of that setattr is known again: the next may wait.
	if _, err := f.Setattr(bg, tarSet[1]); err != nil || r.count.Count("FileSetattr") != 1 {
		t.Fatalf("setattr after a known answer: %v, %d sent", err, r.count.Count("FileSetattr"))
	}
	for _, in := range []layer.SetattrIn{{Valid: layer.SetSize, Size: 3}, {Valid: layer.SetMtimeNow | layer.SetMtime}} {
		before := r.count.Count("FileSetattr")
		if _, err := f.Setattr(bg, in); err != nil || r.count.Count("FileSetattr") == before {
			t.Fatalf("setattr %+v: %v, not sent at once", in, err)
		}
	}
	g, err := r.l.Open(bg, "/f", syscall.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release(bg)
	before := r.count.Count("FileSetattr")
	if _, err := g.Setattr(bg, tarSet[2]); err != nil || r.count.Count("FileSetattr") != before+1 {
		t.Fatalf("setattr of an opened file: %v, not sent at once", err)
	}
}

// A change that fails when it is sent is the close's error, as a failed
// write is.
func TestFailedAttributesReportedAtClose(t *testing.T) {
	r := newRig(t, 64<<10)
	f := r.create("/f", syscall.O_WRONLY)
	defer f.Release(bg)
	if _, err := f.Setattr(bg, tarSet[1]); err != nil {
		t.Fatal(err)
	}
	r.fault.Fail("FileSetattr", syscall.EIO)
	if err := f.Flush(bg, 0); err != syscall.EIO {
		t.Fatalf("close after a failed change: %v, want EIO", err)
	}
}

// What a file learns while another operation is under way is not
// trusted: that operation may change what it learnt.
func TestAttributesLearntDuringAnotherOperationNotTrusted(t *testing.T) {
	r := newRig(t, 64<<10)
	f := r.create("/f", syscall.O_WRONLY)
	defer f.Release(bg)
	other := r.l.begin(bg) // another process's chmod, on its way
	if _, err := f.Getattr(bg); err != nil {
		t.Fatal(err)
	}
	r.l.done(other)
	if _, err := f.Setattr(bg, tarSet[2]); err != nil || r.count.Count("FileSetattr") != 1 {
		t.Fatalf("setattr after an overlapping operation: %v, %d sent, want 1", err, r.count.Count("FileSetattr"))
	}
}

// A file opened (not created) learns its attributes and its inode from a
// getattr; a change kept then still goes before another file's write of
// the inode, which then sets the times.
func TestAttributesOfOpenedFileGoBeforeOthersWrites(t *testing.T) {
	r := newRig(t, 64<<10)
	c := r.create("/f", syscall.O_WRONLY)
	c.Release(bg)
	f, err := r.l.Open(bg, "/f", syscall.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(bg)
	if _, err := f.Getattr(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Setattr(bg, tarSet[0]); err != nil {
		t.Fatal(err)
	}
	g, err := r.l.Open(bg, "/f", syscall.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release(bg)
	r.write(g, []byte("x"), 0)
	r.flush(g)
	r.flush(f)
	if r.onBricks("/f").Mtime.Sec == 2000 {
		t.Fatal("a time change made before another file's write landed after it")
	}
}

// After a close, or a window that failed, changes go at once.
func TestAttributesAfterCloseOrFailureGoAtOnce(t *testing.T) {
	r := newRig(t, 64<<10)
	f := r.create("/f", syscall.O_WRONLY)
	defer f.Release(bg)
	r.flush(f)
	if _, err := f.Setattr(bg, tarSet[2]); err != nil || r.count.Count("FileSetattr") != 1 {
		t.Fatalf("setattr after close: %v, %d sent, want 1", err, r.count.Count("FileSetattr"))
	}
	// A window that its age sends, and fails.
	r.l = New(r.count, Options{WindowSize: 64 << 10, MaxAge: time.Millisecond})
	r.fault.Fail("Write", syscall.ENOSPC)
	g := r.create("/g", syscall.O_WRONLY)
	defer g.Release(bg)
	r.write(g, []byte("x"), 0)
	for deadline := time.Now().Add(10 * time.Second); r.count.Count("Write") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the window was not sent within its age")
		}
		time.Sleep(time.Millisecond)
	}
	g.(*file).mu.Lock() // the send is over
	g.(*file).mu.Unlock()
	r.fault.Clear()
	before := r.count.Count("FileSetattr")
	if _, err := g.Setattr(bg, tarSet[2]); err != nil || r.count.Count("FileSetattr") != before+1 {
		t.Fatalf("setattr after a failed window: %v, not sent at once", err)
	}
}

// flush closes a descriptor of f (Flush), which must succeed.
func (r *rig) flush(f layer.File) {
	r.t.Helper()
	if err := f.Flush(bg, 0); err != nil {
		r.t.Fatal(err)
	}
}

// onBricks returns the attributes of path under the layer.
func (r *rig) onBricks(path string) layer.Attr {
	r.t.Helper()
	a, err := r.count.Lookup(bg, path)
	if err != nil {
		r.t.Fatal(err)
	}
	return a
}
