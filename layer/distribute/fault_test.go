package distribute

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
)

// layerOps names every layer.Layer operation, as Fault and Counting do.
var layerOps = []string{"Lookup", "Setattr", "Mknod", "Mkdir", "Symlink", "Readlink", "Unlink",
	"Rmdir", "Rename", "Link", "Create", "Open", "Readdir", "Statfs", "Getxattr", "Setxattr",
	"Listxattr", "Removexattr"}

// faultRig is a rig whose children are wrapped in layertest.Fault.
func faultRig(t *testing.T, n int) (*rig, []*layertest.Fault) {
	faults := make([]*layertest.Fault, n)
	r := newRig(t, n, func(i int, l layer.Layer) layer.Layer {
		faults[i] = layertest.NewFault(l)
		return faults[i]
	})
	return r, faults
}

// down makes every operation of f fail with ENOTCONN, like a brick whose
// connection is gone.
func down(f *layertest.Fault) {
	for _, op := range layerOps {
		f.Fail(op, syscall.ENOTCONN)
	}
}

func TestMissingNameTouchesOneChild(t *testing.T) {
	counts := make([]*layertest.Counting, 5)
	r := newRig(t, 5, func(i int, l layer.Layer) layer.Layer {
		counts[i] = layertest.NewCounting(l)
		return counts[i]
	})
	_, err := r.d.Mkdir(r.ctx, "/dir", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	total := func() (n int) {
		for _, c := range counts {
			n += c.Total()
		}
		return n
	}
	reset := func() {
		for _, c := range counts {
			c.Reset()
		}
	}
	for _, p := range []string{"/missing", "/dir/missing", "/dir/other"} {
		reset()
		_, err := r.d.Lookup(r.ctx, p)
		r.errno(err, syscall.ENOENT, "lookup "+p)
		if n := total(); n != 1 {
			t.Errorf("lookup of missing %s made %d calls, want 1", p, n)
		}
		if h := r.hashed(p); counts[h].Count("Lookup") != 1 {
			t.Errorf("lookup of missing %s did not go to its hashed child", p)
		}
	}
	// A new file costs one call; a file behind a pointer two lookups.
	a, b := r.name("/dir", "a", 1), r.name("/dir", "b", 3)
	reset()
	r.write(a, "x")
	if n := counts[1].Count("Create"); n != 1 || total() != 3 { // Create, Write, Release
		t.Errorf("create: %d creates, %d calls", n, total())
	}
	r.ok(r.d.Rename(r.ctx, a, b, 0), "rename")
	reset()
	_, err = r.d.Lookup(r.ctx, b)
	r.ok(err, "lookup via pointer")
	if counts[3].Count("Lookup") != 1 || counts[1].Count("Lookup") != 1 || total() != 2 {
		t.Errorf("lookup via pointer made %d calls", total())
	}
	// Opening a file on its hashed child is one call; through a pointer,
	// the refused open, the lookups and the open where the data is.
	c := r.name("/dir", "c", 2)
	r.write(c, "y")
	reset()
	f, err := r.d.Open(r.ctx, c, syscall.O_RDONLY)
	r.ok(err, "open")
	f.Release(r.ctx)
	if n := total(); n != 2 || counts[2].Count("Open") != 1 { // Open, Release
		t.Errorf("open on the hashed child made %d calls", n)
	}
	reset()
	f, err = r.d.Open(r.ctx, b, syscall.O_RDONLY)
	r.ok(err, "open via pointer")
	f.Release(r.ctx)
	if counts[3].Count("Open") != 1 || counts[1].Count("Open") != 1 {
		t.Errorf("open via pointer: %d opens on the hashed child, %d where the data is",
			counts[3].Count("Open"), counts[1].Count("Open"))
	}
	if got := r.read(b); got != "x" {
		t.Errorf("read via pointer: %q", got)
	}
	// Setattr likewise: one call on the hashed child; through a pointer the
	// change lands on the data, not on the pointer.
	reset()
	_, err = r.d.Setattr(r.ctx, c, layer.SetattrIn{Valid: layer.SetMode, Mode: 0o600})
	r.ok(err, "chmod")
	if n := total(); n != 1 {
		t.Errorf("chmod on the hashed child made %d calls", n)
	}
	a2, err := r.d.Setattr(r.ctx, b, layer.SetattrIn{Valid: layer.SetMode, Mode: 0o640})
	r.ok(err, "chmod via pointer")
	if a2.Mode&0o7777 != 0o640 || a2.Linkto != "" {
		t.Errorf("chmod via pointer: mode %#o linkto %q", a2.Mode, a2.Linkto)
	}
	if la, _ := r.d.Lookup(r.ctx, b); la.Mode&0o7777 != 0o640 {
		t.Errorf("after chmod via pointer, lookup says %#o", la.Mode)
	}
}

// slow delays Readdir, to show that children are listed concurrently.
type slow struct {
	layer.Base
	delay time.Duration
}

func (s slow) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	time.Sleep(s.delay)
	return s.Base.Readdir(ctx, path, cookie, max)
}

func TestReaddirParallel(t *testing.T) {
	const delay = 100 * time.Millisecond
	r := newRig(t, 5, func(i int, l layer.Layer) layer.Layer {
		return slow{Base: layer.Base{Child: l}, delay: delay}
	})
	for i := range 5 {
		r.write(r.name("/", "f", i), "x")
	}
	start := time.Now()
	if names := r.names("/"); len(names) != 5 {
		t.Fatalf("readdir: %v", names)
	}
	if took := time.Since(start); took > 3*delay {
		t.Errorf("readdir of 5 children took %v; sequential would be %v", took, 5*delay)
	}
}

func TestChildDown(t *testing.T) {
	r, faults := faultRig(t, 3)
	_, err := r.d.Mkdir(r.ctx, "/d", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	f0, f1 := r.name("/d", "f", 0), r.name("/d", "g", 1)
	r.write(f0, "zero")
	r.write(f1, "one")
	down(faults[2])

	// Names on healthy children still work.
	if got := r.read(f0); got != "zero" {
		t.Errorf("read: %q", got)
	}
	r.ok(r.d.Rename(r.ctx, f1, r.name("/d", "h", 0), 0), "rename between healthy children")
	_, err = r.d.Lookup(r.ctx, r.name("/d", "x", 0))
	r.errno(err, syscall.ENOENT, "missing name on a healthy child")
	_, err = r.d.Lookup(r.ctx, r.name("/d", "x", 2))
	r.errno(err, syscall.ENOTCONN, "name on the dead child")

	// A listing shows what the healthy children hold and says what it
	// lacks; ReadDirAll, for callers that need every name, fails.
	page, err := r.d.Readdir(r.ctx, "/d", 0, 100)
	r.ok(err, "readdir")
	if len(page.Entries) != 2 || !errors.Is(page.Missing, syscall.ENOTCONN) {
		t.Errorf("readdir with a child down: %d entries, missing %v; want 2 and ENOTCONN", len(page.Entries), page.Missing)
	}
	_, err = layer.ReadDirAll(r.ctx, r.d, "/d")
	r.errno(err, syscall.ENOTCONN, "ReadDirAll")

	// Operations that need every child fail cleanly.
	_, err = r.d.Statfs(r.ctx, "/")
	r.errno(err, syscall.ENOTCONN, "statfs")
	for _, p := range []string{r.name("/", "m", 0), r.name("/", "m", 2)} {
		_, err = r.d.Mkdir(r.ctx, p, layer.MkdirIn{Mode: 0o755})
		r.errno(err, syscall.ENOTCONN, "mkdir "+p)
		r.wantDisk(p, "", "", "")
	}
	r.errno(r.d.Rmdir(r.ctx, "/d"), syscall.ENOTCONN, "rmdir")
	r.wantDisk("/d", "dir", "dir", "dir")
	faults[2].Clear()
	if names := r.names("/d"); len(names) != 2 {
		t.Errorf("after recovery: %v", names)
	}
}

// TestFaultRollback: when one child refuses partway, the others are put
// back as they were.
func TestFaultRollback(t *testing.T) {
	r, faults := faultRig(t, 3)
	empty, err := r.d.Mkdir(r.ctx, "/empty", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	other := (r.hashed("/empty") + 1) % 3

	// Rmdir: removed elsewhere, refused on one non-hashed child.
	faults[other].Fail("Rmdir", syscall.EIO)
	r.errno(r.d.Rmdir(r.ctx, "/empty"), syscall.EIO, "rmdir")
	r.wantDisk("/empty", "dir", "dir", "dir")
	for i := range 3 {
		if g := r.gfidOnDisk(i, "/empty"); g != empty.Gfid {
			t.Errorf("brick %d: restored with gfid %v, want %v", i, g, empty.Gfid)
		}
	}
	faults[other].Clear()

	// Mkdir: made on the hashed child, refused on another.
	p := r.name("/", "m", 0)
	faults[2].Fail("Mkdir", syscall.ENOSPC)
	_, err = r.d.Mkdir(r.ctx, p, layer.MkdirIn{Mode: 0o755})
	r.errno(err, syscall.ENOSPC, "mkdir")
	r.wantDisk(p, "", "", "")
	faults[2].Clear()

	// Directory rename: renamed on the target's hashed child, refused on
	// another: renamed back everywhere.
	q := r.name("/", "q", 0)
	faults[1].Fail("Rename", syscall.EIO)
	r.errno(r.d.Rename(r.ctx, "/empty", q, 0), syscall.EIO, "rename dir")
	r.wantDisk("/empty", "dir", "dir", "dir")
	r.wantDisk(q, "", "", "")
	faults[1].Clear()

	// File rename over a target on its hashed child: the data moved, then
	// the pointer could not be made: the data is moved back.
	s, d := r.name("/", "s", 0), r.name("/", "d", 1)
	r.write(s, "new")
	r.write(d, "old")
	faults[1].Fail("Mknod", syscall.ENOSPC)
	r.errno(r.d.Rename(r.ctx, s, d, 0), syscall.ENOSPC, "rename file")
	r.wantDisk(s, "data:new", "", "")
	r.wantDisk(d, "", "data:old", "")
	// To a free name: the pointer comes first, so nothing moved.
	e := r.name("/", "e", 1)
	r.errno(r.d.Rename(r.ctx, s, e, 0), syscall.ENOSPC, "rename to free name")
	r.wantDisk(s, "data:new", "", "")
	r.wantDisk(e, "", "", "")
	faults[1].Clear()

	// Link: pointer made, link refused on the cached child: pointer gone.
	faults[0].Fail("Link", syscall.EMLINK)
	_, err = r.d.Link(r.ctx, s, e)
	r.errno(err, syscall.EMLINK, "link")
	r.wantDisk(e, "", "", "")
	faults[0].Clear()
	if got := r.read(s); got != "new" {
		t.Errorf("read: %q", got)
	}
}

// TestFirstChildDown: with child 0 (which answers for the root) down,
// directories are found on the others, and so are the files they hold;
// a file on child 0 is ENOTCONN, never ENOENT.
func TestFirstChildDown(t *testing.T) {
	r, faults := faultRig(t, 3)
	_, err := r.d.Mkdir(r.ctx, "/d", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	f0, f1 := r.name("/d", "f", 0), r.name("/d", "g", 1)
	r.write(f0, "zero")
	r.write(f1, "one")
	var dirOnDead string
	for i := 0; ; i++ {
		if p := fmt.Sprintf("/e%d", i); r.hashed(p) == 0 {
			dirOnDead = p
			break
		}
	}
	_, err = r.d.Mkdir(r.ctx, dirOnDead, layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	down(faults[0])

	for _, p := range []string{"/", "/d", dirOnDead} {
		a, err := r.d.Lookup(r.ctx, p)
		r.ok(err, "lookup "+p)
		if !a.IsDir() {
			t.Errorf("%s: mode %o", p, a.Mode)
		}
	}
	if got := r.read(f1); got != "one" {
		t.Errorf("read of a file on a healthy child: %q", got)
	}
	_, err = r.d.Lookup(r.ctx, f0)
	r.errno(err, syscall.ENOTCONN, "file on the dead child")
	_, err = r.d.Lookup(r.ctx, r.name("/d", "x", 0))
	r.errno(err, syscall.ENOTCONN, "missing name hashed to the dead child")
	// The root and a directory whose hashed child is down list what the
	// others hold.
	for _, p := range []string{"/", "/d", dirOnDead} {
		page, err := r.d.Readdir(r.ctx, p, 0, 100)
		r.ok(err, "readdir "+p)
		if !errors.Is(page.Missing, syscall.ENOTCONN) {
			t.Errorf("readdir %s with its hashed child down: missing %v, want ENOTCONN", p, page.Missing)
		}
	}
	if page, _ := r.d.Readdir(r.ctx, "/d", 0, 100); len(page.Entries) != 1 || "/d/"+page.Entries[0].Name != f1 {
		t.Errorf("readdir /d with child 0 down: %v, want %s alone", page.Entries, f1)
	}
}

// renameStands does a rename and answers EIO when mode is 1, as a replica
// set does when fewer than a quorum of its bricks did it (they blame the
// others, and heal gives them the rename); with mode 2 it refuses it
// (EACCES) without doing it.
type renameStands struct {
	layer.Layer
	mode *atomic.Int32
}

func (l renameStands) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	if l.mode.Load() == 2 {
		return syscall.EACCES
	}
	if err := l.Layer.Rename(ctx, oldpath, newpath, flags); err != nil || l.mode.Load() == 0 {
		return err
	}
	return syscall.EIO
}

// A file's rename to a free name on another child whose move on the
// file's child answers EIO but stands (the simulation, replica 3x2 seed
// 62): the new name's pointer stays, so the name is found where the data
// went. Removing it took the pointer away, leaving the data under the new
// name on a child that is not its hashed one, with no pointer: a lookup
// said it did not exist, a create made a second file of the name, and
// once that was renamed away a listing still showed the first.
func TestRenameThatMayStandKeepsItsPointer(t *testing.T) {
	var mode atomic.Int32
	r := newRig(t, 2, func(i int, l layer.Layer) layer.Layer {
		if i == 0 {
			return renameStands{l, &mode}
		}
		return l
	})
	s, e := r.name("/", "s", 0), r.name("/", "e", 1)
	r.write(s, "moved")
	mode.Store(1)
	r.errno(r.d.Rename(r.ctx, s, e, 0), syscall.EIO, "rename whose move answers EIO")
	mode.Store(0)
	r.wantDisk(e, "data:moved", "pointer:"+brickID(0))
	if got := r.read(e); got != "moved" {
		t.Fatalf("read of the new name: %q", got)
	}
	// A create of the name opens the file it finds, not a second one.
	f, _, err := r.d.Create(r.ctx, e, layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_TRUNC, Mode: 0o644})
	r.ok(err, "create over the new name")
	_, err = f.Write(r.ctx, []byte("again"), 0)
	r.ok(err, "write")
	r.ok(f.Release(r.ctx), "release")
	r.wantDisk(e, "data:again", "pointer:"+brickID(0))
	r.ok(r.d.Rename(r.ctx, e, s, 0), "rename back")
	if names := r.names("/"); len(names) != 1 || "/"+names[0] != s {
		t.Errorf("listing after renaming it back: %v, want only %s", names, s)
	}
	r.wantDisk(e, "", "")

	// A move refused for sure takes its pointer away.
	mode.Store(2)
	r.errno(r.d.Rename(r.ctx, s, e, 0), syscall.EACCES, "refused rename")
	mode.Store(0)
	r.wantDisk(e, "", "")
	r.wantDisk(s, "data:again", "")
}
