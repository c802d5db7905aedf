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
	if err := posix.Mark(dir, "vol", true); err != nil {
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

// createF creates /f on l, released when the test ends.
func createF(t *testing.T, l layer.Layer) layer.File {
	t.Helper()
	f, _, err := l.Create(context.Background(), "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Release(context.Background()) })
	return f
}

func TestDeadlock(t *testing.T) {
	l := newStack(t)
	ctx := context.Background()
	f := createF(t, l)
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

// Internal locks (layer.DomainInternal) live in a table of their own: they
// conflict with each other only, Flush keeps them, Release drops them and
// wakes their waiters; the holder's Getlk counts the waiters.
func TestInternalDomain(t *testing.T) {
	l := newStack(t)
	ctx := context.Background()
	a := createF(t, l)
	b, err := l.Open(ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	in := layer.Lock{Type: syscall.F_WRLCK, End: math.MaxUint64, Domain: layer.DomainInternal}
	app := layer.Lock{Type: syscall.F_WRLCK, End: math.MaxUint64}
	fl := layer.Lock{Type: syscall.F_WRLCK, Flock: true}
	if err := b.Setlk(ctx, 2, in, false); err != nil {
		t.Fatal(err)
	}
	if err := a.Setlk(ctx, 1, app, false); err != nil {
		t.Fatalf("application lock against an internal one: %v", err)
	}
	if err := a.Setlk(ctx, 1, fl, false); err != nil {
		t.Fatalf("flock against an internal one: %v", err)
	}
	if err := a.Setlk(ctx, 1, in, false); err != syscall.EAGAIN {
		t.Fatalf("second internal lock: %v, want EAGAIN", err)
	}
	if got, _ := a.Getlk(ctx, 1, in); got.Type != syscall.F_WRLCK {
		t.Fatalf("getlk of the internal domain: %+v", got)
	}
	if err := b.Flush(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := a.Setlk(ctx, 1, in, false); err != syscall.EAGAIN {
		t.Fatalf("internal lock after the holder's flush: %v, want EAGAIN", err)
	}
	if err := a.Setlk(ctx, 1, layer.Lock{Type: syscall.F_WRLCK, Flock: true, Domain: layer.DomainInternal}, false); err != syscall.EINVAL {
		t.Fatalf("internal flock: %v, want EINVAL", err)
	}
	if got, _ := b.Getlk(ctx, 2, in); got.Type != syscall.F_UNLCK || got.Pid != 0 {
		t.Fatalf("the holder's getlk, nobody waiting: %+v", got)
	}
	done := make(chan error, 1)
	go func() { done <- a.Setlk(ctx, 1, in, true) }()
	// The holder sees the waiter (contention).
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := b.Getlk(ctx, 2, in)
		if got.Type == syscall.F_UNLCK && got.Pid == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder's getlk with a waiter: %+v", got)
		}
		time.Sleep(time.Millisecond)
	}
	b.Release(ctx) // the holder's connection closes: the brick releases its files
	if err := <-done; err != nil {
		t.Fatalf("wait for an internal lock whose holder released: %v", err)
	}
}
