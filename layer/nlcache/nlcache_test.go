package nlcache

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
)

const testVolume = "vol-nlcache-test"

var bg = context.Background()

// rig is the layer over a brick in a temporary directory, reached through
// a counter of the operations that get past the layer.
type rig struct {
	t     *testing.T
	under layer.Layer // the child, as another client reaches it
	count *layertest.Counting
	clock *layertest.Clock
	l     *Layer
}

func newStore(t *testing.T) *posix.Store { return testbrick.NewStore(t, testVolume) }

func newRig(t *testing.T, child layer.Layer) *rig {
	t.Helper()
	if child == nil {
		child = newStore(t)
	}
	r := &rig{t: t, under: child, count: layertest.NewCounting(child), clock: layertest.NewClock()}
	r.l = New(r.count, Options{Timeout: time.Second, Now: r.clock.Now})
	return r
}

func (r *rig) mkdir(l layer.Layer, path string) {
	r.t.Helper()
	if _, err := l.Mkdir(bg, path, layer.MkdirIn{Mode: 0o755, Owner: layer.Owner{Gfid: layer.NewGfid()}}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) create(l layer.Layer, path string) {
	r.t.Helper()
	f, _, err := l.Create(bg, path, layer.CreateIn{Mode: 0o644, Flags: syscall.O_RDWR | syscall.O_EXCL, Owner: layer.Owner{Gfid: layer.NewGfid()}})
	if err != nil {
		r.t.Fatal(err)
	}
	f.Release(bg)
}

// lookup looks path up through the layer and reports whether it got past
// the layer.
func (r *rig) lookup(path string) (err error, asked bool) {
	before := r.count.Count("Lookup")
	_, err = r.l.Lookup(bg, path)
	return err, r.count.Count("Lookup") > before
}

// A directory made through the layer has no names but those made since:
// lookups of others fail at once, lookups of those made go to the child.
func TestMadeDirectoryAnswersAbsentNames(t *testing.T) {
	r := newRig(t, nil)
	r.mkdir(r.l, "/d")
	if err, asked := r.lookup("/d/x"); !errors.Is(err, syscall.ENOENT) || asked {
		t.Fatalf("lookup of a name the new directory lacks: %v, asked the child: %v", err, asked)
	}
	r.create(r.l, "/d/x")
	if err, asked := r.lookup("/d/x"); err != nil || !asked {
		t.Fatalf("lookup of a name made through the layer: %v, asked the child: %v", err, asked)
	}
	if err := r.l.Unlink(bg, "/d/x"); err != nil {
		t.Fatal(err)
	}
	if err, asked := r.lookup("/d/x"); !errors.Is(err, syscall.ENOENT) || asked {
		t.Fatalf("lookup of a name removed through the layer: %v, asked: %v", err, asked)
	}
}

// What the layer knows is trusted for Timeout: a name another client made
// is missed until then, seen after; a lookup the bricks answer ENOENT
// then has the directory listed, and lookups are answered again.
func TestOtherClientsNamesAfterTimeout(t *testing.T) {
	r := newRig(t, nil)
	r.mkdir(r.l, "/d")
	r.create(r.under, "/d/other") // another client
	if err, _ := r.lookup("/d/other"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("within the timeout: %v, want ENOENT (the documented bound)", err)
	}
	r.clock.Advance(time.Second)
	if err, asked := r.lookup("/d/other"); err != nil || !asked {
		t.Fatalf("past the timeout: %v, asked %v; want the name found by the child", err, asked)
	}
	if err, asked := r.lookup("/d/none"); !errors.Is(err, syscall.ENOENT) || !asked {
		t.Fatalf("a name no brick has, past the timeout: %v, asked %v", err, asked)
	}
	if r.count.Count("Readdir") == 0 {
		t.Fatal("the directory was not listed after a lookup the child answered ENOENT")
	}
	if err, asked := r.lookup("/d/none2"); !errors.Is(err, syscall.ENOENT) || asked {
		t.Fatalf("after the listing: %v, asked %v; want ENOENT at once", err, asked)
	}
	if err, asked := r.lookup("/d/other"); err != nil || !asked {
		t.Fatalf("a listed name: %v, asked %v", err, asked)
	}
}

// lateCreate is a child whose listings are overtaken by a create through
// the layer: the page it returns was read before the create.
type lateCreate struct {
	layer.Layer
	create func()
	once   sync.Once
}

func (c *lateCreate) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	page, err := c.Layer.Readdir(ctx, path, cookie, max)
	c.once.Do(c.create)
	return page, err
}

// A listing that an operation of the layer on the directory overtook is
// not used: it may lack the name just made.
func TestListingOvertakenIsNotUsed(t *testing.T) {
	store := newStore(t)
	late := &lateCreate{Layer: store}
	r := newRig(t, late)
	late.create = func() { r.create(r.l, "/new") }
	if err, _ := r.lookup("/none"); !errors.Is(err, syscall.ENOENT) {
		t.Fatal(err)
	}
	if err, _ := r.lookup("/new"); err != nil {
		t.Fatalf("a name made while the directory was listed: %v", err)
	}
}

// Renaming or removing a directory forgets what was known below it.
func TestRenameForgetsTheTree(t *testing.T) {
	r := newRig(t, nil)
	r.mkdir(r.l, "/a")
	r.mkdir(r.l, "/a/b")
	if err := r.l.Rename(bg, "/a", "/c", 0); err != nil {
		t.Fatal(err)
	}
	r.create(r.under, "/c/b/x")
	if err, asked := r.lookup("/c/b/x"); err != nil || !asked {
		t.Fatalf("a name in a renamed directory: %v, asked %v", err, asked)
	}
	r.mkdir(r.l, "/a")
	if err, asked := r.lookup("/c/x"); !errors.Is(err, syscall.ENOENT) || !asked {
		t.Fatalf("/c was renamed to, so unknown: %v, asked %v", err, asked)
	}
}

// Past MaxNames a directory is not kept, and not listed again, even once
// its record is evicted.
func TestBigDirectoryNotKept(t *testing.T) {
	r := newRig(t, nil)
	r.l.opts.MaxNames = 3
	for _, n := range []string{"/a", "/b", "/c", "/d"} {
		r.create(r.under, n)
	}
	for i := range 3 {
		if err, asked := r.lookup("/none"); !errors.Is(err, syscall.ENOENT) || !asked {
			t.Fatalf("a directory of more than MaxNames names: %v, asked %v", err, asked)
		}
		if i == 1 {
			r.l.mu.Lock()
			clear(r.l.dirs) // evicted
			r.l.mu.Unlock()
		}
	}
	if n := r.count.Count("Readdir"); n != 1 {
		t.Fatalf("the big directory was listed %d times, want once", n)
	}
}

// The whole contract holds with the layer on top.
func TestConformance(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer { return New(newStore(t), Options{}) })
}

// A change another client made, told (Forget), is seen at once: a name
// made there is asked of the child although the directory is known and
// fresh; a renamed directory's names are forgotten; ChangedAll forgets
// every directory.
func TestForgetTakesOthersChangesAtOnce(t *testing.T) {
	r := newRig(t, nil)
	r.mkdir(r.l, "/d")
	r.mkdir(r.l, "/d/sub")
	r.create(r.under, "/d/other") // another client
	r.l.Forget(layer.Change{Path: "/d/other", Entry: true})
	if err, asked := r.lookup("/d/other"); err != nil || !asked {
		t.Fatalf("a name another client made, told: %v, asked %v; want found by the child", err, asked)
	}
	if err, asked := r.lookup("/d/none"); !errors.Is(err, syscall.ENOENT) || asked {
		t.Fatalf("other names of the directory: %v, asked %v; want still answered", err, asked)
	}
	r.l.Forget(layer.Change{Path: "/d/sub", Entry: true}) // replaced by another client
	if _, asked := r.lookup("/d/sub/x"); !asked {
		t.Fatal("a name in a directory renamed onto was answered from what the layer knew")
	}
	r.l.Forget(layer.Change{Path: "/d/none"}) // an inode change: no names
	if err, asked := r.lookup("/d/none"); !errors.Is(err, syscall.ENOENT) || asked {
		t.Fatalf("after an inode change: %v, asked %v; want still answered", err, asked)
	}
	r.l.Forget(layer.ChangedAll)
	if _, asked := r.lookup("/d/none"); !asked {
		t.Fatal("after ChangedAll a name was answered from what the layer knew")
	}
}
