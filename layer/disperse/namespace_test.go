package disperse

import (
	"errors"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// With fewer than K bricks up, the one up may be the brick that missed a
// file's create: its ENOENT is no answer. A lookup, an open, a rename and
// an unlink of the file fail with ENOTCONN (or EROFS), never ENOENT (the
// simulation, disperse 2+1 seed 19: distribute's rename looks its source
// up first, and the one brick up, which had missed the create, answered
// ENOENT for a file that existed).
func TestStaleBrickAloneDoesNotSayENOENT(t *testing.T) {
	g := newRig(t, 3, 1)
	g.kill(1)
	g.writeFile("/f", []byte("made while brick 1 was down"))
	g.kill(0)
	g.kill(2)
	g.revive(1) // alone, and stale: it lacks /f
	if _, err := g.bricks[1].Store.Lookup(g.ctx, "/f"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("brick 1 has /f (%v): the test needs it stale", err)
	}
	unavailable := func(err error) bool {
		return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EIO)
	}
	if _, err := g.d.Lookup(g.ctx, "/f"); !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("lookup of /f with one brick of three up: %v, want ENOTCONN", err)
	}
	if f, err := g.d.Open(g.ctx, "/f", syscall.O_RDONLY); !unavailable(err) {
		if err == nil {
			f.Release(g.ctx)
		}
		t.Errorf("open of /f with one brick of three up: %v, want ENOTCONN", err)
	}
	if err := g.d.Rename(g.ctx, "/f", "/g", 0); !unavailable(err) {
		t.Errorf("rename of /f with one brick of three up: %v, want ENOTCONN or EROFS", err)
	}
	if err := g.d.Unlink(g.ctx, "/f"); !unavailable(err) {
		t.Errorf("unlink of /f with one brick of three up: %v, want ENOTCONN or EROFS", err)
	}
	// The root is still answered (paths resolve), and a create is refused
	// before anything is sent.
	if a, err := g.d.Lookup(g.ctx, "/"); err != nil || !a.IsDir() {
		t.Errorf("lookup of / with one brick of three up: %v; want its attributes", err)
	}
	if _, _, err := g.d.Create(g.ctx, "/new", layer.CreateIn{Flags: syscall.O_WRONLY, Mode: 0o644}); !unavailable(err) {
		t.Errorf("create with one brick of three up: %v, want EROFS", err)
	}
	if _, err := g.bricks[1].Store.Lookup(g.ctx, "/new"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("the refused create reached brick 1: %v", err)
	}
}
