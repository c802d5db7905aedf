package mdcache

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
)

const testVolume = "vol-mdcache-test"

var bg = context.Background()

// rig is the layer over a brick in a temporary directory, reached through
// a counter of the operations that get past the layer.
type rig struct {
	t     *testing.T
	under layer.Layer // the brick, as another client reaches it
	count *layertest.Counting
	clock *layertest.Clock
	l     *Layer
}

func newRig(t *testing.T) *rig {
	s := testbrick.NewStore(t, testVolume)
	r := &rig{t: t, under: s, count: layertest.NewCounting(s), clock: layertest.NewClock()}
	r.l = New(r.count, Options{Timeout: time.Second, Now: r.clock.Now})
	return r
}

// stat looks path up through the layer and reports whether the child was
// asked.
func (r *rig) stat(path string) (layer.Attr, bool) {
	r.t.Helper()
	before := r.count.Count("Lookup")
	a, err := r.l.Lookup(bg, path)
	if err != nil {
		r.t.Fatalf("lookup %s: %v", path, err)
	}
	return a, r.count.Count("Lookup") > before
}

func (r *rig) ok(err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) create(l layer.Layer, path string) layer.Attr {
	r.t.Helper()
	f, a, err := l.Create(bg, path, layer.CreateIn{Mode: 0o644, Flags: syscall.O_RDWR | syscall.O_EXCL, Owner: layer.Owner{Gfid: layer.NewGfid()}})
	r.ok(err)
	f.Release(bg)
	return a
}

func mkdirIn() layer.MkdirIn {
	return layer.MkdirIn{Mode: 0o755, Owner: layer.Owner{Gfid: layer.NewGfid()}}
}

// A directory looked up is answered from memory for the timeout, files
// never are; names made through the layer keep its links as the brick
// has them and its times within a second after the brick's, without
// asking.
func TestDirectoryKeptAndKeptUpToDate(t *testing.T) {
	r := newRig(t)
	_, err := r.l.Mkdir(bg, "/d", mkdirIn())
	r.ok(err)
	if _, asked := r.stat("/d"); !asked {
		t.Fatal("first lookup not asked")
	}
	if _, asked := r.stat("/d"); asked {
		t.Fatal("a directory looked up just now was asked again")
	}
	r.create(r.l, "/d/f")
	if _, asked := r.stat("/d/f"); !asked {
		t.Fatal("a file was answered from memory")
	}
	_, err = r.l.Mkdir(bg, "/d/sub", mkdirIn())
	r.ok(err)
	got, asked := r.stat("/d")
	if asked {
		t.Fatal("the directory was asked after names made in it through the layer")
	}
	want, err := r.under.Lookup(bg, "/d")
	r.ok(err)
	if got.Nlink != want.Nlink || !near(got.Mtime, want.Mtime) || !near(got.Ctime, want.Ctime) || got.Mode != want.Mode {
		t.Errorf("kept after a create and a mkdir: nlink %d mtime %v ctime %v; the brick has nlink %d mtime %v ctime %v",
			got.Nlink, got.Mtime, got.Ctime, want.Nlink, want.Mtime, want.Ctime)
	}
	r.clock.Advance(time.Second)
	if _, asked := r.stat("/d"); !asked {
		t.Fatal("a directory was answered from memory past the timeout")
	}
}

// near reports whether a kept time is the brick's or at most a second
// later (the new inode's change time, which the kept one is, follows the
// directory's by the time the brick takes to give it its owner and gfid).
func near(kept, brick layer.Timespec) bool {
	d := (kept.Sec-brick.Sec)*1e9 + int64(kept.Nsec) - int64(brick.Nsec)
	return d >= 0 && d < 1e9
}

// Removals through the layer keep the directory, its times no earlier
// than they were and its links as the brick has them; renames and xattrs
// forget it; a chmod keeps what it answers.
func TestChangesThroughTheLayer(t *testing.T) {
	r := newRig(t)
	_, err := r.l.Mkdir(bg, "/d", mkdirIn())
	r.ok(err)
	r.create(r.l, "/d/f")
	_, err = r.l.Mkdir(bg, "/d/s", mkdirIn())
	r.ok(err)
	before, _ := r.stat("/d")
	r.ok(r.l.Unlink(bg, "/d/f"))
	r.ok(r.l.Rmdir(bg, "/d/s"))
	got, asked := r.stat("/d")
	if asked {
		t.Fatal("the directory was asked after removals through the layer")
	}
	want, err := r.under.Lookup(bg, "/d")
	r.ok(err)
	if got.Nlink != want.Nlink || later(before.Mtime, got.Mtime) || later(before.Ctime, got.Ctime) {
		t.Errorf("kept after an unlink and an rmdir: nlink %d (brick %d), times %v %v went back from %v %v",
			got.Nlink, want.Nlink, got.Mtime, got.Ctime, before.Mtime, before.Ctime)
	}
	if err := r.l.Unlink(bg, "/d/none"); err == nil {
		t.Fatal("unlink of a missing name succeeded")
	}
	if _, asked := r.stat("/d"); asked {
		t.Error("an unlink of a missing name forgot the directory")
	}
	r.create(r.l, "/d/f")
	for _, c := range []struct {
		what string
		op   func() error
	}{
		{"rename", func() error { r.create(r.l, "/d/g"); r.stat("/d"); return r.l.Rename(bg, "/d/g", "/d/h", 0) }},
		{"setxattr", func() error { return r.l.Setxattr(bg, "/d", "user.x", []byte("1"), 0) }},
	} {
		r.stat("/d")
		r.ok(c.op())
		if _, asked := r.stat("/d"); !asked {
			t.Errorf("after %s: the directory was answered from memory", c.what)
		}
	}
	_, err = r.l.Setattr(bg, "/d", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o700})
	r.ok(err)
	a, asked := r.stat("/d")
	if asked || a.Mode&0o777 != 0o700 {
		t.Errorf("after a chmod: mode %o, asked %v; want 700 from memory", a.Mode&0o777, asked)
	}
}

// A directory changed by another client is seen as it was for the
// timeout, and at once when the change is told (Forget).
func TestOthersChanges(t *testing.T) {
	r := newRig(t)
	_, err := r.l.Mkdir(bg, "/d", mkdirIn())
	r.ok(err)
	r.stat("/d")
	_, err = r.under.Setattr(bg, "/d", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o700}) // another client
	r.ok(err)
	if a, _ := r.stat("/d"); a.Mode&0o777 != 0o755 {
		t.Fatalf("within the timeout: mode %o, want the kept 755 (the documented bound)", a.Mode&0o777)
	}
	r.l.Forget(layer.Change{Path: "/d"})
	if a, asked := r.stat("/d"); !asked || a.Mode&0o777 != 0o700 {
		t.Fatalf("after the change was told: mode %o, asked %v", a.Mode&0o777, asked)
	}
	r.create(r.under, "/d/x")
	r.l.Forget(layer.Change{Path: "/d/x", Entry: true})
	if _, asked := r.stat("/d"); !asked {
		t.Fatal("after a name made elsewhere was told, the directory was answered from memory")
	}
	r.l.Forget(layer.ChangedAll)
	if _, asked := r.stat("/d"); !asked {
		t.Fatal("after ChangedAll, the directory was answered from memory")
	}
}

func TestConformance(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer { return New(testbrick.NewStore(t, testVolume), Options{}) })
}

// slowRmdir is a child whose Rmdir, once armed, removes the directory and
// then waits to be let go before it answers.
type slowRmdir struct {
	layer.Layer
	armed   atomic.Bool
	removed chan struct{}
	letGo   chan struct{}
}

func (b *slowRmdir) Rmdir(ctx context.Context, path string) error {
	err := b.Layer.Rmdir(ctx, path)
	if b.armed.CompareAndSwap(true, false) {
		b.removed <- struct{}{}
		<-b.letGo
	}
	return err
}

// A lookup that overlaps a change through the layer is not kept: it may
// see the directory after the change, which the layer then applies
// itself (an rmdir's link taken away twice).
func TestLookupOverlappingAChangeNotKept(t *testing.T) {
	s := testbrick.NewStore(t, testVolume)
	b := &slowRmdir{Layer: s, removed: make(chan struct{}), letGo: make(chan struct{})}
	l := New(b, Options{Timeout: time.Minute})
	for _, p := range []string{"/d", "/d/s", "/d/t"} {
		if _, err := l.Mkdir(bg, p, mkdirIn()); err != nil {
			t.Fatal(err)
		}
	}
	b.armed.Store(true)
	rmdone := make(chan error, 1)
	go func() { rmdone <- l.Rmdir(bg, "/d/s") }()
	<-b.removed                                   // removed on the brick, not answered yet
	if _, err := l.Lookup(bg, "/d"); err != nil { // sees nlink 3
		t.Fatal(err)
	}
	close(b.letGo)
	if err := <-rmdone; err != nil {
		t.Fatal(err)
	}
	got, err := l.Lookup(bg, "/d")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := s.Lookup(bg, "/d")
	if got.Nlink != want.Nlink {
		t.Fatalf("nlink %d after a lookup overlapped an rmdir, the brick has %d", got.Nlink, want.Nlink)
	}
}
