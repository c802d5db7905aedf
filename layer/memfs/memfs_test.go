package memfs

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
)

var ctx = context.Background()

func TestConformance(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer { return New() })
}

// newC is a layertest.C over a fresh volume, for the helpers.
func newC(t *testing.T) (*layertest.C, *FS) {
	fs := New()
	return &layertest.C{T: t, L: fs, Ctx: ctx}, fs
}

func TestRootAttr(t *testing.T) {
	c, _ := newC(t)
	a := c.Lookup("/")
	if a.Mode != syscall.S_IFDIR|0o755 || a.Nlink != 2 || a.Uid != 0 || a.Size != blockSize {
		c.Fatalf("root: %+v", a)
	}
	c.Errno(c.L.Rmdir(ctx, "/"), syscall.EBUSY, "rmdir /")
	c.Errno(c.L.Unlink(ctx, "/"), syscall.EISDIR, "unlink /")
	c.Errno(c.L.Rename(ctx, "/", "/x", 0), syscall.EBUSY, "rename /")
	_, _, err := c.L.Create(ctx, "/", layer.CreateIn{Flags: syscall.O_RDWR})
	c.Errno(err, syscall.EISDIR, "create /")
}

// A directory's Nlink is 2 plus its subdirectories, through mkdir,
// rename between directories and rmdir.
func TestDirLinks(t *testing.T) {
	c, _ := newC(t)
	c.Mkdir("/a")
	c.Mkdir("/b")
	c.Mkdir("/a/x")
	c.File("/a/f", "")
	wantLinks := func(p string, n uint32) {
		t.Helper()
		if got := c.Lookup(p).Nlink; got != n {
			t.Fatalf("%s: nlink %d, want %d", p, got, n)
		}
	}
	wantLinks("/", 4)
	wantLinks("/a", 3)
	c.OK(c.L.Rename(ctx, "/a/x", "/b/x", 0), "rename")
	wantLinks("/a", 2)
	wantLinks("/b", 3)
	c.Mkdir("/a/y")
	c.OK(c.L.Rename(ctx, "/a/y", "/b/x", 0), "rename over an empty dir")
	wantLinks("/a", 2)
	wantLinks("/b", 3)
	c.OK(c.L.Rmdir(ctx, "/b/x"), "rmdir")
	wantLinks("/b", 2)
}

func TestLinkCtime(t *testing.T) {
	c, _ := newC(t)
	c.File("/f", "x")
	ts := layer.Timespec{Sec: 1000}
	_, err := c.L.Setattr(ctx, "/f", layer.SetattrIn{Valid: layer.SetMtime | layer.SetAtime, Mtime: ts, Atime: ts})
	c.OK(err, "utimens")
	before := c.Lookup("/f").Ctime
	a, err := c.L.Link(ctx, "/f", "/g")
	c.OK(err, "link")
	if after(before, a.Ctime) || a.Mtime != ts || a.Nlink != 2 {
		t.Fatalf("link: ctime %+v (was %+v), mtime %+v", a.Ctime, before, a.Mtime)
	}
}

func TestSetgidDir(t *testing.T) {
	c, _ := newC(t)
	c.Mkdir("/d")
	_, err := c.L.Setattr(ctx, "/d", layer.SetattrIn{Valid: layer.SetMode | layer.SetGid, Mode: 0o2775, Gid: 77})
	c.OK(err, "chmod g+s")
	f := c.File("/d/f", "")
	sub := c.Mkdir("/d/sub")
	if f.Gid != 77 || sub.Gid != 77 || sub.Mode&syscall.S_ISGID == 0 || f.Mode&syscall.S_ISGID != 0 {
		t.Fatalf("in a set-group-ID dir: file %d %#o, dir %d %#o", f.Gid, f.Mode, sub.Gid, sub.Mode)
	}
}

func TestChownClearsSetuid(t *testing.T) {
	c, _ := newC(t)
	c.File("/f", "")
	_, err := c.L.Setattr(ctx, "/f", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o6755})
	c.OK(err, "chmod")
	a, err := c.L.Setattr(ctx, "/f", layer.SetattrIn{Valid: layer.SetUid, Uid: 5})
	c.OK(err, "chown")
	c.WantMode(a, syscall.S_IFREG|0o755, "after chown")
}

func TestSetattrChecksFirst(t *testing.T) {
	c, _ := newC(t)
	c.Mkdir("/d")
	_, err := c.L.Setattr(ctx, "/d", layer.SetattrIn{Valid: layer.SetMode | layer.SetSize, Mode: 0o700})
	c.Errno(err, syscall.EISDIR, "chmod and truncate of a dir")
	c.WantMode(c.Lookup("/d"), syscall.S_IFDIR|0o755, "a failed setattr changed the mode")
	_, err = c.L.Symlink(ctx, "/l", layer.SymlinkIn{Target: "d"})
	c.OK(err, "symlink")
	_, err = c.L.Setattr(ctx, "/l", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o700})
	c.Errno(err, syscall.EOPNOTSUPP, "chmod of a symlink")
	_, err = c.L.Mknod(ctx, "/p", layer.MknodIn{Mode: syscall.S_IFIFO | 0o600})
	c.OK(err, "mknod")
	_, err = c.L.Setattr(ctx, "/p", layer.SetattrIn{Valid: layer.SetSize})
	c.Errno(err, syscall.EINVAL, "truncate of a fifo")
}

// Opens refuse what posix's refuse: links, special files, writing a
// directory; Files refuse what their access mode does not allow.
func TestOpenRefusals(t *testing.T) {
	c, _ := newC(t)
	c.File("/f", "abc")
	c.Mkdir("/d")
	_, err := c.L.Symlink(ctx, "/l", layer.SymlinkIn{Target: "f"})
	c.OK(err, "symlink")
	_, err = c.L.Mknod(ctx, "/p", layer.MknodIn{Mode: syscall.S_IFIFO | 0o600})
	c.OK(err, "mknod")
	for _, x := range []struct {
		p     string
		flags uint32
		want  syscall.Errno
	}{
		{"/l", syscall.O_RDONLY, syscall.ELOOP},
		{"/p", syscall.O_RDONLY, syscall.ENXIO},
		{"/d", syscall.O_RDWR, syscall.EISDIR},
		{"/f", syscall.O_RDONLY | syscall.O_DIRECTORY, syscall.ENOTDIR},
		{"/f", syscall.O_RDWR | syscall.O_CREAT, syscall.EINVAL},
		{"/l/x", syscall.O_RDONLY, syscall.ELOOP},
	} {
		_, err := c.L.Open(ctx, x.p, x.flags)
		c.Errno(err, x.want, "open %s %#x", x.p, x.flags)
	}
	d, err := c.L.Open(ctx, "/d", syscall.O_RDONLY)
	c.OK(err, "open a directory")
	_, err = d.Read(ctx, make([]byte, 1), 0)
	c.Errno(err, syscall.EISDIR, "read a directory")
	c.Release(d)
	r, err := c.L.Open(ctx, "/f", syscall.O_RDONLY)
	c.OK(err, "open")
	_, err = r.Write(ctx, []byte("x"), 0)
	c.Errno(err, syscall.EBADF, "write to a read-only File")
	c.Release(r)
	c.Errno(r.Release(ctx), syscall.EBADF, "second release")
	w, err := c.L.Open(ctx, "/f", syscall.O_WRONLY)
	c.OK(err, "open")
	_, err = w.Read(ctx, make([]byte, 1), 0)
	c.Errno(err, syscall.EBADF, "read from a write-only File")
	c.Release(w)
}

func TestFallocateModes(t *testing.T) {
	c, _ := newC(t)
	f, _ := c.Create("/f", 0o644)
	defer c.Release(f)
	c.Write(f, string(bytes.Repeat([]byte("x"), 3*blockSize)), 0)
	c.OK(f.Fallocate(ctx, fallocPunchHole|fallocKeepSize, 100, blockSize*2), "punch")
	got := c.ReadAt(f, 3*blockSize, 0)
	want := append(append(bytes.Repeat([]byte("x"), 100), make([]byte, 2*blockSize)...), bytes.Repeat([]byte("x"), blockSize-100)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("after punch: content differs")
	}
	a, _ := f.Getattr(ctx)
	if a.Size != 3*blockSize || a.Blocks != 2*blockSize/512 {
		t.Fatalf("after punch: size %d blocks %d", a.Size, a.Blocks)
	}
	c.OK(f.Fallocate(ctx, fallocKeepSize, 0, 10*blockSize), "keep size")
	if a, _ = f.Getattr(ctx); a.Size != 3*blockSize || a.Blocks != 10*blockSize/512 {
		t.Fatalf("after keep-size allocation: size %d blocks %d", a.Size, a.Blocks)
	}
	c.OK(f.Fallocate(ctx, fallocZeroRange, 0, 11*blockSize), "zero range")
	if a, _ = f.Getattr(ctx); a.Size != 11*blockSize || !bytes.Equal(c.ReadAt(f, 10, 0), make([]byte, 10)) {
		t.Fatalf("after zero range: size %d", a.Size)
	}
	c.Errno(f.Fallocate(ctx, fallocPunchHole, 0, 1), syscall.EOPNOTSUPP, "punch without keep size")
	c.Errno(f.Fallocate(ctx, 0x8, 0, 1), syscall.EOPNOTSUPP, "collapse range")
	c.Errno(f.Fallocate(ctx, 0, -1, 1), syscall.EINVAL, "negative offset")
	c.Errno(f.Fallocate(ctx, 0, 0, 0), syscall.EINVAL, "no length")
	c.Errno(f.Fallocate(ctx, 0, 0, 2<<40), syscall.ENOSPC, "more than the volume")
}

// Shrinking a file zeroes what lay past its end: growing it again shows
// zeros, not the old bytes.
func TestTruncateZeroes(t *testing.T) {
	c, _ := newC(t)
	f, _ := c.Create("/f", 0o644)
	defer c.Release(f)
	c.Write(f, "0123456789", 0)
	_, err := f.Setattr(ctx, layer.SetattrIn{Valid: layer.SetSize, Size: 3})
	c.OK(err, "truncate")
	c.Write(f, "Z", 6)
	if got := c.ReadFile(f); got != "012\x00\x00\x00Z" {
		t.Fatalf("content %q", got)
	}
}

// Statfs counts the blocks files hold; an unlinked file's go with its
// last File.
func TestStatfsCounts(t *testing.T) {
	c, fs := newC(t)
	free := func() uint64 {
		st, err := fs.Statfs(ctx, "/")
		c.OK(err, "statfs")
		return st.Bfree
	}
	empty := free()
	f, _ := c.Create("/f", 0o644)
	c.Write(f, string(make([]byte, 10*blockSize)), 0)
	if got := free(); got != empty-10 {
		t.Fatalf("after a 10-block write: %d free, want %d", got, empty-10)
	}
	c.OK(c.L.Unlink(ctx, "/f"), "unlink")
	if got := free(); got != empty-10 {
		t.Fatalf("unlinked but open: %d free, want %d", got, empty-10)
	}
	c.Release(f)
	if got := free(); got != empty {
		t.Fatalf("released: %d free, want %d", got, empty)
	}
	if fs.files != 1 {
		t.Fatalf("%d inodes alive, want the root alone", fs.files)
	}
}

func TestXattrNamespaces(t *testing.T) {
	c, _ := newC(t)
	c.File("/f", "")
	c.Errno(c.L.Setxattr(ctx, "/f", "trusted.mortar.gfid", []byte("x"), 0), syscall.EOPNOTSUPP, "set trusted.*")
	_, err := c.L.Getxattr(ctx, "/f", "security.selinux")
	c.Errno(err, syscall.EOPNOTSUPP, "get security.*")
	c.Errno(c.L.Setxattr(ctx, "/f", "user.a", make([]byte, xattrSizeMax+1), 0), syscall.E2BIG, "too big a value")
	c.Errno(c.L.Setxattr(ctx, "/f", "user.a", nil, 4), syscall.EINVAL, "unknown flag")
	_, err = c.L.Symlink(ctx, "/l", layer.SymlinkIn{Target: "f"})
	c.OK(err, "symlink")
	c.Errno(c.L.Setxattr(ctx, "/l", "user.a", []byte("x"), 0), syscall.EPERM, "user xattr on a symlink")
	_, err = c.L.Getxattr(ctx, "/l", "user.a")
	c.Errno(err, syscall.ENODATA, "user xattr of a symlink")
}

// Distribute's pointer files: mode S_IFREG|01000 with Linkto, refused
// by Open, Setattr and UnlinkData (EREMOTE), removed by Unlink.
func TestPointerFile(t *testing.T) {
	c, fs := newC(t)
	a, err := fs.Mknod(ctx, "/p", layer.MknodIn{Mode: syscall.S_IFREG | 0o644, Linkto: "brick-2"})
	c.OK(err, "mknod pointer")
	if a.Mode != linktoMode || a.Linkto != "brick-2" || c.Lookup("/p").Linkto != "brick-2" {
		t.Fatalf("pointer: mode %#o linkto %q", a.Mode, a.Linkto)
	}
	_, err = fs.Open(ctx, "/p", syscall.O_RDONLY)
	c.Errno(err, syscall.EREMOTE, "open pointer")
	_, err = fs.Setattr(ctx, "/p", layer.SetattrIn{Valid: layer.SetSize})
	c.Errno(err, syscall.EREMOTE, "truncate pointer")
	c.Errno(fs.UnlinkData(ctx, "/p"), syscall.EREMOTE, "unlink data of pointer")
	c.OK(fs.Unlink(ctx, "/p"), "unlink pointer")
	c.File("/f", "")
	c.OK(fs.UnlinkData(ctx, "/f"), "unlink data of a file")
	c.Gone("/f")
}

func TestRenameSource(t *testing.T) {
	c, fs := newC(t)
	a := c.File("/a", "a")
	c.Errno(fs.RenameSource(ctx, "/a", "/b", 0, layer.NewGfid()), syscall.ESTALE, "rename of another inode")
	c.OK(fs.RenameSource(ctx, "/a", "/b", 0, a.Gfid), "rename of the inode")
	c.WantContent("/b", "a")
	c.Errno(fs.Rename(ctx, "/b", "/c", 4), syscall.EINVAL, "unknown flag")
	c.File("/c", "c")
	_, err := fs.Link(ctx, "/c", "/c2")
	c.OK(err, "link") // two names of one inode: rename does nothing
	c.OK(fs.Rename(ctx, "/c", "/c2", 0), "rename onto another name of itself")
	c.WantContent("/c", "c")
}

// A listing resumed after changes to the directory lists every entry
// that stayed exactly once, whatever was removed or added meanwhile.
func TestReaddirCookiesSurviveChanges(t *testing.T) {
	c, fs := newC(t)
	for i := range 100 {
		c.File(fmt.Sprintf("/f%03d", i), "")
	}
	seen := map[string]int{}
	page, err := fs.Readdir(ctx, "/", 0, 10)
	c.OK(err, "readdir")
	for _, e := range page.Entries {
		seen[e.Name]++
	}
	for i := 0; i < 100; i += 2 { // remove half, listed or not
		c.OK(fs.Unlink(ctx, fmt.Sprintf("/f%03d", i)), "unlink")
	}
	c.File("/new", "")
	for !page.EOF {
		page, err = fs.Readdir(ctx, "/", page.Next, 10)
		c.OK(err, "readdir")
		for _, e := range page.Entries {
			seen[e.Name]++
		}
	}
	for i := 1; i < 100; i += 2 {
		if n := seen[fmt.Sprintf("f%03d", i)]; n != 1 {
			t.Fatalf("f%03d listed %d times", i, n)
		}
	}
	if seen["new"] != 1 {
		t.Fatalf("an entry made during the listing is not listed once: %d", seen["new"])
	}
}

// Create in one go: the data and attributes a CreateIn carries are
// written with it; an O_EXCL one that fails leaves no file.
func TestCreateInOneGo(t *testing.T) {
	c, fs := newC(t)
	mt := layer.Timespec{Sec: 42}
	f, a, err := fs.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o600,
		Data: []byte("hello"), Set: layer.SetattrIn{Valid: layer.SetMtime, Mtime: mt}})
	c.OK(err, "create in one go")
	c.Release(f)
	if a.Size != 5 || a.Mtime != mt {
		t.Fatalf("create in one go: size %d mtime %+v", a.Size, a.Mtime)
	}
	c.WantContent("/f", "hello")
	_, _, err = fs.Create(ctx, "/g", layer.CreateIn{Flags: syscall.O_RDONLY | syscall.O_EXCL, Data: []byte("x")})
	c.Errno(err, syscall.EBADF, "create in one go, read-only")
	c.Gone("/g")
}

// Concurrent use, for the race detector: writers at disjoint offsets of
// one file, and makers, renamers and listers in the same directories.
func TestConcurrent(t *testing.T) {
	c, fs := newC(t)
	shared, _ := c.Create("/shared", 0o644)
	defer c.Release(shared)
	const workers, rounds = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers*2)
	for w := range workers {
		wg.Add(2)
		go func() { defer wg.Done(); errs <- churn(fs, shared, w, rounds) }()
		go func() { defer wg.Done(); errs <- list(fs, rounds) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		c.OK(err, "concurrent worker")
	}
	for w := range workers {
		want := bytes.Repeat([]byte{byte('a' + w)}, 100)
		if got := c.ReadAt(shared, 100, int64(w*100)); !bytes.Equal(got, want) {
			t.Fatalf("worker %d's part of the shared file: %q", w, got)
		}
	}
}

// churn makes, writes, renames and removes files in a directory of its own.
func churn(fs *FS, shared layer.File, w, rounds int) error {
	if _, err := shared.Write(ctx, bytes.Repeat([]byte{byte('a' + w)}, 100), int64(w*100)); err != nil {
		return err
	}
	dir := fmt.Sprintf("/w%d", w)
	if _, err := fs.Mkdir(ctx, dir, layer.MkdirIn{Mode: 0o755}); err != nil {
		return err
	}
	for i := range rounds {
		p := fmt.Sprintf("%s/f%d", dir, i)
		f, _, err := fs.Create(ctx, p, layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
		if err != nil {
			return err
		}
		_, err = f.Write(ctx, []byte(p), 0)
		f.Release(ctx)
		if err == nil {
			err = fs.Rename(ctx, p, fmt.Sprintf("/w%d-%d", w, i), 0)
		}
		if err == nil && i%2 == 0 {
			err = fs.Unlink(ctx, fmt.Sprintf("/w%d-%d", w, i))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// list reads the root and the shared file while the churners work.
func list(fs *FS, rounds int) error {
	for range rounds {
		if _, err := layer.ReadDirAll(ctx, fs, "/"); err != nil {
			return err
		}
		if _, err := fs.Statfs(ctx, "/"); err != nil {
			return err
		}
		if _, err := fs.Lookup(ctx, "/shared"); err != nil {
			return err
		}
	}
	return nil
}
