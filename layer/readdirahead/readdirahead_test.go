package readdirahead

import (
	"context"
	"fmt"
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

// gate holds the next listing of one directory until opened, before or
// after the child lists it.
type gate struct {
	layer.Base
	mu      sync.Mutex
	asked   map[string]int // listings of each directory
	path    string
	after   bool
	entered chan struct{}
	open    chan struct{}
}

// hold makes the next listing of path wait, before the child lists it
// (after: once it has), until the returned function is called; entered
// is closed when it waits.
func (g *gate) hold(path string, after bool) (entered <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.path, g.after, g.entered, g.open = path, after, make(chan struct{}), make(chan struct{})
	open := g.open
	return g.entered, func() { close(open) }
}

func (g *gate) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	g.mu.Lock()
	if g.asked == nil {
		g.asked = map[string]int{}
	}
	g.asked[path]++
	held, after := path == g.path, g.after
	entered, open := g.entered, g.open
	if held {
		g.path = ""
	}
	g.mu.Unlock()
	wait := func() {
		if held {
			close(entered)
			<-open
		}
	}
	if !after {
		wait()
	}
	page, err := g.Child.Readdir(ctx, path, cookie, max)
	if after {
		wait()
	}
	return page, err
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

// kept is the count of entries the layer holds in listings read ahead,
// which must be what its kept listings hold.
func (r *rig) kept() int {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	n := 0
	for _, p := range r.l.ahead {
		if p.ok {
			n += len(p.page.Entries)
		}
	}
	if n != r.l.entries {
		r.t.Fatalf("the layer counts %d entries read ahead; its listings hold %d", r.l.entries, n)
	}
	return n
}

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
	r.list("/t/c")
	r.settle()
	if n := r.kept(); n != 0 { // /t/a/x and /t/a/y, read ahead when /t/a was listed, are empty
		t.Fatalf("%d entries kept, want 0", n)
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
		{"rename of a directory", "/t/c", func(r *rig) { r.ok(r.l.Rename(bg, "/t/a", "/t/c/a", 0)) }, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.walkTree()
			tc.do(r)
			dir := tc.dir
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
	r.list("/t/a") // reads /t/a/x and /t/a/y ahead
	r.settle()
	r.ok(r.l.Rename(bg, "/t", "/u", 0))
	// Another client makes the tree anew: the layer is not told.
	r.mkdirs(r.under, "/t", "/t/a", "/t/a/x")
	r.ok(r.create(r.under, "/t/a/x/new").Release(bg))
	if names, went := r.list("/t/a/x"); !went || !slices.Equal(names, []string{"new"}) {
		t.Fatalf("/t/a/x after the tree it was read ahead in was renamed away: %v (asked: %v)", names, went)
	}
}

// A name made in a directory changes the directory's times and link
// count, which its parent's listing shows: that listing goes too.
func TestChangeForgetsTheListingAbove(t *testing.T) {
	r := newRig(t)
	r.mkdirs(r.under, "/s", "/t", "/t/a")
	r.list("/")
	r.list("/s") // reads /t ahead, a sibling
	r.settle()
	r.mkdirs(r.l, "/t/a/z")
	page, went := r.listPage("/t")
	if !went || len(page.Entries) != 1 || page.Entries[0].Attr.Nlink != 3 {
		t.Fatalf("/t after a mkdir in /t/a: %+v (asked: %v), want /t/a with 3 links from the child", page.Entries, went)
	}
}

// Listings read ahead that nobody takes are dropped once too old: they
// neither stay nor block the next walk.
func TestUntakenListingsExpire(t *testing.T) {
	r := newRig(t)
	r.walkTree()
	if r.kept() == 0 {
		t.Fatal("nothing read ahead")
	}
	r.clock.Advance(2 * time.Second)
	r.list("/")
	r.list("/t")
	r.settle()
	if n := r.asked("/t/b"); n != 2 {
		t.Fatalf("/t/b listed %d times by the child, want twice (read ahead again after the first expired)", n)
	}
	if _, went := r.list("/t/b"); went {
		t.Fatal("/t/b not served from its second listing read ahead")
	}
}

// A write through an open file changes its size in its directory's
// listing: every listing read ahead is forgotten.
func TestWriteForgetsListings(t *testing.T) {
	r := newRig(t)
	r.mkdirs(r.under, "/t", "/t/b")
	r.ok(r.create(r.under, "/t/b/f").Release(bg))
	f, err := r.l.Open(bg, "/t/b/f", syscall.O_WRONLY)
	r.ok(err)
	defer f.Release(bg)
	r.list("/")
	r.list("/t") // reads /t/b ahead, after the open
	r.settle()
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
	entered, release := r.gate.hold("/t/a", true) // listed before the create, delivered after
	r.list("/")
	r.list("/t")
	<-entered
	r.ok(r.create(r.l, "/t/a/n").Release(bg))
	release()
	names, went := r.list("/t/a")
	if !went || !slices.Equal(names, []string{"d", "n"}) {
		t.Fatalf("/t/a: %v (asked the child: %v), want [d n] from the child", names, went)
	}
	r.kept()
}

// A listing under way when asked for is waited for and served.
func TestListingUnderWayIsWaitedFor(t *testing.T) {
	r := newRig(t)
	r.mkdirs(r.under, "/t", "/t/a", "/t/a/d")
	entered, release := r.gate.hold("/t/a", false)
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
	if n := r.asked("/t/a"); n != 1 { // whether the listing waited or found it done
		t.Fatalf("child listed /t/a %d times, want once", n)
	}
	r.settle()
	r.kept()
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

// Walks going on all the time (reading ahead) while one goroutine makes
// and removes names through the layer: a listing after each change shows
// it, whatever was read ahead before or during the change.
func TestOwnChangesUnderConcurrentWalks(t *testing.T) {
	s := testbrick.NewStore(t, testVolume)
	l := New(s, Options{Timeout: time.Minute}) // listings never expire here
	t.Cleanup(l.Close)
	dirs := []string{"/w", "/w/a", "/w/b", "/w/c", "/w/a/x", "/w/a/y", "/w/b/z"}
	for _, d := range dirs {
		if _, err := s.Mkdir(bg, d, layer.MkdirIn{Mode: 0o755, Owner: layer.Owner{Gfid: layer.NewGfid()}}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	var walkers sync.WaitGroup
	for range 2 {
		walkers.Add(1)
		go func() {
			defer walkers.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				for _, d := range append([]string{"/"}, dirs...) {
					if _, err := l.Readdir(bg, d, 0, 0); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	t.Cleanup(func() { // before the layer and the store close
		close(done)
		walkers.Wait()
	})
	has := func(dir, name string) bool {
		page, err := l.Readdir(bg, dir, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(page.Entries, func(e layer.Entry) bool { return e.Name == name })
	}
	for i := range 300 {
		dir := dirs[i%len(dirs)]
		name := fmt.Sprint("f", i)
		p := layer.Join(dir, name)
		f, _, err := l.Create(bg, p, layer.CreateIn{Mode: 0o644, Flags: syscall.O_RDWR | syscall.O_EXCL, Owner: layer.Owner{Gfid: layer.NewGfid()}})
		if err != nil {
			t.Fatal(err)
		}
		f.Release(bg)
		if !has(dir, name) {
			t.Fatalf("step %d: %s lacks %s, just made through the layer", i, dir, name)
		}
		if err := l.Unlink(bg, p); err != nil {
			t.Fatal(err)
		}
		if has(dir, name) {
			t.Fatalf("step %d: %s lists %s, just removed through the layer", i, dir, name)
		}
	}
}
