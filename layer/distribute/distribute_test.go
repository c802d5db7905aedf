package distribute

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
)

func TestHashStable(t *testing.T) {
	// Pinned values: changing the hash would strand every stored file.
	for _, c := range []struct {
		name string
		want uint32
	}{
		{"", 0x55493646},
		{"a", 0x2b1c6703},
		{"foo", 0xc6ddf719},
		{"hello.txt", 0xb8e31d64},
	} {
		if got := hashName(c.name); got != c.want {
			t.Errorf("hashName(%q) = %#x, want %#x", c.name, got, c.want)
		}
	}
	// And it is what the documentation says: FNV-1a 64, fmix64, folded.
	for i := range 1000 {
		name := fmt.Sprintf("name-%d", i)
		f := fnv.New64a()
		f.Write([]byte(name))
		h := f.Sum64()
		h ^= h >> 33
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
		h *= 0xc4ceb9fe1a85ec53
		h ^= h >> 33
		if want := uint32(h>>32) ^ uint32(h); hashName(name) != want {
			t.Fatalf("hashName(%q) = %#x, want %#x", name, hashName(name), want)
		}
	}
	for _, c := range [][2]string{
		{".foo.x7Gh2a", "foo"},
		{".foo.txt.Ab12Cd", "foo.txt"},
		{".bashrc", ".bashrc"},
		{"..x", "..x"},
		{".a.", ".a."},
		{"plain.txt", "plain.txt"},
		{".a.b", "a"},
	} {
		if got := hashKey(c[0]); got != c[1] {
			t.Errorf("hashKey(%q) = %q, want %q", c[0], got, c[1])
		}
	}
	if hashName(".report.pdf.XyZ123") != hashName("report.pdf") {
		t.Error("rsync temporary name hashes differently from its final name")
	}
}

func TestLayout(t *testing.T) {
	for n := 1; n <= 7; n++ {
		l := evenLayout(n)
		if err := l.check(); err != nil {
			t.Fatal(n, err)
		}
		if l.owner(0) != 0 || l.owner(1<<32-1) != n-1 {
			t.Errorf("n=%d: ends owned by %d and %d", n, l.owner(0), l.owner(1<<32-1))
		}
		for i, r := range l.ranges {
			if l.owner(r.start) != i || l.owner(r.end) != i {
				t.Errorf("n=%d: range %d edges misowned", n, i)
			}
		}
	}
}

func TestNewRejects(t *testing.T) {
	s, _ := newStore(t)
	for _, cs := range [][]Child{
		nil,
		{{ID: "", Layer: s}},
		{{ID: "a", Layer: nil}},
		{{ID: "a", Layer: s}, {ID: "a", Layer: s}},
	} {
		if _, err := New(cs, Options{}); err == nil {
			t.Errorf("New(%v) succeeded", cs)
		}
	}
}

// TestSpread: names spread over every child, and each file is on its
// hashed child's brick and nowhere else.
func TestSpread(t *testing.T) {
	const n, files = 3, 1000
	r := newRig(t, n, nil)
	count := make([]int, n)
	for i := range files {
		p := fmt.Sprintf("/file-%d", i)
		r.write(p, "x")
		h := r.hashed(p)
		count[h]++
		want := make([]string, n)
		want[h] = "data:x"
		r.wantDisk(p, want...)
	}
	for i, c := range count {
		if c < files/n*3/4 || c > files/n*5/4 {
			t.Errorf("child %d got %d of %d files: %v", i, c, files, count)
		}
	}
	if got := len(r.names("/")); got != files {
		t.Errorf("readdir shows %d entries, want %d", got, files)
	}
}

func TestMkdirEverywhereSameGfid(t *testing.T) {
	r := newRig(t, 3, nil)
	a, err := r.d.Mkdir(r.ctx, "/d", layer.MkdirIn{Mode: 0o750})
	r.ok(err, "mkdir")
	sub, err := r.d.Mkdir(r.ctx, "/d/e", layer.MkdirIn{Mode: 0o700})
	r.ok(err, "mkdir sub")
	for i := range 3 {
		r.wantDisk("/d/e", "dir", "dir", "dir")
		if g := r.gfidOnDisk(i, "/d"); g != a.Gfid {
			t.Errorf("brick %d: gfid %v, want %v", i, g, a.Gfid)
		}
		if g := r.gfidOnDisk(i, "/d/e"); g != sub.Gfid {
			t.Errorf("brick %d: sub gfid %v, want %v", i, g, sub.Gfid)
		}
	}
	_, err = r.d.Mkdir(r.ctx, "/d", layer.MkdirIn{Mode: 0o750})
	r.errno(err, syscall.EEXIST, "second mkdir")
	got, err := r.d.Lookup(r.ctx, "/d")
	r.ok(err, "lookup")
	if got.Gfid != a.Gfid || got.Nlink != 3 || got.Mode&07777 != 0o750 {
		t.Errorf("lookup /d: %+v", got)
	}
	// A name taken by a file is EEXIST for mkdir, whatever child holds it.
	f := r.name("/d", "f", 2)
	r.write(f, "x")
	_, err = r.d.Mkdir(r.ctx, f, layer.MkdirIn{Mode: 0o755})
	r.errno(err, syscall.EEXIST, "mkdir over file")
	r.wantDisk(f, "", "", "data:x")
}

// TestRenameAcrossRanges: the data stays, the new name gets a pointer.
func TestRenameAcrossRanges(t *testing.T) {
	r := newRig(t, 3, nil)
	a, b := r.name("/", "a", 0), r.name("/", "b", 1)
	attr := r.write(a, "hello")
	r.ok(r.d.Rename(r.ctx, a, b, 0), "rename")
	r.wantDisk(b, "data:hello", "pointer:b0", "")
	r.wantDisk(a, "", "", "")
	if got := r.read(b); got != "hello" {
		t.Errorf("read %s: %q", b, got)
	}
	got, err := r.d.Lookup(r.ctx, b)
	r.ok(err, "lookup")
	if got.Gfid != attr.Gfid || got.Linkto != "" || got.Size != 5 {
		t.Errorf("lookup after rename: %+v", got)
	}
	_, err = r.d.Lookup(r.ctx, a)
	r.errno(err, syscall.ENOENT, "old name")
	if names := r.names("/"); !slices.Equal(names, []string{b[1:]}) {
		t.Errorf("readdir: %v", names)
	}

	// Rename back onto the pointer's home: no pointer left anywhere.
	r.ok(r.d.Rename(r.ctx, b, a, 0), "rename back")
	r.wantDisk(a, "data:hello", "", "")
	r.wantDisk(b, "", "", "")

	// Move again, then to a third name hashing to a third child.
	c := r.name("/", "c", 2)
	r.ok(r.d.Rename(r.ctx, a, b, 0), "rename a->b")
	r.ok(r.d.Rename(r.ctx, b, c, 0), "rename b->c")
	r.wantDisk(c, "data:hello", "", "pointer:b0")
	r.wantDisk(b, "", "", "")
	if got := r.read(c); got != "hello" {
		t.Errorf("read %s: %q", c, got)
	}
}

// TestRenameOverThirdBrick: the old target's data on a third child goes.
func TestRenameOverThirdBrick(t *testing.T) {
	r := newRig(t, 3, nil)
	s, d, x := r.name("/", "s", 0), r.name("/", "d", 1), r.name("/", "x", 2)
	r.write(x, "old")
	r.ok(r.d.Rename(r.ctx, x, d, 0), "place old target")
	r.wantDisk(d, "", "pointer:b2", "data:old")
	r.write(s, "new")
	r.ok(r.d.Rename(r.ctx, s, d, 0), "rename over")
	r.wantDisk(d, "data:new", "pointer:b0", "")
	r.wantDisk(s, "", "", "")
	if got := r.read(d); got != "new" {
		t.Errorf("read: %q", got)
	}

	// Over a target whose data is on its hashed child.
	e := r.name("/", "e", 2)
	r.write(e, "e-old")
	r.ok(r.d.Rename(r.ctx, d, e, 0), "rename over data on hashed")
	r.wantDisk(e, "data:new", "", "pointer:b0")
	r.wantDisk(d, "", "", "")

	// Over a target whose data is on the source's child.
	f, g := r.name("/", "f", 0), r.name("/", "g", 1)
	r.write(f, "f")
	r.ok(r.d.Rename(r.ctx, e, g, 0), "e->g")
	r.wantDisk(g, "data:new", "pointer:b0", "")
	r.ok(r.d.Rename(r.ctx, f, g, 0), "f over g")
	r.wantDisk(g, "data:f", "pointer:b0", "")
	if names := r.names("/"); !slices.Equal(names, []string{g[1:]}) {
		t.Errorf("readdir: %v", names)
	}
}

func TestRenameTypesAndNoReplace(t *testing.T) {
	r := newRig(t, 3, nil)
	_, err := r.d.Mkdir(r.ctx, "/dir", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	f := r.name("/", "f", 1)
	r.write(f, "x")
	r.errno(r.d.Rename(r.ctx, f, "/dir", 0), syscall.EISDIR, "file over dir")
	r.errno(r.d.Rename(r.ctx, "/dir", f, 0), syscall.ENOTDIR, "dir over file")
	g := r.name("/", "g", 2)
	r.write(g, "y")
	r.errno(r.d.Rename(r.ctx, f, g, layer.RenameNoReplace), syscall.EEXIST, "noreplace")
	r.wantDisk(f, "", "data:x", "")
	r.wantDisk(g, "", "", "data:y")
	h := r.name("/", "h", 0)
	r.ok(r.d.Rename(r.ctx, f, h, layer.RenameNoReplace), "noreplace to free name")
	r.wantDisk(h, "pointer:b1", "data:x", "")
	r.errno(r.d.Rename(r.ctx, "/nope", h, 0), syscall.ENOENT, "missing source")
	r.errno(r.d.Rename(r.ctx, "/dir", "/dir/sub", 0), syscall.EINVAL, "dir into itself")
	r.ok(r.d.Rename(r.ctx, h, h, 0), "rename onto itself")
	if got := r.read(h); got != "x" {
		t.Errorf("read: %q", got)
	}
}

func TestRenameDir(t *testing.T) {
	r := newRig(t, 3, nil)
	a, err := r.d.Mkdir(r.ctx, "/a", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	var files []string
	for i := range 3 {
		p := r.name("/a", "f", i)
		r.write(p, "x")
		files = append(files, p[len("/a/"):])
	}
	slices.Sort(files)
	_, err = r.d.Mkdir(r.ctx, "/b", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir target")
	r.ok(r.d.Rename(r.ctx, "/a", "/b", 0), "rename over empty dir")
	r.wantDisk("/b", "dir", "dir", "dir")
	r.wantDisk("/a", "", "", "")
	if names := r.names("/b"); !slices.Equal(names, files) {
		t.Errorf("readdir /b: %v, want %v", names, files)
	}
	got, err := r.d.Lookup(r.ctx, "/b")
	r.ok(err, "lookup")
	if got.Gfid != a.Gfid {
		t.Errorf("gfid changed")
	}
	_, err = r.d.Mkdir(r.ctx, "/c", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir c")
	r.write(r.name("/c", "f", 2), "y")
	r.errno(r.d.Rename(r.ctx, "/b", "/c", 0), syscall.ENOTEMPTY, "over non-empty")
	r.errno(r.d.Rename(r.ctx, "/b", "/c", layer.RenameNoReplace), syscall.EEXIST, "noreplace")
	r.wantDisk("/b", "dir", "dir", "dir")
}

// TestHardLink: a second name hashing elsewhere gets a pointer; both names
// count two links.
func TestHardLink(t *testing.T) {
	r := newRig(t, 3, nil)
	a, b := r.name("/", "a", 0), r.name("/", "b", 1)
	attr := r.write(a, "data")
	la, err := r.d.Link(r.ctx, a, b)
	r.ok(err, "link")
	if la.Nlink != 2 || la.Gfid != attr.Gfid {
		t.Errorf("link attr: %+v", la)
	}
	r.wantDisk(b, "data:data", "pointer:b0", "")
	for _, p := range []string{a, b} {
		got, err := r.d.Lookup(r.ctx, p)
		r.ok(err, "lookup")
		if got.Nlink != 2 || got.Gfid != attr.Gfid {
			t.Errorf("lookup %s: nlink %d gfid %v", p, got.Nlink, got.Gfid)
		}
	}
	_, err = r.d.Link(r.ctx, a, b)
	r.errno(err, syscall.EEXIST, "link again")
	r.ok(r.d.Rename(r.ctx, a, b, 0), "rename between links of one inode")
	r.ok(r.d.Unlink(r.ctx, a), "unlink a")
	got, err := r.d.Lookup(r.ctx, b)
	r.ok(err, "lookup b")
	if got.Nlink != 1 {
		t.Errorf("nlink after unlink: %d", got.Nlink)
	}
	r.ok(r.d.Unlink(r.ctx, b), "unlink b")
	r.wantDisk(b, "", "", "")
	r.wantDisk(a, "", "", "")
	if names := r.names("/"); len(names) != 0 {
		t.Errorf("readdir: %v", names)
	}
}

func TestReaddirHidesPointers(t *testing.T) {
	r := newRig(t, 3, nil)
	_, err := r.d.Mkdir(r.ctx, "/sub", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	var want []string
	for i := range 30 {
		p := r.name("/", fmt.Sprintf("f%02d-", i), i%3)
		r.write(p, "x")
		q := r.name("/", fmt.Sprintf("g%02d-", i), (i+1)%3)
		r.ok(r.d.Rename(r.ctx, p, q, 0), "rename")
		want = append(want, q[1:])
	}
	want = append(want, "sub")
	slices.Sort(want)
	page, err := r.d.Readdir(r.ctx, "/", 0, 5)
	r.ok(err, "readdir")
	if !page.EOF {
		t.Error("first page not EOF")
	}
	var got []string
	for _, e := range page.Entries {
		got = append(got, e.Name)
		if e.Attr.Linkto != "" || e.Attr.Gfid.IsZero() {
			t.Errorf("entry %s: %+v", e.Name, e.Attr)
		}
		if e.Name == "sub" && !e.Attr.IsDir() {
			t.Errorf("sub not a dir")
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("readdir: %v\nwant %v", got, want)
	}
	pointers := 0
	for i := range 3 {
		for _, w := range want {
			if strings.HasPrefix(r.onDisk(i, "/"+w), "pointer:") {
				pointers++
			}
		}
	}
	if pointers != 30 {
		t.Errorf("%d pointers on the bricks, want 30", pointers)
	}
}

// TestCreateOverPointer: create without O_EXCL of a name living elsewhere
// opens it there; with O_EXCL it is EEXIST.
func TestCreateOverPointer(t *testing.T) {
	r := newRig(t, 2, nil)
	a, b := r.name("/", "a", 0), r.name("/", "b", 1)
	r.write(a, "content")
	r.ok(r.d.Rename(r.ctx, a, b, 0), "rename")
	_, _, err := r.d.Create(r.ctx, b, layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
	r.errno(err, syscall.EEXIST, "create excl")
	f, attr, err := r.d.Create(r.ctx, b, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	r.ok(err, "create")
	if attr.Linkto != "" || attr.Size != 7 {
		t.Errorf("attr: %+v", attr)
	}
	_, err = f.Write(r.ctx, []byte("C"), 0)
	r.ok(err, "write")
	r.ok(f.Release(r.ctx), "release")
	r.wantDisk(b, "data:Content", "pointer:b0")
	_, err = r.d.Mknod(r.ctx, b, layer.MknodIn{Mode: syscall.S_IFIFO | 0o644})
	r.errno(err, syscall.EEXIST, "mknod over pointer")
}

// TestDanglingPointer: a pointer without data reads as absent and a
// create replaces it.
func TestDanglingPointer(t *testing.T) {
	r := newRig(t, 2, nil)
	p := r.name("/", "p", 1)
	_, err := r.stores[1].Mknod(r.ctx, p, layer.MknodIn{Mode: pointerMode, Linkto: "b0"})
	r.ok(err, "make pointer")
	_, err = r.d.Lookup(r.ctx, p)
	r.errno(err, syscall.ENOENT, "lookup dangling")
	if names := r.names("/"); len(names) != 0 {
		t.Errorf("readdir: %v", names)
	}
	r.write(p, "fresh")
	r.wantDisk(p, "", "data:fresh")
	if got := r.read(p); got != "fresh" {
		t.Errorf("read: %q", got)
	}
}

func TestRmdirStalePointers(t *testing.T) {
	r := newRig(t, 3, nil)
	_, err := r.d.Mkdir(r.ctx, "/d", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	f := r.name("/d", "f", 1)
	r.write(f, "x")
	r.errno(r.d.Rmdir(r.ctx, "/d"), syscall.ENOTEMPTY, "rmdir non-empty")
	r.wantDisk("/d", "dir", "dir", "dir")
	r.ok(r.d.Unlink(r.ctx, f), "unlink")
	_, err = r.stores[2].Mknod(r.ctx, "/d/stale", layer.MknodIn{Mode: pointerMode, Linkto: "b0"})
	r.ok(err, "stale pointer")
	_, err = r.stores[0].Mknod(r.ctx, "/d/"+tmpName(), layer.MknodIn{Mode: pointerMode, Linkto: "b1"})
	r.ok(err, "stale temporary pointer")
	r.ok(r.d.Rmdir(r.ctx, "/d"), "rmdir")
	r.wantDisk("/d", "", "", "")
	r.errno(r.d.Rmdir(r.ctx, "/d"), syscall.ENOENT, "rmdir again")
	g := r.name("/", "g", 0)
	r.write(g, "x")
	r.errno(r.d.Rmdir(r.ctx, g), syscall.ENOTDIR, "rmdir file")
}

// TestParentHeal: a brick that lost a directory gets it back, with the
// same gfid, when a file whose name hashes there is created.
func TestParentHeal(t *testing.T) {
	r := newRig(t, 3, nil)
	a, err := r.d.Mkdir(r.ctx, "/d", layer.MkdirIn{Mode: 0o751})
	r.ok(err, "mkdir")
	_, err = r.d.Mkdir(r.ctx, "/d/e", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	for lost := range 3 {
		r.ok(removeOnDisk(r.roots[lost], "/d"), "remove on brick")
		p := r.name("/d/e", fmt.Sprintf("heal%d-", lost), lost)
		r.write(p, "healed")
		r.wantDisk("/d/e", "dir", "dir", "dir")
		if g := r.gfidOnDisk(lost, "/d"); g != a.Gfid {
			t.Errorf("healed gfid %v, want %v", g, a.Gfid)
		}
		if got := r.read(p); got != "healed" {
			t.Errorf("read: %q", got)
		}
		// The heal restores every file the brick can see again.
		if got, err := r.d.Lookup(r.ctx, "/d"); err != nil || got.Mode&07777 != 0o751 {
			t.Errorf("lookup /d: %+v %v", got, err)
		}
	}
	_, _, err = r.d.Create(r.ctx, "/nodir/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	r.errno(err, syscall.ENOENT, "create in missing dir")
}

func TestSetattrDirEverywhere(t *testing.T) {
	r := newRig(t, 3, nil)
	_, err := r.d.Mkdir(r.ctx, "/d", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	a, err := r.d.Setattr(r.ctx, "/d", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o711})
	r.ok(err, "setattr")
	if a.Mode&07777 != 0o711 {
		t.Errorf("mode %o", a.Mode)
	}
	r.ok(r.d.Setxattr(r.ctx, "/d", "user.k", []byte("v"), 0), "setxattr")
	for i, s := range r.stores {
		got, err := s.Lookup(r.ctx, "/d")
		r.ok(err, "lookup on brick")
		if got.Mode&07777 != 0o711 {
			t.Errorf("brick %d mode %o", i, got.Mode)
		}
		v, err := s.Getxattr(r.ctx, "/d", "user.k")
		if err != nil || string(v) != "v" {
			t.Errorf("brick %d xattr %q %v", i, v, err)
		}
	}
	r.ok(r.d.Removexattr(r.ctx, "/d", "user.k"), "removexattr")
	r.errno(r.d.Removexattr(r.ctx, "/d", "user.k"), syscall.ENODATA, "removexattr again")
}

func TestStatfsSums(t *testing.T) {
	r := newRig(t, 3, nil)
	one, err := r.stores[0].Statfs(r.ctx, "/")
	r.ok(err, "statfs brick")
	all, err := r.d.Statfs(r.ctx, "/")
	r.ok(err, "statfs")
	// The bricks share one file system here, so the sum is three times it
	// (give or take what changed in between).
	if all.Blocks != 3*one.Blocks || all.Files != 3*one.Files || all.Frsize != one.Frsize {
		t.Errorf("statfs %+v, one brick %+v", all, one)
	}
}

// fixedStatfs reports a chosen Statfs.
type fixedStatfs struct {
	layer.Base
	s layer.Statfs
}

func (f fixedStatfs) Statfs(ctx context.Context, path string) (layer.Statfs, error) { return f.s, nil }

func TestStatfsNormalises(t *testing.T) {
	stats := []layer.Statfs{
		{Blocks: 100, Bfree: 50, Bavail: 40, Files: 10, Ffree: 5, Bsize: 4096, Frsize: 4096, NameLen: 255},
		{Blocks: 800, Bfree: 400, Bavail: 400, Files: 20, Ffree: 15, Bsize: 1024, Frsize: 1024, NameLen: 200},
	}
	r := newRig(t, 2, func(i int, l layer.Layer) layer.Layer {
		return fixedStatfs{Base: layer.Base{Child: l}, s: stats[i]}
	})
	got, err := r.d.Statfs(r.ctx, "/")
	r.ok(err, "statfs")
	want := layer.Statfs{Blocks: 1200, Bfree: 600, Bavail: 560, Files: 30, Ffree: 20,
		Bsize: 1024, Frsize: 1024, NameLen: 200}
	if got != want {
		t.Errorf("statfs %+v, want %+v", got, want)
	}
}

// TestRsyncTempName: rsync's ".name.XXXXXX" lands where "name" hashes, so
// its final rename leaves no pointer.
func TestRsyncTempName(t *testing.T) {
	r := newRig(t, 3, nil)
	for i := range 20 {
		final := fmt.Sprintf("/report-%d.pdf", i)
		tmp := fmt.Sprintf("/.report-%d.pdf.Xa%02d", i, i)
		r.write(tmp, "x")
		r.ok(r.d.Rename(r.ctx, tmp, final, 0), "rename")
		want := make([]string, 3)
		want[r.hashed(final)] = "data:x"
		r.wantDisk(final, want...)
	}
}

func TestMknodRefusesPointers(t *testing.T) {
	r := newRig(t, 2, nil)
	_, err := r.d.Mknod(r.ctx, "/p", layer.MknodIn{Mode: pointerMode, Linkto: "b0"})
	r.errno(err, syscall.EINVAL, "mknod with linkto")
}

// Unlink of a file whose data is on its hashed child costs that child one
// operation and no lookup anywhere; a file reached through a pointer
// still goes, pointer and data.
func TestUnlinkWithoutLookup(t *testing.T) {
	counts := make([]*layertest.Counting, 2)
	r := newRig(t, 2, func(i int, l layer.Layer) layer.Layer {
		counts[i] = layertest.NewCounting(l)
		return counts[i]
	})
	f := r.name("/", "f", 1)
	r.write(f, "data")
	for _, c := range counts {
		c.Reset()
	}
	r.ok(r.d.Unlink(r.ctx, f), "unlink")
	for i, c := range counts {
		if n := c.Count("Lookup"); n != 0 {
			t.Errorf("child %d: %d lookups for an unlink", i, n)
		}
	}
	r.wantDisk(f, "", "")

	p := r.name("/", "p", 1) // hashes to 1, data on 0 behind a pointer
	_, err := r.stores[0].Mknod(r.ctx, p, layer.MknodIn{Mode: 0o644})
	r.ok(err, "make data")
	_, err = r.stores[1].Mknod(r.ctx, p, layer.MknodIn{Mode: pointerMode, Linkto: "b0"})
	r.ok(err, "make pointer")
	r.ok(r.d.Unlink(r.ctx, p), "unlink through a pointer")
	r.wantDisk(p, "", "")
	r.errno(r.d.Unlink(r.ctx, p), syscall.ENOENT, "unlink of a name gone")
	_, err = r.d.Mkdir(r.ctx, "/d", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	r.errno(r.d.Unlink(r.ctx, "/d"), syscall.EISDIR, "unlink of a directory")
}
