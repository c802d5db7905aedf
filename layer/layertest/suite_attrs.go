package layertest

import (
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

func testSetattrPath(c *C) {
	c.File("/f", "0123456789")
	a, err := c.L.Setattr(c.Ctx, "/f", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o4711})
	c.OK(err, "chmod /f 4711")
	c.WantMode(a, syscall.S_IFREG|0o4711, "chmod result")
	c.WantMode(c.Lookup("/f"), syscall.S_IFREG|0o4711, "lookup after chmod")
	a, err = c.L.Setattr(c.Ctx, "/f", layer.SetattrIn{Valid: layer.SetUid | layer.SetGid | layer.SetMode,
		Uid: 2001, Gid: 2002, Mode: 0o2750})
	c.OK(err, "chown and chmod /f")
	if a.Uid != 2001 || a.Gid != 2002 || a.Mode != syscall.S_IFREG|0o2750 {
		c.Fatalf("chown+chmod: %d:%d mode %#o, want 2001:2002 mode %#o", a.Uid, a.Gid, a.Mode, syscall.S_IFREG|0o2750)
	}
	a, err = c.L.Setattr(c.Ctx, "/f", layer.SetattrIn{Valid: layer.SetGid, Gid: 3003})
	c.OK(err, "chgrp /f")
	if a.Uid != 2001 || a.Gid != 3003 {
		c.Fatalf("chgrp: %d:%d, want 2001:3003", a.Uid, a.Gid)
	}
	d := c.Mkdir("/d")
	a, err = c.L.Setattr(c.Ctx, "/d", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o1777})
	c.OK(err, "chmod /d 1777")
	c.WantMode(a, syscall.S_IFDIR|0o1777, "chmod dir")
	if a.Gfid != d.Gfid {
		c.Fatalf("setattr returned gfid %v, want %v", a.Gfid, d.Gfid)
	}
	_, err = c.L.Setattr(c.Ctx, "/missing", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o644})
	c.Errno(err, syscall.ENOENT, "chmod /missing")
	_, err = c.L.Symlink(c.Ctx, "/l", layer.SymlinkIn{Owner: Owner, Target: "/f"})
	c.OK(err, "symlink /l")
	a, err = c.L.Setattr(c.Ctx, "/l", layer.SetattrIn{Valid: layer.SetUid, Uid: 4004})
	c.OK(err, "lchown /l")
	if a.Uid != 4004 || c.Lookup("/f").Uid != 2001 {
		c.Fatalf("chown of a symlink: link uid %d, target uid %d (want 4004 and unchanged 2001)",
			a.Uid, c.Lookup("/f").Uid)
	}
}

func testSetattrFile(c *C) {
	f, _ := c.Create("/f", 0o644)
	defer c.Release(f)
	c.Write(f, "0123456789", 0)
	a, err := f.Setattr(c.Ctx, layer.SetattrIn{Valid: layer.SetMode | layer.SetUid, Mode: 0o600, Uid: 5005})
	c.OK(err, "fchmod+fchown")
	if a.Mode != syscall.S_IFREG|0o600 || a.Uid != 5005 || a.Gid != Owner.Gid {
		c.Fatalf("fchmod+fchown: mode %#o %d:%d", a.Mode, a.Uid, a.Gid)
	}
	a, err = f.Setattr(c.Ctx, layer.SetattrIn{Valid: layer.SetSize, Size: 3})
	c.OK(err, "ftruncate")
	c.WantSize(a, 3, "ftruncate")
	ts := layer.Timespec{Sec: 1_234_567_890, Nsec: 111_222_333}
	a, err = f.Setattr(c.Ctx, layer.SetattrIn{Valid: layer.SetMtime, Mtime: ts})
	c.OK(err, "futimens")
	if a.Mtime != ts {
		c.Fatalf("futimens: mtime %+v, want %+v", a.Mtime, ts)
	}
	if l := c.Lookup("/f"); l.Mtime != ts || l.Size != 3 || l.Uid != 5005 {
		c.Fatalf("lookup after File.Setattr: %+v", l)
	}
}

func testSetattrTimes(c *C) {
	c.File("/f", "x")
	at := layer.Timespec{Sec: 1_500_000_000, Nsec: 123_456_789}
	mt := layer.Timespec{Sec: 1_600_000_000, Nsec: 987_654_321}
	a, err := c.L.Setattr(c.Ctx, "/f", layer.SetattrIn{Valid: layer.SetAtime | layer.SetMtime, Atime: at, Mtime: mt})
	c.OK(err, "utimens /f")
	if a.Atime != at || a.Mtime != mt {
		c.Fatalf("utimens: atime %+v mtime %+v, want %+v %+v", a.Atime, a.Mtime, at, mt)
	}
	if l := c.Lookup("/f"); l.Atime != at || l.Mtime != mt {
		c.Fatalf("lookup after utimens: atime %+v mtime %+v, want %+v %+v", l.Atime, l.Mtime, at, mt)
	}
	before := time.Now().Add(-2 * time.Second).Unix()
	a, err = c.L.Setattr(c.Ctx, "/f", layer.SetattrIn{Valid: layer.SetMtimeNow})
	c.OK(err, "set mtime to now")
	after := time.Now().Add(2 * time.Second).Unix()
	if a.Mtime.Sec < before || a.Mtime.Sec > after {
		c.Fatalf("mtime now: %d, want within [%d, %d]", a.Mtime.Sec, before, after)
	}
	if a.Atime != at {
		c.Fatalf("setting mtime changed atime: %+v, want %+v", a.Atime, at)
	}
	c.Mkdir("/d")
	a, err = c.L.Setattr(c.Ctx, "/d", layer.SetattrIn{Valid: layer.SetAtime | layer.SetMtime, Atime: at, Mtime: mt})
	c.OK(err, "utimens /d")
	if a.Atime != at || a.Mtime != mt {
		c.Fatalf("utimens dir: atime %+v mtime %+v", a.Atime, a.Mtime)
	}
	_, err = c.L.Symlink(c.Ctx, "/l", layer.SymlinkIn{Owner: Owner, Target: "f"})
	c.OK(err, "symlink")
	a, err = c.L.Setattr(c.Ctx, "/l", layer.SetattrIn{Valid: layer.SetMtime, Mtime: layer.Timespec{Sec: 42}})
	c.OK(err, "utimens symlink")
	if a.Mtime.Sec != 42 || c.Lookup("/f").Mtime.Sec == 42 {
		c.Fatalf("utimens of a symlink followed it (link mtime %d)", a.Mtime.Sec)
	}
}

func testXattr(c *C) {
	c.File("/f", "")
	set := func(name, val string, flags uint32) error {
		return c.L.Setxattr(c.Ctx, "/f", name, []byte(val), flags)
	}
	get := func(name string) string {
		c.Helper()
		v, err := c.L.Getxattr(c.Ctx, "/f", name)
		c.OK(err, "getxattr %s", name)
		return string(v)
	}
	_, err := c.L.Getxattr(c.Ctx, "/f", "user.a")
	c.Errno(err, syscall.ENODATA, "getxattr of a missing attribute")
	c.Errno(set("user.a", "v1", 0x2 /* XATTR_REPLACE */), syscall.ENODATA, "setxattr REPLACE of missing")
	c.OK(set("user.a", "v1", 0x1 /* XATTR_CREATE */), "setxattr CREATE")
	c.Errno(set("user.a", "v2", 0x1), syscall.EEXIST, "setxattr CREATE of existing")
	if v := get("user.a"); v != "v1" {
		c.Fatalf("user.a = %q, want v1", v)
	}
	c.OK(set("user.a", "v2", 0x2), "setxattr REPLACE")
	if v := get("user.a"); v != "v2" {
		c.Fatalf("user.a = %q after replace, want v2", v)
	}
	big := string(make([]byte, 3000))
	c.OK(set("user.big", big, 0), "setxattr 3000 bytes")
	if v := get("user.big"); v != big {
		c.Fatalf("user.big: got %d bytes, want 3000", len(v))
	}
	c.OK(set("user.empty", "", 0), "setxattr empty value")
	if v := get("user.empty"); v != "" {
		c.Fatalf("user.empty = %q", v)
	}
	names, err := c.L.Listxattr(c.Ctx, "/f")
	c.OK(err, "listxattr")
	for _, want := range []string{"user.a", "user.big", "user.empty"} {
		if !slices.Contains(names, want) {
			c.Fatalf("listxattr %v lacks %s", names, want)
		}
	}
	c.OK(c.L.Removexattr(c.Ctx, "/f", "user.a"), "removexattr")
	_, err = c.L.Getxattr(c.Ctx, "/f", "user.a")
	c.Errno(err, syscall.ENODATA, "getxattr after remove")
	c.Errno(c.L.Removexattr(c.Ctx, "/f", "user.a"), syscall.ENODATA, "removexattr of missing")
	names, err = c.L.Listxattr(c.Ctx, "/f")
	c.OK(err, "listxattr")
	if slices.Contains(names, "user.a") {
		c.Fatalf("listxattr after remove: %v", names)
	}
	c.Mkdir("/d")
	c.OK(c.L.Setxattr(c.Ctx, "/d", "user.dir", []byte("yes"), 0), "setxattr on a directory")
	_, err = c.L.Getxattr(c.Ctx, "/missing", "user.a")
	c.Errno(err, syscall.ENOENT, "getxattr of /missing")
}

// mkTree makes n regular files plus a directory "d", a symlink "l" and a
// fifo "p" in dir, and returns the expected file type of every name.
func mkTree(c *C, dir string, n int) map[string]uint32 {
	want := map[string]uint32{"d": syscall.S_IFDIR, "l": syscall.S_IFLNK, "p": syscall.S_IFIFO}
	c.Mkdir(layer.Join(dir, "d"))
	_, err := c.L.Symlink(c.Ctx, layer.Join(dir, "l"), layer.SymlinkIn{Owner: Owner, Target: "d"})
	c.OK(err, "symlink")
	_, err = c.L.Mknod(c.Ctx, layer.Join(dir, "p"), layer.MknodIn{Owner: Owner, Mode: syscall.S_IFIFO | 0o644})
	c.OK(err, "mknod")
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("file-%04d", i)
		a, err := c.L.Mknod(c.Ctx, layer.Join(dir, name), layer.MknodIn{Owner: Owner, Mode: syscall.S_IFREG | 0o644})
		c.OK(err, "mknod %s", name)
		_ = a
		want[name] = syscall.S_IFREG
	}
	return want
}

// checkEntries fails unless entries hold every name of want exactly once,
// with its file type and a gfid.
func checkEntries(c *C, entries []layer.Entry, want map[string]uint32) {
	c.Helper()
	seen := map[string]bool{}
	for _, e := range entries {
		typ, ok := want[e.Name]
		if !ok {
			c.Fatalf("readdir: unexpected entry %q", e.Name)
		}
		if seen[e.Name] {
			c.Fatalf("readdir: %q listed twice", e.Name)
		}
		seen[e.Name] = true
		if e.Attr.Mode&syscall.S_IFMT != typ {
			c.Fatalf("readdir: %q has mode %#o, want type %#o", e.Name, e.Attr.Mode, typ)
		}
		if e.Attr.Gfid.IsZero() {
			c.Fatalf("readdir: %q has no gfid", e.Name)
		}
	}
	if len(seen) != len(want) {
		c.Fatalf("readdir: %d of %d names listed", len(seen), len(want))
	}
}

func testReaddir(c *C) {
	c.Mkdir("/dir")
	want := mkTree(c, "/dir", 5)
	entries, err := layer.ReadDirAll(c.Ctx, c.L, "/dir")
	c.OK(err, "readdir /dir")
	checkEntries(c, entries, want)
	for _, e := range entries {
		if l := c.Lookup("/dir/" + e.Name); l.Gfid != e.Attr.Gfid || l.Mode != e.Attr.Mode || l.Size != e.Attr.Size {
			c.Fatalf("readdir attr of %s differs from lookup: %+v vs %+v", e.Name, e.Attr, l)
		}
	}
	root, err := layer.ReadDirAll(c.Ctx, c.L, "/")
	c.OK(err, "readdir /")
	if len(root) != 1 || root[0].Name != "dir" {
		c.Fatalf("readdir /: %v, want just dir", root)
	}
	c.File("/file", "")
	_, err = c.L.Readdir(c.Ctx, "/file", 0, 10)
	c.Errno(err, syscall.ENOTDIR, "readdir of a file")
}

func testReaddirPaging(c *C) {
	c.Mkdir("/dir")
	want := mkTree(c, "/dir", 300)
	all, err := layer.ReadDirAll(c.Ctx, c.L, "/dir")
	c.OK(err, "ReadDirAll")
	checkEntries(c, all, want)
	var paged []layer.Entry
	var cookie uint64
	for i := 0; ; i++ {
		if i > 2*len(want) {
			c.Fatalf("readdir paging does not end")
		}
		page, err := c.L.Readdir(c.Ctx, "/dir", cookie, 7)
		c.OK(err, "readdir page %d at cookie %d", i, cookie)
		paged = append(paged, page.Entries...)
		if page.EOF {
			break
		}
		if len(page.Entries) == 0 && page.Next == cookie {
			c.Fatalf("readdir page %d: no progress at cookie %d", i, cookie)
		}
		cookie = page.Next
	}
	checkEntries(c, paged, want)
}

func testStatfs(c *C) {
	st, err := c.L.Statfs(c.Ctx, "/")
	c.OK(err, "statfs")
	if st.Blocks == 0 || st.Bsize == 0 || st.Frsize == 0 || st.NameLen == 0 || st.Bavail > st.Blocks {
		c.Fatalf("statfs: %+v", st)
	}
}
