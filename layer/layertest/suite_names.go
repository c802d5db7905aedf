package layertest

import (
	"strings"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

func testMkdir(c *C) {
	a, err := c.L.Mkdir(c.Ctx, "/d", layer.MkdirIn{Owner: Owner, Mode: 0o750})
	c.OK(err, "mkdir /d")
	c.WantMode(a, syscall.S_IFDIR|0o750, "mkdir /d")
	if a.Uid != Owner.Uid || a.Gid != Owner.Gid || a.Gfid.IsZero() {
		c.Fatalf("mkdir /d: owner %d:%d gfid %v", a.Uid, a.Gid, a.Gfid)
	}
	c.WantMode(c.Lookup("/d"), syscall.S_IFDIR|0o750, "lookup /d")
	_, err = c.L.Mkdir(c.Ctx, "/d", layer.MkdirIn{Owner: Owner, Mode: 0o755})
	c.Errno(err, syscall.EEXIST, "mkdir existing /d")
	c.Mkdir("/d/e")
	c.File("/f", "")
	_, err = c.L.Mkdir(c.Ctx, "/f", layer.MkdirIn{Owner: Owner, Mode: 0o755})
	c.Errno(err, syscall.EEXIST, "mkdir over file /f")
	_, err = c.L.Mkdir(c.Ctx, "/f/x", layer.MkdirIn{Owner: Owner, Mode: 0o755})
	c.Errno(err, syscall.ENOTDIR, "mkdir under file /f")
	_, err = c.L.Mkdir(c.Ctx, "/nope/x", layer.MkdirIn{Owner: Owner, Mode: 0o755})
	c.Errno(err, syscall.ENOENT, "mkdir under missing /nope")
}

func testRmdir(c *C) {
	c.Mkdir("/d")
	c.Mkdir("/d/e")
	c.File("/f", "")
	c.Errno(c.L.Rmdir(c.Ctx, "/d"), syscall.ENOTEMPTY, "rmdir non-empty /d")
	c.Errno(c.L.Rmdir(c.Ctx, "/f"), syscall.ENOTDIR, "rmdir file /f")
	c.Errno(c.L.Rmdir(c.Ctx, "/missing"), syscall.ENOENT, "rmdir /missing")
	c.OK(c.L.Rmdir(c.Ctx, "/d/e"), "rmdir /d/e")
	c.OK(c.L.Rmdir(c.Ctx, "/d"), "rmdir /d")
	c.Gone("/d")
}

func testUnlink(c *C) {
	c.Mkdir("/d")
	c.File("/f", "x")
	c.Errno(c.L.Unlink(c.Ctx, "/d"), syscall.EISDIR, "unlink directory /d")
	c.Errno(c.L.Unlink(c.Ctx, "/missing"), syscall.ENOENT, "unlink /missing")
	c.Errno(c.L.Unlink(c.Ctx, "/f/x"), syscall.ENOTDIR, "unlink under file /f")
	c.OK(c.L.Unlink(c.Ctx, "/f"), "unlink /f")
	c.Gone("/f")
}

func testUnlinkOpen(c *C) {
	f, _ := c.Create("/f", 0o644)
	defer c.Release(f)
	c.Write(f, "hello", 0)
	c.OK(c.L.Unlink(c.Ctx, "/f"), "unlink open /f")
	c.Gone("/f")
	if got := c.ReadFile(f); got != "hello" {
		c.Fatalf("read unlinked file: %q", got)
	}
	c.Write(f, " world", 5)
	if got := c.ReadFile(f); got != "hello world" {
		c.Fatalf("read unlinked file after write: %q", got)
	}
	a, err := f.Getattr(c.Ctx)
	c.OK(err, "getattr of unlinked file")
	if a.Nlink != 0 {
		c.Fatalf("unlinked file has nlink %d", a.Nlink)
	}
}

func testRenameFiles(c *C) {
	c.Mkdir("/a")
	c.Mkdir("/b")
	a := c.File("/a/x", "one")
	c.OK(c.L.Rename(c.Ctx, "/a/x", "/b/y", 0), "rename /a/x to /b/y")
	c.Gone("/a/x")
	if got := c.Lookup("/b/y"); got.Gfid != a.Gfid {
		c.Fatalf("rename changed the gfid: %v, was %v", got.Gfid, a.Gfid)
	}
	c.WantContent("/b/y", "one")
	old := c.File("/a/t", "old")
	src := c.File("/s", "new")
	c.OK(c.L.Rename(c.Ctx, "/s", "/a/t", 0), "rename /s over existing /a/t")
	c.Gone("/s")
	c.WantContent("/a/t", "new")
	if got := c.Lookup("/a/t"); got.Gfid != src.Gfid || got.Gfid == old.Gfid {
		c.Fatalf("replaced /a/t has gfid %v, want the source's %v", got.Gfid, src.Gfid)
	}
	c.OK(c.L.Rename(c.Ctx, "/a/t", "/a/t", 0), "rename /a/t onto itself")
	c.WantContent("/a/t", "new")
	c.Errno(c.L.Rename(c.Ctx, "/missing", "/z", 0), syscall.ENOENT, "rename /missing")
	c.Errno(c.L.Rename(c.Ctx, "/a/t", "/nope/z", 0), syscall.ENOENT, "rename into missing /nope")
	c.Errno(c.L.Rename(c.Ctx, "/a/t", "/b", 0), syscall.EISDIR, "rename file over directory")
}

func testRenameDirs(c *C) {
	c.Mkdir("/d")
	c.File("/d/f", "in d")
	c.Mkdir("/e")
	c.Mkdir("/full")
	c.File("/full/x", "")
	c.File("/file", "")
	c.Mkdir("/d/sub")
	da := c.Lookup("/d")
	c.Errno(c.L.Rename(c.Ctx, "/d", "/file", 0), syscall.ENOTDIR, "rename dir over file")
	c.Errno(c.L.Rename(c.Ctx, "/d", "/full", 0), syscall.ENOTEMPTY, "rename dir over non-empty dir")
	c.Errno(c.L.Rename(c.Ctx, "/d", "/d/sub/x", 0), syscall.EINVAL, "rename dir into its own subdir")
	c.OK(c.L.Rename(c.Ctx, "/d", "/e", 0), "rename dir over empty dir")
	c.Gone("/d")
	if got := c.Lookup("/e"); got.Gfid != da.Gfid {
		c.Fatalf("renamed dir has gfid %v, want %v", got.Gfid, da.Gfid)
	}
	c.WantContent("/e/f", "in d")
	c.OK(c.L.Rename(c.Ctx, "/e", "/full/moved", 0), "rename dir into another dir")
	c.WantContent("/full/moved/f", "in d")
}

func testRenameNoReplace(c *C) {
	c.File("/a", "a")
	c.File("/b", "b")
	err := c.L.Rename(c.Ctx, "/a", "/b", layer.RenameNoReplace)
	c.Errno(err, syscall.EEXIST, "rename no-replace onto existing")
	c.WantContent("/b", "b")
	c.OK(c.L.Rename(c.Ctx, "/a", "/c", layer.RenameNoReplace), "rename no-replace to a new name")
	c.Gone("/a")
	c.WantContent("/c", "a")
}

func testLink(c *C) {
	a := c.File("/f", "data")
	c.Mkdir("/d")
	l, err := c.L.Link(c.Ctx, "/f", "/d/g")
	c.OK(err, "link /f /d/g")
	if l.Gfid != a.Gfid || l.Nlink != 2 {
		c.Fatalf("link result: gfid %v nlink %d, want gfid %v nlink 2", l.Gfid, l.Nlink, a.Gfid)
	}
	for _, p := range []string{"/f", "/d/g"} {
		if got := c.Lookup(p); got.Nlink != 2 || got.Gfid != a.Gfid {
			c.Fatalf("lookup %s: nlink %d gfid %v, want 2 and %v", p, got.Nlink, got.Gfid, a.Gfid)
		}
	}
	c.WantContent("/d/g", "data")
	_, err = c.L.Link(c.Ctx, "/f", "/d/g")
	c.Errno(err, syscall.EEXIST, "link onto existing name")
	_, err = c.L.Link(c.Ctx, "/d", "/d2")
	c.Errno(err, syscall.EPERM, "link a directory")
	_, err = c.L.Link(c.Ctx, "/missing", "/m2")
	c.Errno(err, syscall.ENOENT, "link /missing")
	c.OK(c.L.Unlink(c.Ctx, "/f"), "unlink /f")
	if got := c.Lookup("/d/g"); got.Nlink != 1 {
		c.Fatalf("after unlink of one name: nlink %d, want 1", got.Nlink)
	}
}

func testSymlink(c *C) {
	const target = "../some/where/else"
	a, err := c.L.Symlink(c.Ctx, "/l", layer.SymlinkIn{Owner: Owner, Target: target})
	c.OK(err, "symlink /l")
	if a.Mode&syscall.S_IFMT != syscall.S_IFLNK || a.Size != uint64(len(target)) || a.Gfid.IsZero() {
		c.Fatalf("symlink /l: mode %#o size %d gfid %v", a.Mode, a.Size, a.Gfid)
	}
	if a.Uid != Owner.Uid || a.Gid != Owner.Gid {
		c.Fatalf("symlink /l: owner %d:%d", a.Uid, a.Gid)
	}
	got, err := c.L.Readlink(c.Ctx, "/l")
	c.OK(err, "readlink /l")
	if got != target {
		c.Fatalf("readlink /l: %q, want %q", got, target)
	}
	if l := c.Lookup("/l"); l.Mode&syscall.S_IFMT != syscall.S_IFLNK || l.Gfid != a.Gfid {
		c.Fatalf("lookup /l: mode %#o gfid %v", l.Mode, l.Gfid)
	}
	c.File("/f", "")
	_, err = c.L.Readlink(c.Ctx, "/f")
	c.Errno(err, syscall.EINVAL, "readlink of a regular file")
	_, err = c.L.Symlink(c.Ctx, "/f", layer.SymlinkIn{Owner: Owner, Target: "x"})
	c.Errno(err, syscall.EEXIST, "symlink over existing /f")
	c.OK(c.L.Unlink(c.Ctx, "/l"), "unlink symlink")
	c.Gone("/l")
}

func testMknod(c *C) {
	a, err := c.L.Mknod(c.Ctx, "/p", layer.MknodIn{Owner: Owner, Mode: syscall.S_IFIFO | 0o640})
	c.OK(err, "mknod fifo")
	c.WantMode(a, syscall.S_IFIFO|0o640, "mknod fifo")
	c.WantMode(c.Lookup("/p"), syscall.S_IFIFO|0o640, "lookup fifo")
	if a.Gfid.IsZero() || a.Uid != Owner.Uid {
		c.Fatalf("mknod fifo: gfid %v uid %d", a.Gfid, a.Uid)
	}
	a, err = c.L.Mknod(c.Ctx, "/r", layer.MknodIn{Owner: Owner, Mode: syscall.S_IFREG | 0o600})
	c.OK(err, "mknod regular")
	c.WantMode(a, syscall.S_IFREG|0o600, "mknod regular")
	c.WantSize(a, 0, "mknod regular")
	_, err = c.L.Mknod(c.Ctx, "/r", layer.MknodIn{Owner: Owner, Mode: syscall.S_IFIFO | 0o600})
	c.Errno(err, syscall.EEXIST, "mknod over existing")
	c.OK(c.L.Unlink(c.Ctx, "/p"), "unlink fifo")
}

func testGfid(c *C) {
	a := c.File("/a", "")
	b := c.File("/b", "")
	d := c.Mkdir("/d")
	if a.Gfid == b.Gfid || a.Gfid == d.Gfid || b.Gfid == d.Gfid {
		c.Fatalf("gfids not distinct: %v %v %v", a.Gfid, b.Gfid, d.Gfid)
	}
	for i := 0; i < 3; i++ {
		if got := c.Lookup("/a"); got.Gfid != a.Gfid {
			c.Fatalf("lookup %d of /a: gfid %v, want %v", i, got.Gfid, a.Gfid)
		}
	}
	f, err := c.L.Open(c.Ctx, "/a", syscall.O_RDONLY)
	c.OK(err, "open /a")
	defer c.Release(f)
	fa, err := f.Getattr(c.Ctx)
	c.OK(err, "getattr /a")
	if fa.Gfid != a.Gfid {
		c.Fatalf("File.Getattr gfid %v, want %v", fa.Gfid, a.Gfid)
	}
	if a.Gfid.Ino() == b.Gfid.Ino() {
		c.Fatalf("distinct gfids fold to the same inode number")
	}
}

func testGfidGiven(c *C) {
	g1, g2, g3 := layer.NewGfid(), layer.NewGfid(), layer.NewGfid()
	o := Owner
	o.Gfid = g1
	d, err := c.L.Mkdir(c.Ctx, "/d", layer.MkdirIn{Owner: o, Mode: 0o755})
	c.OK(err, "mkdir with gfid")
	o.Gfid = g2
	f, a, err := c.L.Create(c.Ctx, "/f", layer.CreateIn{Owner: o, Flags: syscall.O_RDWR, Mode: 0o644})
	c.OK(err, "create with gfid")
	c.Release(f)
	o.Gfid = g3
	s, err := c.L.Symlink(c.Ctx, "/s", layer.SymlinkIn{Owner: o, Target: "t"})
	c.OK(err, "symlink with gfid")
	for _, x := range []struct {
		p    string
		got  layer.Gfid
		want layer.Gfid
	}{{"/d", d.Gfid, g1}, {"/f", a.Gfid, g2}, {"/s", s.Gfid, g3}} {
		if x.got != x.want {
			c.Fatalf("%s created with gfid %v, want %v", x.p, x.got, x.want)
		}
		if l := c.Lookup(x.p); l.Gfid != x.want {
			c.Fatalf("lookup %s: gfid %v, want %v", x.p, l.Gfid, x.want)
		}
	}
}

func testNameTooLong(c *C) {
	long := "/" + strings.Repeat("n", layer.NameMax+1)
	_, _, err := c.L.Create(c.Ctx, long, layer.CreateIn{Owner: Owner, Flags: syscall.O_RDWR, Mode: 0o644})
	c.Errno(err, syscall.ENAMETOOLONG, "create with a 256-byte name")
	_, err = c.L.Mkdir(c.Ctx, long, layer.MkdirIn{Owner: Owner, Mode: 0o755})
	c.Errno(err, syscall.ENAMETOOLONG, "mkdir with a 256-byte name")
	_, err = c.L.Lookup(c.Ctx, long)
	c.Errno(err, syscall.ENAMETOOLONG, "lookup of a 256-byte name")
	ok := "/" + strings.Repeat("n", layer.NameMax)
	c.File(ok, "max")
	c.WantContent(ok, "max")
}

func testMissingParent(c *C) {
	const p = "/nope/x"
	_, err := c.L.Lookup(c.Ctx, p)
	c.Errno(err, syscall.ENOENT, "lookup under missing dir")
	_, _, err = c.L.Create(c.Ctx, p, layer.CreateIn{Owner: Owner, Flags: syscall.O_RDWR, Mode: 0o644})
	c.Errno(err, syscall.ENOENT, "create under missing dir")
	_, err = c.L.Mkdir(c.Ctx, p, layer.MkdirIn{Owner: Owner, Mode: 0o755})
	c.Errno(err, syscall.ENOENT, "mkdir under missing dir")
	_, err = c.L.Symlink(c.Ctx, p, layer.SymlinkIn{Owner: Owner, Target: "t"})
	c.Errno(err, syscall.ENOENT, "symlink under missing dir")
	_, err = c.L.Mknod(c.Ctx, p, layer.MknodIn{Owner: Owner, Mode: syscall.S_IFIFO | 0o644})
	c.Errno(err, syscall.ENOENT, "mknod under missing dir")
	_, err = c.L.Open(c.Ctx, p, syscall.O_RDONLY)
	c.Errno(err, syscall.ENOENT, "open under missing dir")
	_, err = c.L.Readdir(c.Ctx, "/nope", 0, 10)
	c.Errno(err, syscall.ENOENT, "readdir of missing dir")
}
