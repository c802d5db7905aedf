package volume

import (
	"context"
	"errors"
	"syscall"
	"testing"

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
