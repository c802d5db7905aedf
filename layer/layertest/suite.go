// Package layertest is test support for layers: a conformance suite that any
// layer stack must pass (Run, RunLocks), and wrappers that inject faults
// (Fault) or count calls (Counting).
//
// A stack is tested by giving Run a constructor for a fresh, empty volume:
//
//	layertest.Run(t, func(t *testing.T) layer.Layer {
//		st := newStore(t) // registers its cleanup with t.Cleanup
//		return st
//	})
//
// The suite creates inodes owned by uid 1001, gid 1002, so it needs a stack
// that can chown (a brick run as root).
package layertest

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// Owner is the owner the suite gives to the inodes it creates.
var Owner = layer.Owner{Uid: 1001, Gid: 1002}

// Run runs the conformance suite; newLayer must return a fresh empty volume
// for each subtest and register its own cleanup with t.Cleanup.
func Run(t *testing.T, newLayer func(t *testing.T) layer.Layer) {
	tests := []struct {
		name string
		fn   func(c *C)
	}{
		{"Root", testRoot},
		{"CreateLookup", testCreateLookup},
		{"CreateFlags", testCreateFlags},
		{"OpenFlags", testOpenFlags},
		{"Append", testAppend},
		{"ReadWriteOffsets", testReadWrite},
		{"SparseLarge", testSparseLarge},
		{"Truncate", testTruncate},
		{"Fsync", testFsync},
		{"Fallocate", testFallocate},
		{"Mkdir", testMkdir},
		{"Rmdir", testRmdir},
		{"Unlink", testUnlink},
		{"UnlinkOpen", testUnlinkOpen},
		{"RenameFiles", testRenameFiles},
		{"RenameDirs", testRenameDirs},
		{"RenameNoReplace", testRenameNoReplace},
		{"Link", testLink},
		{"Symlink", testSymlink},
		{"SetattrPath", testSetattrPath},
		{"SetattrFile", testSetattrFile},
		{"SetattrTimes", testSetattrTimes},
		{"Xattr", testXattr},
		{"Readdir", testReaddir},
		{"ReaddirPaging", testReaddirPaging},
		{"Statfs", testStatfs},
		{"Mknod", testMknod},
		{"Gfid", testGfid},
		{"GfidGiven", testGfidGiven},
		{"NameTooLong", testNameTooLong},
		{"MissingParent", testMissingParent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(&C{T: t, L: newLayer(t), Ctx: context.Background()})
		})
	}
}

// C bundles a test, the layer under test and a context, with helpers that
// fail the test with a clear message.
type C struct {
	*testing.T
	L   layer.Layer
	Ctx context.Context
}

// OK fails the test if err is not nil.
func (c *C) OK(err error, format string, args ...any) {
	c.Helper()
	if err != nil {
		c.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

// Errno fails the test unless err carries the errno want.
func (c *C) Errno(err error, want syscall.Errno, format string, args ...any) {
	c.Helper()
	if got := layer.ToErrno(err); got != want {
		c.Fatalf("%s: got error %v (%d), want %v (%d)", fmt.Sprintf(format, args...),
			err, got, want, want)
	}
}

// Create creates and opens p exclusively, read-write, with mode.
func (c *C) Create(p string, mode uint32) (layer.File, layer.Attr) {
	c.Helper()
	f, a, err := c.L.Create(c.Ctx, p, layer.CreateIn{Owner: Owner,
		Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: mode})
	c.OK(err, "create %s", p)
	return f, a
}

// File creates p with contents data.
func (c *C) File(p string, data string) layer.Attr {
	c.Helper()
	f, _ := c.Create(p, 0o644)
	defer c.Release(f)
	c.Write(f, data, 0)
	a, err := f.Getattr(c.Ctx)
	c.OK(err, "getattr %s", p)
	return a
}

// Write writes data at off through f.
func (c *C) Write(f layer.File, data string, off int64) {
	c.Helper()
	n, err := f.Write(c.Ctx, []byte(data), off)
	c.OK(err, "write %d bytes at %d", len(data), off)
	if n != len(data) {
		c.Fatalf("write %d bytes at %d: wrote %d", len(data), off, n)
	}
}

// ReadAt reads n bytes at off through f.
func (c *C) ReadAt(f layer.File, n int, off int64) []byte {
	c.Helper()
	p := make([]byte, n)
	m, err := f.Read(c.Ctx, p, off)
	c.OK(err, "read %d bytes at %d", n, off)
	return p[:m]
}

// ReadFile reads all of f.
func (c *C) ReadFile(f layer.File) string {
	c.Helper()
	var all []byte
	for {
		p := c.ReadAt(f, 4096, int64(len(all)))
		all = append(all, p...)
		if len(p) < 4096 {
			return string(all)
		}
	}
}

// Content opens p and returns its contents.
func (c *C) Content(p string) string {
	c.Helper()
	f, err := c.L.Open(c.Ctx, p, syscall.O_RDONLY)
	c.OK(err, "open %s", p)
	defer c.Release(f)
	return c.ReadFile(f)
}

// WantContent fails unless p holds want.
func (c *C) WantContent(p, want string) {
	c.Helper()
	if got := c.Content(p); got != want {
		c.Fatalf("content of %s: got %q, want %q", p, got, want)
	}
}

// Release releases f.
func (c *C) Release(f layer.File) {
	c.Helper()
	c.OK(f.Release(c.Ctx), "release")
}

// Mkdir makes directory p with mode 0755.
func (c *C) Mkdir(p string) layer.Attr {
	c.Helper()
	a, err := c.L.Mkdir(c.Ctx, p, layer.MkdirIn{Owner: Owner, Mode: 0o755})
	c.OK(err, "mkdir %s", p)
	return a
}

// Lookup looks p up.
func (c *C) Lookup(p string) layer.Attr {
	c.Helper()
	a, err := c.L.Lookup(c.Ctx, p)
	c.OK(err, "lookup %s", p)
	return a
}

// Gone fails unless p does not exist.
func (c *C) Gone(p string) {
	c.Helper()
	_, err := c.L.Lookup(c.Ctx, p)
	c.Errno(err, syscall.ENOENT, "lookup %s (should be gone)", p)
}

// WantMode fails unless a has the file type and permission bits mode.
func (c *C) WantMode(a layer.Attr, mode uint32, what string) {
	c.Helper()
	if a.Mode != mode {
		c.Fatalf("%s: mode %#o, want %#o", what, a.Mode, mode)
	}
}

// WantSize fails unless a has size n.
func (c *C) WantSize(a layer.Attr, n uint64, what string) {
	c.Helper()
	if a.Size != n {
		c.Fatalf("%s: size %d, want %d", what, a.Size, n)
	}
}

func testRoot(c *C) {
	a := c.Lookup("/")
	if !a.IsDir() {
		c.Fatalf("root mode %#o is not a directory", a.Mode)
	}
	if a.Gfid != layer.RootGfid {
		c.Fatalf("root gfid %v, want %v", a.Gfid, layer.RootGfid)
	}
	entries, err := layer.ReadDirAll(c.Ctx, c.L, "/")
	c.OK(err, "readdir of the empty root")
	if len(entries) != 0 {
		c.Fatalf("empty volume lists %d entries, first %q", len(entries), entries[0].Name)
	}
}

func testCreateLookup(c *C) {
	f, a := c.Create("/f", 0o640)
	c.Release(f)
	c.WantMode(a, syscall.S_IFREG|0o640, "create /f")
	if a.Uid != Owner.Uid || a.Gid != Owner.Gid {
		c.Fatalf("create /f: owner %d:%d, want %d:%d", a.Uid, a.Gid, Owner.Uid, Owner.Gid)
	}
	if a.Gfid.IsZero() || a.Nlink != 1 || a.Size != 0 {
		c.Fatalf("create /f: gfid %v nlink %d size %d, want a gfid, 1 link, size 0", a.Gfid, a.Nlink, a.Size)
	}
	l := c.Lookup("/f")
	if l.Gfid != a.Gfid || l.Mode != a.Mode || l.Uid != a.Uid {
		c.Fatalf("lookup /f = %+v, create returned %+v", l, a)
	}
	c.Gone("/g")
}

func testCreateFlags(c *C) {
	a := c.File("/f", "hello")
	_, _, err := c.L.Create(c.Ctx, "/f", layer.CreateIn{Owner: Owner, Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o600})
	c.Errno(err, syscall.EEXIST, "create O_EXCL of existing /f")
	f, b, err := c.L.Create(c.Ctx, "/f", layer.CreateIn{Owner: layer.Owner{Uid: 7, Gid: 7}, Flags: syscall.O_RDWR, Mode: 0o600})
	c.OK(err, "create without O_EXCL of existing /f")
	if b.Gfid != a.Gfid || b.Size != 5 || b.Uid != Owner.Uid || b.Mode != a.Mode {
		c.Fatalf("create of existing /f changed it: %+v, was %+v", b, a)
	}
	if got := c.ReadFile(f); got != "hello" {
		c.Fatalf("create of existing /f: content %q, want %q", got, "hello")
	}
	c.Release(f)
	f, b, err = c.L.Create(c.Ctx, "/f", layer.CreateIn{Owner: Owner, Flags: syscall.O_WRONLY | syscall.O_TRUNC, Mode: 0o600})
	c.OK(err, "create O_TRUNC of existing /f")
	c.Release(f)
	c.WantSize(b, 0, "create O_TRUNC of existing /f")
	c.WantSize(c.Lookup("/f"), 0, "lookup after create O_TRUNC")
}

func testOpenFlags(c *C) {
	c.File("/f", "hello")
	_, err := c.L.Open(c.Ctx, "/missing", syscall.O_RDONLY)
	c.Errno(err, syscall.ENOENT, "open /missing")
	f, err := c.L.Open(c.Ctx, "/f", syscall.O_RDWR)
	c.OK(err, "open /f O_RDWR")
	c.Write(f, "J", 0)
	c.Release(f)
	c.WantContent("/f", "Jello")
	f, err = c.L.Open(c.Ctx, "/f", syscall.O_WRONLY|syscall.O_TRUNC)
	c.OK(err, "open /f O_TRUNC")
	c.Release(f)
	c.WantSize(c.Lookup("/f"), 0, "after open O_TRUNC")
}

func testAppend(c *C) {
	c.File("/f", "abc")
	f, err := c.L.Open(c.Ctx, "/f", syscall.O_WRONLY|syscall.O_APPEND)
	c.OK(err, "open O_APPEND")
	c.Write(f, "de", 0)
	c.Write(f, "fg", 1)
	c.Release(f)
	c.WantContent("/f", "abcdefg")
	f, _, err = c.L.Create(c.Ctx, "/g", layer.CreateIn{Owner: Owner, Flags: syscall.O_WRONLY | syscall.O_APPEND, Mode: 0o644})
	c.OK(err, "create O_APPEND")
	c.Write(f, "12", 0)
	c.Write(f, "34", 0)
	c.Release(f)
	c.WantContent("/g", "1234")
}

func testReadWrite(c *C) {
	f, _ := c.Create("/f", 0o644)
	defer c.Release(f)
	c.Write(f, "0123456789", 0)
	c.Write(f, "ab", 3)
	c.Write(f, "XY", 12) // leaves a hole at 10, 11
	if got := string(c.ReadAt(f, 4, 2)); got != "2ab5" {
		c.Fatalf("read 4 at 2: %q, want %q", got, "2ab5")
	}
	if got := string(c.ReadAt(f, 100, 8)); got != "89\x00\x00XY" {
		c.Fatalf("read across hole to EOF: %q, want %q", got, "89\x00\x00XY")
	}
	if got := c.ReadAt(f, 10, 14); len(got) != 0 {
		c.Fatalf("read at EOF returned %d bytes", len(got))
	}
	if got := c.ReadAt(f, 10, 1000); len(got) != 0 {
		c.Fatalf("read past EOF returned %d bytes", len(got))
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	n, err := f.Write(c.Ctx, big, 1000)
	c.OK(err, "write 1 MiB")
	if n != len(big) {
		c.Fatalf("write 1 MiB: wrote %d", n)
	}
	if got := c.ReadAt(f, len(big)+10, 1000); !bytes.Equal(got, big) {
		c.Fatalf("read 1 MiB back: got %d bytes, equal=%v", len(got), bytes.Equal(got, big))
	}
	a, err := f.Getattr(c.Ctx)
	c.OK(err, "getattr")
	c.WantSize(a, uint64(1000+len(big)), "after 1 MiB write")
}

func testSparseLarge(c *C) {
	const off = 5 << 30
	f, _ := c.Create("/big", 0o644)
	defer c.Release(f)
	c.Write(f, "x", off)
	a, err := f.Getattr(c.Ctx)
	c.OK(err, "getattr of sparse file")
	c.WantSize(a, off+1, "sparse file")
	if a.Blocks > 2048 {
		c.Fatalf("sparse 5 GiB file uses %d blocks of 512 bytes", a.Blocks)
	}
	if got := string(c.ReadAt(f, 2, off-1)); got != "\x00x" {
		c.Fatalf("read at 5 GiB - 1: %q", got)
	}
	if got := c.ReadAt(f, 4, 1<<30); !bytes.Equal(got, make([]byte, 4)) {
		c.Fatalf("read in hole: %q, want zeros", got)
	}
}

func testTruncate(c *C) {
	c.File("/f", "0123456789")
	a, err := c.L.Setattr(c.Ctx, "/f", layer.SetattrIn{Valid: layer.SetSize, Size: 4})
	c.OK(err, "truncate /f to 4")
	c.WantSize(a, 4, "setattr result")
	c.WantContent("/f", "0123")
	_, err = c.L.Setattr(c.Ctx, "/f", layer.SetattrIn{Valid: layer.SetSize, Size: 6})
	c.OK(err, "grow /f to 6")
	c.WantContent("/f", "0123\x00\x00")
	f, err := c.L.Open(c.Ctx, "/f", syscall.O_RDWR)
	c.OK(err, "open /f")
	a, err = f.Setattr(c.Ctx, layer.SetattrIn{Valid: layer.SetSize, Size: 2})
	c.OK(err, "ftruncate to 2")
	c.WantSize(a, 2, "ftruncate result")
	if got := c.ReadFile(f); got != "01" {
		c.Fatalf("after ftruncate: %q, want %q", got, "01")
	}
	c.Release(f)
	c.Mkdir("/d")
	_, err = c.L.Setattr(c.Ctx, "/d", layer.SetattrIn{Valid: layer.SetSize, Size: 0})
	c.Errno(err, syscall.EISDIR, "truncate a directory")
}

func testFsync(c *C) {
	f, _ := c.Create("/f", 0o644)
	defer c.Release(f)
	c.Write(f, "data", 0)
	c.OK(f.Fsync(c.Ctx, false), "fsync")
	c.OK(f.Fsync(c.Ctx, true), "fdatasync")
	c.OK(f.Flush(c.Ctx, 1), "flush")
}

func testFallocate(c *C) {
	f, _ := c.Create("/f", 0o644)
	defer c.Release(f)
	err := f.Fallocate(c.Ctx, 0, 0, 1<<20)
	if e := layer.ToErrno(err); e == syscall.EOPNOTSUPP {
		c.Skip("fallocate not supported")
	}
	c.OK(err, "fallocate 1 MiB")
	a, err := f.Getattr(c.Ctx)
	c.OK(err, "getattr")
	c.WantSize(a, 1<<20, "after fallocate")
	if a.Blocks < 2048 {
		c.Fatalf("after fallocate of 1 MiB: %d blocks", a.Blocks)
	}
}
