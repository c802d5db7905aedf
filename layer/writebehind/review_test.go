package writebehind

import (
	"errors"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
	"github.com/mortarfs/mortar/layer/locks"
)

// A getattr (or read, setattr, lock) of the file sends the windows but
// does not take a failed one's error: the close still reports it. (Found
// by review: it was forgotten and the close succeeded.)
func TestErrorLostByGetattr(t *testing.T) {
	for _, op := range []string{"Getattr", "Read", "Setattr", "Setlk"} {
		r := newRig(t, 1<<20)
		f := r.create("/f", syscall.O_RDWR)
		r.write(f, []byte("lost"), 0)
		r.fault.Fail("Write", syscall.ENOSPC)
		if _, err := r.l.Lookup(bg, "/"); err != nil { // any op sends the window
			t.Fatal(err)
		}
		r.fault.Clear()
		var err error
		switch op {
		case "Getattr":
			_, err = f.Getattr(bg)
		case "Read":
			_, err = f.Read(bg, make([]byte, 10), 0)
		case "Setattr":
			_, err = f.Setattr(bg, layer.SetattrIn{Valid: layer.SetMode, Mode: 0o600})
		case "Setlk":
			err = f.Setlk(bg, 1, layer.Lock{Type: syscall.F_UNLCK, End: ^uint64(0)}, false)
		}
		t.Logf("%s after the failed window: %v", op, err)
		if err := f.Flush(bg, 1); !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("%s: close after the failed window: %v, want ENOSPC", op, err)
		}
		f.Release(bg)
	}
}

// A zero-length write leaves nothing counted as held. (Found by review.)
func TestZeroWriteLeaks(t *testing.T) {
	r := newRig(t, 1<<20)
	f := r.create("/f", syscall.O_WRONLY)
	if _, err := f.Write(bg, nil, 0); err != nil {
		t.Fatal(err)
	}
	f.Flush(bg, 1)
	f.Release(bg)
	if n := r.l.w.count.Load(); n != 0 {
		t.Fatalf("after release: %d files counted as holding windows, want 0", n)
	}
}

// An unlock goes to the bricks even when a window failed: the lock is not
// left held. (Found by review.)
func TestUnlockRefused(t *testing.T) {
	fault := newFaultOverLocks(t)
	l := New(fault, Options{})
	mk := func() layer.File {
		f, _, err := l.Create(bg, "/f", layer.CreateIn{Mode: 0o644, Flags: syscall.O_RDWR | syscall.O_CREAT, Owner: layer.Owner{Gfid: layer.NewGfid()}})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a := mk()
	defer a.Release(bg)
	whole := layer.Lock{Type: syscall.F_WRLCK, End: ^uint64(0), Pid: 1}
	if err := a.Setlk(bg, 1, whole, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write(bg, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	fault.Fail("Write", syscall.EIO)
	l.Lookup(bg, "/")
	fault.Clear()
	un := whole
	un.Type = syscall.F_UNLCK
	err := a.Setlk(bg, 1, un, false)
	b, err2 := l.Open(bg, "/f", syscall.O_RDWR)
	if err2 != nil {
		t.Fatal(err2)
	}
	defer b.Release(bg)
	got, _ := b.Getlk(bg, 2, layer.Lock{Type: syscall.F_WRLCK, End: ^uint64(0), Pid: 2})
	if got.Type != syscall.F_UNLCK {
		t.Fatalf("after an unlock that returned %v, the lock is still held: %+v", err, got)
	}
}

func newFaultOverLocks(t *testing.T) *layertest.Fault {
	return layertest.NewFault(locks.New(newStore(t)))
}

// fsync through one descriptor of an inode sends the windows of the
// others and reports their failure, as the kernel reports a writeback
// error to every descriptor. (Found by review: it said nothing.)
func TestFsyncOtherDescriptor(t *testing.T) {
	r := newRig(t, 1<<20)
	w := r.create("/f", syscall.O_WRONLY)
	defer w.Release(bg)
	s, err := r.l.Open(bg, "/f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(bg)
	r.write(w, []byte("data"), 0)
	r.fault.Fail("Write", syscall.EIO)
	err = s.Fsync(bg, false)
	r.fault.Clear()
	if err == nil {
		t.Fatalf("fsync of the inode whose acknowledged data was just lost: nil; the child has %q", r.content("/f"))
	}
}
