package readdirahead

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
)

const testVolume = "vol-readdirahead-test"

var bg = context.Background()

// rig is the layer over a brick in a temporary directory, reached through
// a gate that can hold listings and a counter of the operations that get
// past the layer.
type rig struct {
	t     *testing.T
	under layer.Layer // the brick, as another client reaches it
	count *layertest.Counting
	gate  *gate
	clock *layertest.Clock
	l     *Layer
}

func newRig(t *testing.T) *rig {
	s := testbrick.NewStore(t, testVolume)
	r := &rig{t: t, under: s, clock: layertest.NewClock()}
	r.count = layertest.NewCounting(s)
	r.gate = &gate{Base: layer.Base{Child: r.count}}
	r.l = New(r.gate, Options{Timeout: time.Second, Now: r.clock.Now})
	t.Cleanup(r.l.Close)
	return r
}

// gate holds the listings of one directory until opened.
type gate struct {
	layer.Base
	mu      sync.Mutex
	asked   map[string]int // listings of each directory
	path    string
	entered chan struct{}
	open    chan struct{}
}

// hold makes listings of path wait until the returned function is called;
// entered is closed when one is waiting.
func (g *gate) hold(path string) (entered <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.path, g.entered, g.open = path, make(chan struct{}), make(chan struct{})
	open := g.open
	return g.entered, func() { close(open) }
}

func (g *gate) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	g.mu.Lock()
	if g.asked == nil {
		g.asked = map[string]int{}
	}
	g.asked[path]++
	held := path == g.path
	entered, open := g.entered, g.open
	if held {
		g.path = ""
	}
	g.mu.Unlock()
	if held {
		close(entered)
		<-open
	}
	return g.Child.Readdir(ctx, path, cookie, max)
}

func (r *rig) ok(err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) mkdirs(l layer.Layer, paths ...string) {
	r.t.Helper()
	for _, p := range paths {
		_, err := l.Mkdir(bg, p, layer.MkdirIn{Mode: 0o755, Owner: layer.Owner{Gfid: layer.NewGfid()}})
		r.ok(err)
	}
}

func (r *rig) create(l layer.Layer, path string) layer.File {
	r.t.Helper()
	f, _, err := l.Create(bg, path, layer.CreateIn{Mode: 0o644, Flags: syscall.O_RDWR | syscall.O_EXCL, Owner: layer.Owner{Gfid: layer.NewGfid()}})
	r.ok(err)
	return f
}

// asked is how many times the child listed path.
func (r *rig) asked(path string) int {
	r.gate.mu.Lock()
	defer r.gate.mu.Unlock()
	return r.gate.asked[path]
}

// list lists path through the layer and reports its names and whether
// the child was asked.
func (r *rig) list(path string) ([]string, bool) {
	r.t.Helper()
	page, went := r.listPage(path)
	var names []string
	for _, e := range page.Entries {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	return names, went
}

// listPage lists path through the layer and reports whether the child
// was asked.
func (r *rig) listPage(path string) (layer.DirPage, bool) {
	r.t.Helper()
	before := r.asked(path)
	page, err := r.l.Readdir(bg, path, 0, 0)
	r.ok(err)
	return page, r.asked(path) > before
}

// settle waits for the listings read ahead to end.
func (r *rig) settle() { r.l.wg.Wait() }

// walkTree makes /t/{a,b,c}, /t/a/{x,y} and a file /t/b/f, then lists
// / and /t, as a walk does: /t's subdirectories are read ahead.
func (r *rig) walkTree() {
	r.t.Helper()
	r.mkdirs(r.under, "/t", "/t/a", "/t/b", "/t/c", "/t/a/x", "/t/a/y")
	r.ok(r.create(r.under, "/t/b/f").Release(bg))
	r.list("/")
	r.list("/t")
	r.settle()
}

func TestWalkServesListingsReadAhead(t *testing.T) {
	r := newRig(t)
	r.walkTree()
	asked := r.count.Count("Readdir")
	if asked != 2+3 {
		t.Fatalf("child listed %d times, want 5 (/, /t, and /t's three subdirectories ahead)", asked)
	}
	names, went := r.list("/t/a")
	if went || !slices.Equal(names, []string{"x", "y"}) {
		t.Fatalf("/t/a: %v, asked the child: %v; want [x y] from memory", names, went)
	}
	if names, went := r.list("/t/b"); went || !slices.Equal(names, []string{"f"}) {
		t.Fatalf("/t/b: %v, asked the child: %v; want [f] from memory", names, went)
	}
	// Served once: the next listing asks.
	if _, went := r.list("/t/a"); !went {
		t.Fatal("a listing read ahead served twice")
	}
}

func TestNoReadAheadWithoutWalk(t *testing.T) {
	r := newRig(t)
	r.mkdirs(r.under, "/t", "/t/a", "/t/b")
	r.list("/t")
	r.settle()
	if n := r.count.Count("Readdir"); n != 1 {
		t.Fatalf("child listed %d times for one listing of a directory whose parent nobody listed", n)
	}
}

func TestListingReadAheadExpires(t *testing.T) {
	r := newRig(t)
	r.walkTree()
	r.clock.Advance(time.Second)
	if _, went := r.list("/t/a"); !went {
		t.Fatal("a listing read ahead served after the timeout")
	}
}

func TestOwnChangesForgetListings(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  string
		do   func(r *rig)
		want []string
	}{
		{"create", "/t/a", func(r *rig) { r.ok(r.create(r.l, "/t/a/n").Release(bg)) }, []string{"n", "x", "y"}},
		{"mkdir", "/t/a", func(r *rig) { r.mkdirs(r.l, "/t/a/z") }, []string{"x", "y", "z"}},
		{"rmdir", "/t/a", func(r *rig) { r.ok(r.l.Rmdir(bg, "/t/a/x")) }, []string{"y"}},
		{"unlink", "/t/b", func(r *rig) { r.ok(r.l.Unlink(bg, "/t/b/f")) }, nil},
		{"rename in", "/t/c", func(r *rig) { r.ok(r.l.Rename(bg, "/t/b/f", "/t/c/g", 0)) }, []string{"g"}},
		{"rename out", "/t/b", func(r *rig) { r.ok(r.l.Rename(bg, "/t/b/f", "/t/c/g", 0)) }, nil},
		{"rename of the tree", "/t/a", func(r *rig) { r.ok(r.l.Rename(bg, "/t/a", "/t/c/a", 0)) }, []string{"b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.walkTree()
			tc.do(r)
			dir := tc.dir
			if tc.name == "rename of the tree" {
				dir = "/t"
			}
			names, went := r.list(dir)
			if !went || !slices.Equal(names, tc.want) {
				t.Fatalf("%s after %s: %v (asked the child: %v), want %v from the child", dir, tc.name, names, went, tc.want)
			}
		})
	}
}

func TestRenamedTreeForgotten(t *testing.T) {
	r := newRig(t)
	r.walkTree()
	r.ok(r.l.Rename(bg, "/t", "/u", 0))
	r.mkdirs(r.l, "/t", "/t/a")
	r.mkdirs(r.under, "/t/a/new")
	if names, went := r.list("/t/a"); !went || !slices.Equal(names, []string{"new"}) {
		t.Fatalf("/t/a after its tree was renamed away and made anew: %v (asked: %v)", names, went)
	}
}

// A write through an open file changes its size in its directory's
// listing: every listing read ahead is forgotten.
func TestWriteForgetsListings(t *testing.T) {
	r := newRig(t)
	r.walkTree()
	f, err := r.l.Open(bg, "/t/b/f", syscall.O_WRONLY)
	r.ok(err)
	defer f.Release(bg)
	if _, went := r.list("/t/c"); went {
		t.Fatal("an open for writing forgot a listing of another directory")
	}
	_, err = f.Write(bg, []byte("hello"), 0)
	r.ok(err)
	page, went := r.listPage("/t/b")
	if !went || len(page.Entries) != 1 || page.Entries[0].Attr.Size != 5 {
		t.Fatalf("listing after a write: %+v, child asked: %v", page.Entries, went)
	}
}

// A change that ends while its directory is being read ahead makes that
// listing useless, though it may have been taken before the change.
func TestChangeDuringReadAhead(t *testing.T) {
	r := newRig(t)
	r.mkdirs(r.under, "/t", "/t/a", "/t/a/d")
	entered, release := r.gate.hold("/t/a")
	r.list("/")
	r.list("/t")
	<-entered
	r.ok(r.create(r.l, "/t/a/n").Release(bg))
	release()
	names, went := r.list("/t/a")
	if !went || !slices.Equal(names, []string{"d", "n"}) {
		t.Fatalf("/t/a: %v (asked the child: %v), want [d n] from the child", names, went)
	}
}

// A listing under way when asked for is waited for and served.
func TestListingUnderWayIsWaitedFor(t *testing.T) {
	r := newRig(t)
	r.mkdirs(r.under, "/t", "/t/a", "/t/a/d")
	entered, release := r.gate.hold("/t/a")
	r.list("/")
	r.list("/t")
	<-entered
	done := make(chan []string)
	go func() {
		page, err := r.l.Readdir(bg, "/t/a", 0, 0)
		if err != nil || len(page.Entries) != 1 {
			t.Errorf("listing: %+v, %v", page, err)
		}
		done <- nil
	}()
	release()
	<-done
	if n := r.asked("/t/a"); n != 1 {
		t.Fatalf("child listed /t/a %d times, want once", n)
	}
}

func TestForgetTakesNotices(t *testing.T) {
	r := newRig(t)
	r.walkTree()
	r.mkdirs(r.under, "/t/a/z")
	r.l.Forget(layer.Change{Path: "/t/a/z", Entry: true})
	if names, went := r.list("/t/a"); !went || !slices.Equal(names, []string{"x", "y", "z"}) {
		t.Fatalf("/t/a after a notice: %v (asked: %v)", names, went)
	}
	r.l.Forget(layer.ChangedAll)
	if _, went := r.list("/t/b"); !went {
		t.Fatal("a listing served after a notice that anything may have changed")
	}
}

func TestConformance(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer {
		r := newRig(t)
		return r.l
	})
}

// A second walk soon after the first reads ahead again: the listings of
// the first were served once.
func TestSecondWalkReadsAheadAgain(t *testing.T) {
	r := newRig(t)
	r.walkTree()
	r.list("/t/a")
	r.clock.Advance(10 * time.Millisecond)
	r.list("/")
	r.list("/t")
	r.settle()
	if names, went := r.list("/t/a"); went || !slices.Equal(names, []string{"x", "y"}) {
		t.Fatalf("/t/a in a second walk: %v, asked the child: %v; want [x y] from memory", names, went)
	}
}
