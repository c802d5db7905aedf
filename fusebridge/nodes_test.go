package fusebridge

import (
	"errors"
	"fmt"
	"github.com/mortarfs/mortar/internal/kernelcache"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
)

func attrOf(g layer.Gfid, mode uint32) *layer.Attr {
	return &layer.Attr{Gfid: g, Mode: mode}
}

func wantPath(t *testing.T, tb *table, n *node, want string) {
	t.Helper()
	tb.mu.Lock()
	got, err := tb.pathLocked(n)
	tb.mu.Unlock()
	if want == "" {
		if !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("path of node %d: %q, %v; want ENOENT", n.ino, got, err)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("path of node %d: %q, %v; want %q", n.ino, got, err, want)
	}
}

func TestTable(t *testing.T) {
	tb := newTable()
	root := tb.root
	add := func(dir *node, name string, g layer.Gfid, mode uint32) *node {
		t.Helper()
		n, err := tb.addEntry(dir, name, attrOf(g, mode))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	dg, fg := layer.NewGfid(), layer.NewGfid()
	d := add(root, "d", dg, syscall.S_IFDIR)
	f := add(d, "f", fg, syscall.S_IFREG)
	wantPath(t, tb, f, "/d/f")
	if f.ino != fg.Ino() || d.lookups != 1 || f.lookups != 1 {
		t.Fatalf("ino %d lookups %d %d", f.ino, d.lookups, f.lookups)
	}
	// Hard link: same node, the newest name first.
	if add(root, "link", fg, syscall.S_IFREG) != f || f.lookups != 2 {
		t.Fatal("hard link is another node")
	}
	wantPath(t, tb, f, "/link")
	tb.unlink(root, "link")
	wantPath(t, tb, f, "/d/f")

	// The kernel forgets d while f is still held: d stays as f's parent.
	tb.forget(d.ino, 1)
	if tb.get(d.ino) != d {
		t.Fatal("parent dropped while a child is held")
	}
	// Rename the parent: the child's path follows.
	e := add(root, "e", layer.NewGfid(), syscall.S_IFDIR)
	tb.rename(root, "d", e, "d2")
	wantPath(t, tb, f, "/e/d2/f")

	// Rename over an existing name drops the old target's name.
	g := add(e, "g", layer.NewGfid(), syscall.S_IFREG)
	tb.rename(d, "f", e, "g")
	wantPath(t, tb, f, "/e/g")
	wantPath(t, tb, g, "")
	// With nothing under it and no lookups, d went away.
	if tb.get(d.ino) != nil {
		t.Fatal("unreferenced parent kept")
	}
	// A replaced entry: the same name now holds another gfid.
	h := add(e, "g", layer.NewGfid(), syscall.S_IFREG)
	wantPath(t, tb, h, "/e/g")
	wantPath(t, tb, f, "")

	// Forgetting everything leaves only the root.
	for _, n := range []*node{f, g, h, e} {
		tb.forget(n.ino, n.lookups)
	}
	if len(tb.nodes) != 1 {
		t.Fatalf("%d nodes left", len(tb.nodes))
	}
	// Open handles keep an unlinked node.
	k := add(root, "k", layer.NewGfid(), syscall.S_IFREG)
	tb.setOpen(k, 1)
	tb.unlink(root, "k")
	tb.forget(k.ino, 1)
	if tb.get(k.ino) != k {
		t.Fatal("open node dropped")
	}
	tb.setOpen(k, -1)
	if tb.get(k.ino) != nil || len(tb.nodes) != 1 {
		t.Fatal("closed node kept")
	}
	// A gfid clash on the inode number is refused.
	var a, b layer.Gfid
	a[0], b[8] = 5, 5
	add(root, "a", a, syscall.S_IFREG)
	if _, err := tb.addEntry(root, "b", attrOf(b, syscall.S_IFREG)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("clash: %v", err)
	}
}

// dropCaches makes the kernel forget unused dentries and inodes, so that it
// sends FORGET for them. Every mount's: the test holds the kernel caches
// exclusively (kernelcache), so that no test relying on them runs then.
func dropCaches(t *testing.T) {
	t.Helper()
	if !kernelcache.Drop() {
		t.Skip("drop caches: not permitted")
	}
}

// waitForNodes waits until the bridge's table holds want nodes.
func waitForNodes(t *testing.T, fs *bridge, want int) {
	t.Helper()
	kernelcache.Exclusive(t)
	var got int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		dropCaches(t)
		fs.nodes.mu.Lock()
		got = len(fs.nodes.nodes)
		fs.nodes.mu.Unlock()
		if got == want {
			return
		}
	}
	t.Fatalf("%d nodes in the table, want %d", got, want)
}

// TestForget checks that the bridge counts lookups as the kernel does: once
// the kernel has forgotten everything, only the root is left, and a node
// the kernel holds (an open file) keeps its ancestors.
func TestForget(t *testing.T) {
	needFuse(t)
	fs, mnt := mountBridge(t, newStore(t), Options{})
	for i := range 5 {
		d := filepath.Join(mnt, fmt.Sprintf("d%d", i), "sub")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range 40 {
			p := filepath.Join(d, fmt.Sprintf("f%d", j))
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if j%10 == 0 {
				if err := os.Link(p, filepath.Join(mnt, fmt.Sprintf("link%d-%d", i, j))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// readdirplus (ls -lR) and lookups.
	err := filepath.Walk(mnt, func(p string, info os.FileInfo, err error) error { return err })
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, "d1"), filepath.Join(mnt, "d0", "d1")); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(filepath.Join(mnt, "d0", "d1", "sub", "f3"))
	if err != nil {
		t.Fatal(err)
	}
	waitForNodes(t, fs, 5) // root, d0, d1, sub, f3
	held.Close()
	waitForNodes(t, fs, 1)
}

// TestConcurrentNamespace runs creates, renames, unlinks, lookups and
// listings in parallel on a few directories and then checks that the
// kernel and the bridge agree on what is known.
func TestConcurrentNamespace(t *testing.T) {
	needFuse(t)
	fs, mnt := mountBridge(t, newStore(t), Options{})
	dirs := []string{"a", "b", "c"}
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(mnt, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	stop := time.Now().Add(2 * time.Second)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			pick := func() string {
				return filepath.Join(mnt, dirs[r.IntN(len(dirs))], fmt.Sprintf("n%d", r.IntN(20)))
			}
			for time.Now().Before(stop) {
				var err error
				switch r.IntN(6) {
				case 0:
					err = os.WriteFile(pick(), []byte("x"), 0o644)
				case 1:
					err = os.Rename(pick(), pick())
				case 2:
					err = os.Remove(pick())
				case 3:
					_, err = os.Stat(pick())
				case 4:
					_, err = os.ReadDir(filepath.Dir(pick()))
				case 5:
					err = os.Link(pick(), pick())
				}
				if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrExist) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every name the kernel can see resolves to what the storage holds.
	for _, d := range dirs {
		ents, err := os.ReadDir(filepath.Join(mnt, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if _, err := os.ReadFile(filepath.Join(mnt, d, e.Name())); err != nil {
				t.Errorf("%s/%s: %v", d, e.Name(), err)
			}
		}
	}
	waitForNodes(t, fs, 1)
}

// TestListingAfterWrite: a listing taken before a write must not give the
// kernel the file's old size when it is served later (readdirplus in
// several requests).
func TestListingAfterWrite(t *testing.T) {
	needFuse(t)
	mnt := mount(t, newStore(t), Options{AttrTimeout: 10 * time.Second, EntryTimeout: 10 * time.Second})
	var last string
	for i := range 200 {
		last = filepath.Join(mnt, fmt.Sprintf("file-%03d", i))
		if err := os.WriteFile(last, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dfd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	buf := make([]byte, 512)
	if _, err := unix.Getdents(dfd, buf); err != nil { // takes the listing
		t.Fatal(err)
	}
	if err := os.WriteFile(last, make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	for {
		n, err := unix.Getdents(dfd, buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if st, err := os.Stat(last); err != nil || st.Size() != 1000 {
		t.Fatalf("size after listing: %v, %v; want 1000", st.Size(), err)
	}
}

// walk finds the node of a path and of its directory as far as the
// kernel knows them: a directory that holds no known name yet is still
// found as the directory of a name in it (a change notice for a name made
// there must reach the directory's attributes).
func TestWalk(t *testing.T) {
	tb := newTable()
	d, err := tb.addEntry(tb.root, "d", attrOf(layer.NewGfid(), syscall.S_IFDIR))
	if err != nil {
		t.Fatal(err)
	}
	f, err := tb.addEntry(d, "f", attrOf(layer.NewGfid(), syscall.S_IFREG))
	if err != nil {
		t.Fatal(err)
	}
	e, err := tb.addEntry(tb.root, "e", attrOf(layer.NewGfid(), syscall.S_IFDIR))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path      string
		dir, node *node
	}{
		{"/", nil, tb.root},
		{"/d", tb.root, d},
		{"/d/f", d, f},
		{"/d/new", d, nil},
		{"/e/new", e, nil}, // e has no known names
		{"/x/y", nil, nil},
		{"/d/f/z", f, nil},
	} {
		if dir, n := tb.walk(c.path); dir != c.dir || n != c.node {
			t.Errorf("walk %s: dir %v node %v, want %v %v", c.path, dir, n, c.dir, c.node)
		}
	}
}

// A symlink listed with its target (readdirplus, layer.Entry.Target) is
// read from its node: READLINK costs no round trip, even after the kernel
// forgot everything and listed again.
func TestSymlinkTargetFromListing(t *testing.T) {
	needFuse(t)
	count := layertest.NewCounting(newStore(t))
	fs, mnt := mountBridge(t, count, Options{})
	for i := range 5 {
		if err := os.Symlink(fmt.Sprint("target-", i), filepath.Join(mnt, fmt.Sprint("l", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitForNodes(t, fs, 1)
	if _, err := os.ReadDir(mnt); err != nil {
		t.Fatal(err)
	}
	before := count.Count("Readlink")
	for i := range 5 {
		if got, err := os.Readlink(filepath.Join(mnt, fmt.Sprint("l", i))); err != nil || got != fmt.Sprint("target-", i) {
			t.Fatalf("readlink l%d: %q, %v", i, got, err)
		}
	}
	if n := count.Count("Readlink") - before; n != 0 {
		t.Fatalf("%d readlinks reached the layers after a listing brought the targets", n)
	}
}
