package distribute

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// renameFails answers a rename with err once on is set: after doing it
// (done, as a replica set that did it on too few bricks answers EIO) or
// without (as a client whose connection is gone before it sends answers
// ENOTCONN).
type renameFails struct {
	layer.Layer
	on   *atomic.Bool
	done bool
	err  error
}

func (l renameFails) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	if !l.on.Load() {
		return l.Layer.Rename(ctx, oldpath, newpath, flags)
	}
	if l.done {
		if err := l.Layer.Rename(ctx, oldpath, newpath, flags); err != nil {
			return err
		}
	}
	return l.err
}

// A rename over a file on another child whose move of the data may stand
// (EIO): done, the rename goes on (the name points at the moved data, the
// old target goes) and answers EIO, so that the name is not twice
// (the simulation, replica3x2-grow seed 20); not done (ENOTCONN, nothing
// sent), both names stay as they were (a review found the old target
// replaced by a dangling pointer).
func TestRenameWhoseMoveMayStand(t *testing.T) {
	for _, c := range []struct {
		name string
		done bool
		err  error
	}{{"done", true, syscall.EIO}, {"not sent", false, syscall.ENOTCONN}} {
		t.Run(c.name, func(t *testing.T) {
			var on atomic.Bool
			r := newRig(t, 2, func(i int, l layer.Layer) layer.Layer {
				if i == 0 {
					return renameFails{Layer: l, on: &on, done: c.done, err: c.err}
				}
				return l
			})
			s, d := r.name("/", "s", 0), r.name("/", "d", 1)
			r.write(s, "source")
			r.write(d, "target")
			on.Store(true)
			err := r.d.Rename(r.ctx, s, d, 0)
			on.Store(false)
			if !errors.Is(err, c.err) {
				t.Errorf("rename: %v, want %v", err, c.err)
			}
			want := map[string]string{s: "source", d: "target"}
			if c.done {
				want = map[string]string{d: "source"}
				if _, err := r.d.Lookup(r.ctx, s); !errors.Is(err, syscall.ENOENT) {
					t.Errorf("source after the move: %v, want ENOENT", err)
				}
				if _, err := r.stores[1].Lookup(r.ctx, d); err == nil {
					if a, _ := r.stores[1].Lookup(r.ctx, d); a.Linkto == "" {
						t.Errorf("the old target's data is still on child 1 under %s", d)
					}
				}
			}
			for p, content := range want {
				if got := r.read(p); got != content {
					t.Errorf("%s reads %q, want %q", p, got, content)
				}
			}
		})
	}
}

// lookupDown answers every lookup with ENOTCONN once on is set: a child
// that does not answer (a replica set without a quorum for this client).
type lookupDown struct {
	layer.Layer
	on *atomic.Bool
}

func (l lookupDown) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	if l.on.Load() {
		return layer.Attr{}, syscall.ENOTCONN
	}
	return l.Layer.Lookup(ctx, path)
}

// During a rebalance, a file not yet moved lives where the previous
// layout put it. With that child not answering, a lookup of the file
// answers its error, not ENOENT (the simulation, replica3x2-grow seed 13),
// and a create of the name fails rather than making it a second time on
// its new child.
func TestPreviousPlaceUnreachable(t *testing.T) {
	var on atomic.Bool
	r := newRig(t, 2, func(i int, l layer.Layer) layer.Layer {
		if i == 0 {
			return lookupDown{Layer: l, on: &on}
		}
		return l
	})
	p := r.name("/", "f", 0)
	r.write(p, "not moved yet")
	prev := r.d.layout
	var err error
	if r.d.layout, err = r.d.layoutFrom([]Range{{Start: 0, Child: brickID(1)}}); err != nil {
		t.Fatal(err)
	}
	r.d.prev = prev
	on.Store(true)
	if _, err := r.d.Lookup(r.ctx, p); !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("lookup with the previous place down: %v, want ENOTCONN", err)
	}
	if _, _, err := r.d.Create(r.ctx, p, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644}); !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("create with the previous place down: %v, want ENOTCONN", err)
	}
	if _, err := r.stores[1].Lookup(r.ctx, p); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("the name on its new child: %v, want ENOENT (not made twice)", err)
	}
	on.Store(false)
	if got := r.read(p); got != "not moved yet" {
		t.Errorf("the file reads %q", got)
	}
}
