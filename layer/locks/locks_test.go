package locks_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
	"github.com/mortarfs/mortar/layer/locks"
)

func newStack(t *testing.T) layer.Layer {
	dir := t.TempDir()
	if err := posix.Mark(dir, "vol", false); err != nil {
		t.Fatal(err)
	}
	s, err := posix.New(dir, posix.Options{VolumeID: "vol"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return locks.New(s)
}

func TestLocks(t *testing.T) { layertest.RunLocks(t, newStack) }

// The locks layer passes the whole storage contract through.
func TestConformance(t *testing.T) { layertest.Run(t, newStack) }

func TestDeadlock(t *testing.T) {
	l := newStack(t)
	ctx := context.Background()
	f, _, err := l.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	wr := func(off uint64) layer.Lock { return layer.Lock{Type: syscall.F_WRLCK, Start: off, End: off} }
	if err := f.Setlk(ctx, 1, wr(0), false); err != nil {
		t.Fatal(err)
	}
	if err := f.Setlk(ctx, 2, wr(1), false); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Setlk(ctx, 1, wr(1), true) }() // 1 waits for 2
	time.Sleep(50 * time.Millisecond)
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := f.Setlk(tctx, 2, wr(0), true); err != syscall.EDEADLK { // 2 would wait for 1
		t.Fatalf("deadlocking wait: %v, want EDEADLK", err)
	}
	if err := f.Setlk(ctx, 2, layer.Lock{Type: syscall.F_UNLCK, Start: 1, End: 1}, false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("owner 1 not woken")
	}
}

func TestInvalidType(t *testing.T) {
	l := newStack(t)
	ctx := context.Background()
	f, _, _ := l.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	defer f.Release(ctx)
	if err := f.Setlk(ctx, 1, layer.Lock{Type: 9}, false); err != syscall.EINVAL {
		t.Fatalf("bad type: %v", err)
	}
}

// Many owners contending for one range never hold it at the same time and
// all get it eventually (no lost wake-ups).
func TestContention(t *testing.T) {
	l := newStack(t)
	ctx := context.Background()
	f, _, err := l.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	var holders atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for owner := uint64(1); owner <= 8; owner++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := l.Open(ctx, "/f", syscall.O_RDWR)
			if err != nil {
				errs <- err
				return
			}
			defer g.Release(ctx)
			for i := 0; i < 50; i++ {
				lk := layer.Lock{Type: syscall.F_WRLCK, Start: 10, End: 20}
				if i%2 == 1 {
					lk = layer.Lock{Type: syscall.F_WRLCK, Start: 15, End: 0} // to EOF
				}
				if err := g.Setlk(ctx, owner, lk, true); err != nil {
					errs <- err
					return
				}
				if n := holders.Add(1); n != 1 {
					errs <- fmt.Errorf("%d holders of a write lock", n)
				}
				holders.Add(-1)
				if i%3 == 0 {
					g.Flush(ctx, owner)
				} else {
					g.Setlk(ctx, owner, layer.Lock{Type: syscall.F_UNLCK, End: math.MaxUint64}, false)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
