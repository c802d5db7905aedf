package posix

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

func TestPlainFilesOnBrick(t *testing.T) {
	s, dir := newBrick(t, "")
	s.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755})
	f, _, err := s.Create(ctx, "/d/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	f.Write(ctx, []byte("plain"), 0)
	f.Release(ctx)
	if b, err := os.ReadFile(filepath.Join(dir, "d", "f")); err != nil || string(b) != "plain" {
		t.Fatalf("brick file: %q %v", b, err)
	}
}

func TestLinktoRoundTrip(t *testing.T) {
	s, dir := newBrick(t, "")
	a, err := s.Mknod(ctx, "/p", layer.MknodIn{Mode: 0o644, Linkto: "vol-client-3"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Mode != syscall.S_IFREG|01000 || a.Linkto != "vol-client-3" {
		t.Fatalf("mknod linkto: mode %#o linkto %q", a.Mode, a.Linkto)
	}
	if l, _ := s.Lookup(ctx, "/p"); l.Linkto != "vol-client-3" || l.Gfid != a.Gfid {
		t.Fatalf("lookup: linkto %q", l.Linkto)
	}
	page, _ := s.Readdir(ctx, "/", 0, 10)
	if len(page.Entries) != 1 || page.Entries[0].Attr.Linkto != "vol-client-3" {
		t.Fatalf("readdir: %+v", page.Entries)
	}
	// Open refuses a pointer (it holds no data) with EREMOTE, so that
	// distribute follows it; Create on the name opens it and says so.
	if _, err := s.Open(ctx, "/p", syscall.O_RDONLY); err != syscall.EREMOTE {
		t.Fatalf("open of a pointer: %v, want EREMOTE", err)
	}
	f, ca, err := s.Create(ctx, "/p", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil || ca.Linkto != "vol-client-3" {
		t.Fatalf("create over a pointer: linkto %q, %v", ca.Linkto, err)
	}
	if fa, _ := f.Getattr(ctx); fa.Linkto != "vol-client-3" {
		t.Fatalf("File.Getattr linkto %q", fa.Linkto)
	}
	f.Release(ctx)
	// A file that merely has mode 01000 but no xattr is no pointer.
	s.Mknod(ctx, "/q", layer.MknodIn{Mode: syscall.S_IFREG | 01000})
	if l, err := s.Lookup(ctx, "/q"); err != nil || l.Linkto != "" {
		t.Fatalf("plain 01000 file: linkto %q, %v", l.Linkto, err)
	}
	// Setattr refuses a pointer like Open does, and so does UnlinkData
	// (removing nothing), while Unlink removes pointers and UnlinkData
	// the rest.
	if _, err := s.Setattr(ctx, "/p", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o644}); err != syscall.EREMOTE {
		t.Fatalf("setattr of a pointer: %v, want EREMOTE", err)
	}
	if err := s.UnlinkData(ctx, "/p"); err != syscall.EREMOTE {
		t.Fatalf("UnlinkData of a pointer: %v, want EREMOTE", err)
	}
	if _, err := s.Lookup(ctx, "/p"); err != nil {
		t.Fatalf("the pointer after UnlinkData refused it: %v", err)
	}
	s.Mknod(ctx, "/p2", layer.MknodIn{Mode: 0o644, Linkto: "vol-client-3"})
	if err := s.Unlink(ctx, "/p2"); err != nil {
		t.Fatalf("Unlink of a pointer: %v", err)
	}
	if err := s.UnlinkData(ctx, "/q"); err != nil {
		t.Fatalf("UnlinkData of a plain file: %v", err)
	}
	if _, err := s.Lookup(ctx, "/q"); err != syscall.ENOENT {
		t.Fatalf("a file after UnlinkData: %v, want ENOENT", err)
	}
	if err := s.UnlinkData(ctx, "/"); err != syscall.EISDIR {
		t.Fatalf("UnlinkData of the root: %v, want EISDIR", err)
	}
	// Other modes never report a linkto.
	if err := os.Chmod(filepath.Join(dir, "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.Lookup(ctx, "/p"); l.Linkto != "" {
		t.Fatalf("chmodded pointer still reports linkto %q", l.Linkto)
	}
}

func TestReaddirPaging2000(t *testing.T) {
	for _, parent := range []string{"", "/dev/shm"} {
		if parent != "" && !isTmpfs(parent) {
			continue
		}
		t.Run("fs="+parent, func(t *testing.T) {
			s, dir := newBrick(t, parent)
			const n = 2000
			for i := 0; i < n; i++ {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			seen := map[string]int{}
			var cookies []uint64
			var cookie uint64
			for pages := 0; ; pages++ {
				if pages > n {
					t.Fatal("no end")
				}
				page, err := s.Readdir(ctx, "/", cookie, 13)
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Entries) > 13 {
					t.Fatalf("page of %d entries", len(page.Entries))
				}
				for _, e := range page.Entries {
					seen[e.Name]++
					if e.Attr.Gfid.IsZero() {
						t.Fatalf("%s without gfid", e.Name)
					}
				}
				if page.EOF {
					break
				}
				cookies = append(cookies, cookie)
				cookie = page.Next
			}
			if len(seen) != n {
				t.Fatalf("%d names seen, want %d", len(seen), n)
			}
			for name, k := range seen {
				if k != 1 {
					t.Fatalf("%s seen %d times", name, k)
				}
			}
			// Cookies are stable: the same cookie gives the same page.
			for _, c := range cookies[len(cookies)/2 : len(cookies)/2+3] {
				p1, _ := s.Readdir(ctx, "/", c, 13)
				p2, _ := s.Readdir(ctx, "/", c, 13)
				if len(p1.Entries) != 13 || p1.Next != p2.Next || p1.Entries[0].Name != p2.Entries[0].Name {
					t.Fatalf("cookie %d: pages differ", c)
				}
			}
		})
	}
}

func TestOperatorFilesGetGfids(t *testing.T) {
	s, dir := newBrick(t, "")
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	os.Symlink("f", filepath.Join(dir, "l"))
	os.Link(filepath.Join(dir, "f"), filepath.Join(dir, "h"))
	a, err := s.Lookup(ctx, "/f")
	if err != nil || a.Gfid.IsZero() {
		t.Fatalf("operator file: %v %v", a.Gfid, err)
	}
	if b, _ := s.Lookup(ctx, "/f"); b.Gfid != a.Gfid {
		t.Fatal("gfid not stable")
	}
	if h, _ := s.Lookup(ctx, "/h"); h.Gfid != a.Gfid {
		t.Fatal("hard link has another gfid")
	}
	l, err := s.Lookup(ctx, "/l")
	if err != nil || l.Gfid.IsZero() || l.Gfid == a.Gfid {
		t.Fatalf("operator symlink: %v %v", l.Gfid, err)
	}
	var g layer.Gfid
	if _, err := unix.Lgetxattr(filepath.Join(dir, "l"), XattrGfid, g[:]); err != nil || g != l.Gfid {
		t.Fatalf("symlink gfid xattr: %v %v", g, err)
	}
}

func TestSetgidDirectory(t *testing.T) {
	s, _ := newBrick(t, "")
	if _, err := s.Mkdir(ctx, "/g", layer.MkdirIn{Owner: layer.Owner{Uid: 5, Gid: 77}, Mode: 0o2775}); err != nil {
		t.Fatal(err)
	}
	o := layer.Owner{Uid: 6, Gid: 88}
	d, err := s.Mkdir(ctx, "/g/d", layer.MkdirIn{Owner: o, Mode: 0o755})
	if err != nil || d.Gid != 77 || d.Uid != 6 || d.Mode != syscall.S_IFDIR|0o2755 {
		t.Fatalf("dir in setgid dir: %d:%d %#o %v", d.Uid, d.Gid, d.Mode, err)
	}
	f, a, err := s.Create(ctx, "/g/f", layer.CreateIn{Owner: o, Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil || a.Gid != 77 || a.Mode != syscall.S_IFREG|0o644 {
		t.Fatalf("file in setgid dir: %d %#o %v", a.Gid, a.Mode, err)
	}
	f.Release(ctx)
	l, err := s.Symlink(ctx, "/g/l", layer.SymlinkIn{Owner: o, Target: "f"})
	if err != nil || l.Gid != 77 {
		t.Fatalf("symlink in setgid dir: %d %v", l.Gid, err)
	}
	n, err := s.Mkdir(ctx, "/plain", layer.MkdirIn{Owner: o, Mode: 0o755})
	if err != nil || n.Gid != 88 || n.Mode != syscall.S_IFDIR|0o755 {
		t.Fatalf("dir in plain dir: %d %#o %v", n.Gid, n.Mode, err)
	}
}

func TestModeExact(t *testing.T) {
	s, _ := newBrick(t, "")
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	f, a, err := s.Create(ctx, "/f", layer.CreateIn{Owner: layer.Owner{Uid: 3, Gid: 3}, Flags: syscall.O_RDWR, Mode: 0o6777})
	if err != nil || a.Mode != syscall.S_IFREG|0o6777 {
		t.Fatalf("create 6777 under umask 077: %#o %v", a.Mode, err)
	}
	f.Release(ctx)
	d, err := s.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o1777})
	if err != nil || d.Mode != syscall.S_IFDIR|0o1777 {
		t.Fatalf("mkdir 1777: %#o %v", d.Mode, err)
	}
}

func TestMknodTypes(t *testing.T) {
	s, _ := newBrick(t, "")
	rdev := unix.Mkdev(1, 3)
	c, err := s.Mknod(ctx, "/null", layer.MknodIn{Mode: syscall.S_IFCHR | 0o666, Rdev: rdev})
	if err != nil || c.Mode != syscall.S_IFCHR|0o666 || c.Rdev != rdev {
		t.Fatalf("char dev: %#o %d %v", c.Mode, c.Rdev, err)
	}
	b, err := s.Mknod(ctx, "/blk", layer.MknodIn{Mode: syscall.S_IFBLK | 0o600, Rdev: unix.Mkdev(7, 0)})
	if err != nil || b.Mode&syscall.S_IFMT != syscall.S_IFBLK {
		t.Fatalf("block dev: %#o %v", b.Mode, err)
	}
	so, err := s.Mknod(ctx, "/sock", layer.MknodIn{Mode: syscall.S_IFSOCK | 0o644})
	if err != nil || so.Mode != syscall.S_IFSOCK|0o644 {
		t.Fatalf("socket: %#o %v", so.Mode, err)
	}
	// The brick never opens a device or fifo.
	_, err = s.Open(ctx, "/null", syscall.O_RDONLY)
	wantErrno(t, err, syscall.ENXIO, "open a device")
	s.Mknod(ctx, "/fifo", layer.MknodIn{Mode: syscall.S_IFIFO | 0o644})
	_, err = s.Open(ctx, "/fifo", syscall.O_WRONLY)
	wantErrno(t, err, syscall.ENXIO, "open a fifo")
	_, err = s.Setattr(ctx, "/fifo", layer.SetattrIn{Valid: layer.SetSize})
	wantErrno(t, err, syscall.EINVAL, "truncate a fifo")
	// xattr work on a fifo does not open it.
	if _, err := s.Listxattr(ctx, "/fifo"); err != nil {
		t.Fatalf("listxattr of a fifo: %v", err)
	}
}

func TestOpenDirectory(t *testing.T) {
	s, _ := newBrick(t, "")
	s.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755})
	f, err := s.Open(ctx, "/d", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	_, err = f.Read(ctx, make([]byte, 10), 0)
	wantErrno(t, err, syscall.EISDIR, "read a directory")
	if a, err := f.Getattr(ctx); err != nil || !a.IsDir() {
		t.Fatalf("getattr: %v", err)
	}
	_, err = s.Open(ctx, "/d", syscall.O_RDWR)
	wantErrno(t, err, syscall.EISDIR, "open a directory for writing")
	_, err = s.Open(ctx, "/d", syscall.O_RDONLY|syscall.O_CREAT)
	wantErrno(t, err, syscall.EINVAL, "Open with O_CREAT")
	_, _, err = s.Create(ctx, "/d", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	wantErrno(t, err, syscall.EISDIR, "create over a directory")
	_, _, err = s.Create(ctx, "/d", layer.CreateIn{Flags: syscall.O_RDONLY, Mode: 0o644})
	wantErrno(t, err, syscall.EISDIR, "create O_RDONLY over a directory")
}

func TestRootOperations(t *testing.T) {
	s, _ := newBrick(t, "")
	wantErrno(t, s.Rmdir(ctx, "/"), syscall.EBUSY, "rmdir /")
	wantErrno(t, s.Unlink(ctx, "/"), syscall.EISDIR, "unlink /")
	wantErrno(t, s.Rename(ctx, "/", "/x", 0), syscall.EBUSY, "rename /")
	_, err := s.Mkdir(ctx, "/", layer.MkdirIn{Mode: 0o755})
	wantErrno(t, err, syscall.EEXIST, "mkdir /")
	if err := s.Setxattr(ctx, "/", "user.v", []byte("1"), 0); err != nil {
		t.Fatalf("setxattr on /: %v", err)
	}
	if a, err := s.Setattr(ctx, "/", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o711}); err != nil ||
		a.Mode != syscall.S_IFDIR|0o711 || a.Gfid != layer.RootGfid {
		t.Fatalf("chmod /: %#o %v", a.Mode, err)
	}
}

// alignedBuf returns n bytes aligned for direct I/O.
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := int(4096 - uintptr(unsafe.Pointer(&b[0]))%4096)
	return b[off : off+n]
}

func testDirect(t *testing.T, parent string) {
	s, _ := newBrick(t, parent)
	f, _, err := s.Create(ctx, "/d", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_DIRECT, Mode: 0o644})
	if err != nil {
		t.Fatalf("create O_DIRECT: %v", err)
	}
	defer f.Release(ctx)
	t.Logf("direct I/O in use: %v", f.(*file).direct)
	blk := alignedBuf(4096)
	for i := range blk {
		blk[i] = 'a'
	}
	if n, err := f.Write(ctx, blk, 0); err != nil || n != 4096 {
		t.Fatalf("aligned write: %d %v", n, err)
	}
	if n, err := f.Write(ctx, []byte("xyz"), 10); err != nil || n != 3 {
		t.Fatalf("unaligned write: %d %v", n, err)
	}
	p := make([]byte, 5)
	if n, err := f.Read(ctx, p, 9); err != nil || n != 5 || string(p) != "axyza" {
		t.Fatalf("unaligned read: %q %v", p[:n], err)
	}
	rb := alignedBuf(4096)
	if n, err := f.Read(ctx, rb, 0); err != nil || n != 4096 || string(rb[8:14]) != "aaxyza" {
		t.Fatalf("aligned read: %d %q %v", n, rb[8:14], err)
	}
	g, err := s.Open(ctx, "/d", syscall.O_RDONLY|syscall.O_DIRECT)
	if err != nil {
		t.Fatalf("open O_DIRECT: %v", err)
	}
	defer g.Release(ctx)
	if n, err := g.Read(ctx, p, 4094); err != nil || n != 2 {
		t.Fatalf("short unaligned read at EOF: %d %v", n, err)
	}
}

func TestDirectIO(t *testing.T) { testDirect(t, "") }

func TestDirectIOTmpfs(t *testing.T) {
	if !isTmpfs("/dev/shm") {
		t.Skip("no tmpfs at /dev/shm")
	}
	testDirect(t, "/dev/shm")
}

func TestDirectIOUnlinked(t *testing.T) {
	s, _ := newBrick(t, "")
	f, _, err := s.Create(ctx, "/d", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_DIRECT, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	if !f.(*file).direct {
		t.Skip("brick file system refuses O_DIRECT")
	}
	s.Unlink(ctx, "/d")
	// The buffered descriptor is opened only now, on an unlinked file.
	if _, err := f.Write(ctx, []byte("odd"), 1); err != nil {
		t.Fatalf("unaligned write to unlinked direct file: %v", err)
	}
	if f.(*file).buf < 0 {
		t.Fatal("unaligned I/O did not use the buffered descriptor")
	}
	p := make([]byte, 4)
	if n, _ := f.Read(ctx, p, 0); n != 4 || string(p) != "\x00odd" {
		t.Fatalf("read back %q", p[:n])
	}
}

func openFds(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// The store's operations, failed ones included, leave no descriptor open.
func TestNoFdLeak(t *testing.T) {
	s, dir := newBrick(t, "")
	os.Symlink("/etc", filepath.Join(dir, "etc"))
	before := openFds(t)
	for i := 0; i < 3; i++ {
		s.Mkdir(ctx, "/a", layer.MkdirIn{Mode: 0o755})
		s.Mkdir(ctx, "/a/b", layer.MkdirIn{Mode: 0o755})
		f, _, err := s.Create(ctx, "/a/b/f", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_DIRECT, Mode: 0o644})
		if err == nil {
			f.Write(ctx, []byte("x"), 1)
			f.Release(ctx)
		}
		s.Lookup(ctx, "/a/b/f")
		s.Lookup(ctx, "/a/b/missing")
		s.Lookup(ctx, "/etc/passwd")
		s.Setattr(ctx, "/a/b/f", layer.SetattrIn{Valid: layer.SetSize | layer.SetMode, Size: 3, Mode: 0o600})
		s.Setxattr(ctx, "/a/b/f", "user.x", []byte("1"), 0)
		s.Listxattr(ctx, "/a/b/f")
		s.Readdir(ctx, "/a/b", 0, 10)
		s.Readdir(ctx, "/etc", 0, 10)
		s.Link(ctx, "/a/b/f", "/a/g")
		s.Rename(ctx, "/a/g", "/a/b/h", 0)
		s.Symlink(ctx, "/a/b/l", layer.SymlinkIn{Target: "f"})
		s.Readlink(ctx, "/a/b/l")
		s.Mknod(ctx, "/a/b/p", layer.MknodIn{Mode: syscall.S_IFIFO | 0o644})
		s.Open(ctx, "/a/b/p", syscall.O_RDONLY)
		s.Unlink(ctx, "/a/b/f")
		s.Unlink(ctx, "/a/b/h")
		s.Unlink(ctx, "/a/b/l")
		s.Unlink(ctx, "/a/b/p")
		s.Rmdir(ctx, "/a/b")
		s.Rmdir(ctx, "/a")
	}
	if after := openFds(t); after != before {
		t.Fatalf("%d descriptors open before, %d after", before, after)
	}
}

// New inodes have exactly the mode asked for when the brick makes them
// with it at once (no chmod): whatever the umask (the brick reads it once,
// and a stale reading must not matter), and under a default ACL set on
// the brick by hand, which the kernel applies instead of the umask.
func TestModeExactWithoutChmod(t *testing.T) {
	s, dir := newBrick(t, "")
	check := func(where string) {
		t.Helper()
		if _, err := s.Mkdir(ctx, where, layer.MkdirIn{Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
		for _, m := range []uint32{0o644, 0o600, 0o755, 0o664} {
			p := fmt.Sprintf("%s/f%o", where, m)
			f, a, err := s.Create(ctx, p, layer.CreateIn{Flags: syscall.O_RDWR, Mode: m})
			if err != nil || a.Mode != syscall.S_IFREG|m {
				t.Fatalf("create %s %#o: %#o %v", p, m, a.Mode, err)
			}
			f.Release(ctx)
			if l, err := s.Lookup(ctx, p); err != nil || l.Mode != syscall.S_IFREG|m {
				t.Fatalf("lookup %s: %#o %v", p, l.Mode, err)
			}
			d := fmt.Sprintf("%s/d%o", where, m)
			if a, err := s.Mkdir(ctx, d, layer.MkdirIn{Mode: m}); err != nil || a.Mode != syscall.S_IFDIR|m {
				t.Fatalf("mkdir %s %#o: %#o %v", d, m, a.Mode, err)
			}
		}
	}
	defer func(f func() uint32) { processUmask = f }(processUmask)
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	processUmask = func() uint32 { return 0 } // stale: the kernel takes bits away
	check("/umask")
	syscall.Umask(0o022)
	processUmask = func() uint32 { return 0o022 }
	if err := os.Mkdir(filepath.Join(dir, "acl"), 0o755); err != nil {
		t.Fatal(err)
	}
	// user::rw-, group::---, other::--- as the directory's default ACL.
	acl := []byte{2, 0, 0, 0, 1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff, 4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}
	if err := unix.Setxattr(filepath.Join(dir, "acl"), "system.posix_acl_default", acl, 0); err != nil {
		t.Fatalf("a default ACL on the brick's directory: %v", err)
	}
	check("/acl/d")
}
