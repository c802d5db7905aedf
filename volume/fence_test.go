package volume

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// A Live's graph gives its spec version as its layout generation: once
// the bricks are fenced at a later version, its new names fail with EIO
// and make nothing, until it runs a spec of that version. A create held
// back in a directory it made (create-behind) fails at the file's close.
func TestLiveFencedUntilItRunsTheLayout(t *testing.T) {
	spec, bricks := serveBricks(t, 2)
	l, _ := newLive(t, spec)
	other, _ := newLive(t, spec)
	ctx := context.Background()
	if _, err := other.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil { // not leased to l
		t.Fatal(err)
	}
	if _, err := l.Mkdir(ctx, "/own", layer.MkdirIn{Mode: 0o755}); err != nil { // leased, if create-behind is on
		t.Fatal(err)
	}
	for _, b := range bricks {
		b.srv.SetFence(b.id, spec.Version+1)
	}
	if _, _, err := l.Create(ctx, "/d/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("create on a fenced layout: %v, want EIO", err)
	}
	if _, err := l.Mkdir(ctx, "/d/e", layer.MkdirIn{Mode: 0o755}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("mkdir on a fenced layout: %v, want EIO", err)
	}
	if err := l.Rename(ctx, "/own", "/d/own", 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("rename on a fenced layout: %v, want EIO", err)
	}
	f, _, err := l.Create(ctx, "/own/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err == nil {
		f.Write(ctx, []byte("x"), 0)
		err = f.Flush(ctx, 1)
		f.Release(ctx)
	}
	if layer.UserErrno(err) != syscall.EIO {
		t.Fatalf("create in a leased directory on a fenced layout: %v, want EIO at the create or the close", err)
	}
	for _, p := range []string{"/d/f", "/d/e", "/d/own", "/own/f"} {
		if _, err := other.Lookup(ctx, p); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("the fenced client made %s: %v", p, err)
		}
	}
	if err := l.Swap(next(spec, 1)); err != nil {
		t.Fatal(err)
	}
	create(t, l, "/d/f", "x").Release(ctx)
	if _, err := l.Mkdir(ctx, "/d/e", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatalf("mkdir on the fence's layout: %v", err)
	}
}

// An operation fenced on a graph that a newer one replaced meanwhile runs
// once more, on the newer graph; fenced there too, it fails with EIO.
func TestLiveRetriesAFencedNameOnTheNewerGraph(t *testing.T) {
	spec, _ := serveBricks(t, 1)
	l, _ := newLive(t, spec)
	var ran []uint64
	v, err := makeName(l, func(top layer.Layer) (uint64, error) {
		version := l.Version()
		ran = append(ran, version)
		if len(ran) == 1 {
			if err := l.Swap(next(spec, 1)); err != nil {
				t.Fatal(err)
			}
			return 0, layer.ErrFenced
		}
		return version, nil
	})
	if err != nil || v != spec.Version+1 || len(ran) != 2 {
		t.Fatalf("retried on versions %v: %d, %v; want the second on %d", ran, v, err, spec.Version+1)
	}
	ran = nil
	_, err = makeName(l, func(top layer.Layer) (uint64, error) {
		ran = append(ran, l.Version())
		if len(ran) == 1 {
			if err := l.Swap(next(spec, 2)); err != nil {
				t.Fatal(err)
			}
		}
		return 0, layer.ErrFenced
	})
	if !errors.Is(err, syscall.EIO) || len(ran) != 2 {
		t.Fatalf("fenced twice: %v after %v, want EIO after two tries", err, ran)
	}
}

// A client that follows the spec (it swapped to the new graph before the
// fence went up) keeps a file it created, with create-behind, on the
// graph it swapped away from: the swap sends what the old graph held
// back before it returns (a review, 2026-11-28: the create was sent after
// the fence went up, and refused).
func TestHeldCreateSentBeforeTheSwapReturns(t *testing.T) {
	spec, bricks := serveBricks(t, 2)
	l, _ := newLive(t, spec)
	other, _ := newLive(t, spec)
	ctx := context.Background()
	if _, err := l.Mkdir(ctx, "/own", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	f, _, err := l.Create(ctx, "/own/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(ctx, []byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	// The client takes the new spec (it reports version 2 to its node),
	// then the leader raises the fence to 2.
	if err := l.Swap(next(spec, 1)); err != nil {
		t.Fatal(err)
	}
	for _, b := range bricks {
		b.srv.SetFence(b.id, spec.Version+1)
	}
	ferr := f.Flush(ctx, 1)
	f.Release(ctx)
	_, lerr := other.Lookup(ctx, "/own/f")
	if ferr != nil || lerr != nil {
		t.Fatalf("current client's file: close %v (user sees %v), lookup %v", ferr, layer.UserErrno(ferr), lerr)
	}
}

// With the fence on only some replicas (their node told first), a stale
// client's create fails even where the unfenced replicas are quorate
// (replica 2: brick 0 alone is): the fenced refusal wins (a review,
// 2026-11-28: it went through, and heal made the name on the fenced
// replica too).
func TestPartialFenceRefuses(t *testing.T) {
	spec, bricks := serveBricks(t, 2)
	spec.Type, spec.Replica = Replicate, 2
	l, _ := newLive(t, spec)
	ctx := context.Background()
	bricks[1].srv.SetFence(bricks[1].id, spec.Version+1) // brick 0's node: not fenced
	f, _, err := l.Create(ctx, "/stale", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
	if err == nil {
		f.Release(ctx)
		t.Fatalf("a stale client's create succeeded with one of two replicas fenced")
	}
	if layer.UserErrno(err) != syscall.EIO {
		t.Fatalf("a stale client's create with one of two replicas fenced: %v, want EIO", err)
	}
}

// A Create that fails (here EEXIST) releases its graph: after a swap the
// old graph is closed (a review, 2026-11-28: it was kept forever).
func TestFailedCreateReleasesItsGraph(t *testing.T) {
	spec, _ := serveBricks(t, 1)
	l, closed := newLive(t, spec)
	ctx := context.Background()
	create(t, l, "/f", "x").Release(ctx)
	if _, _, err := l.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL | syscall.O_CREAT, Mode: 0o644}); err == nil {
		t.Fatal("O_EXCL create of an existing file succeeded")
	}
	if err := l.Swap(next(spec, 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-closed:
		t.Logf("graph %d closed", v)
	case <-time.After(3 * time.Second):
		t.Fatalf("the old graph was never closed after a failed create (graphs held: %d)", l.Graphs())
	}
}
