package writebehind

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/locks"
)

// slowWrites is a child whose writes take 50 ms and honour their context,
// as a network client's do.
type slowWrites struct{ layer.Layer }

type slowFile struct{ layer.File }

func (c slowWrites) Create(ctx context.Context, p string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	f, a, err := c.Layer.Create(ctx, p, in)
	if err != nil {
		return nil, a, err
	}
	return slowFile{f}, a, nil
}

func (f slowFile) Write(ctx context.Context, p []byte, off int64) (int, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(50 * time.Millisecond):
		return f.File.Write(ctx, p, off)
	}
}

// An interrupted F_SETLKW (the bridge cancels its context) does not lose
// the window it was sending: windows go whatever becomes of the context
// of the operation that sends them. (Found by review: the window was lost
// and the close succeeded.)
func TestInterruptedLockLosesWindow(t *testing.T) {
	s := newStore(t)
	l := New(slowWrites{locks.New(s)}, Options{})
	f, _, err := l.Create(bg, "/f", layer.CreateIn{Mode: 0o644, Flags: syscall.O_RDWR | syscall.O_CREAT, Owner: layer.Owner{Gfid: layer.NewGfid()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bg, []byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	time.AfterFunc(10*time.Millisecond, cancel) // the signal
	lk := layer.Lock{Type: syscall.F_WRLCK, End: ^uint64(0), Pid: 1}
	err1 := f.Setlk(ctx, 1, lk, true)
	err2 := f.Setlk(bg, 1, lk, true) // the restarted call
	cerr := f.Flush(bg, 1)
	f.Release(bg)
	buf := make([]byte, 10)
	g, _ := s.Open(bg, "/f", syscall.O_RDONLY)
	n, _ := g.Read(bg, buf, 0)
	g.Release(bg)
	if string(buf[:n]) != "data" {
		t.Fatalf("interrupted lock: %v, restarted: %v, close: %v; the brick has %q", err1, err2, cerr, buf[:n])
	}
}
