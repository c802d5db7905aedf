package posixtest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func testChmod(t *testing.T, dir string) {
	f := filepath.Join(dir, "f")
	writeFile(t, f, nil, 0o644)
	for _, mode := range []uint32{0o600, 0o755, 0o4755, 0o2750, 0o1777, 0} {
		noErr(t, "chmod", unix.Chmod(f, mode))
		if st := lstat(t, f); st.Mode != unix.S_IFREG|mode {
			t.Fatalf("chmod %o: mode %o", mode, st.Mode)
		}
	}
	fd := open(t, f, unix.O_RDONLY, 0)
	noErr(t, "fchmod", unix.Fchmod(fd, 0o640))
	if st := lstat(t, f); st.Mode != unix.S_IFREG|0o640 {
		t.Fatalf("fchmod: mode %o", st.Mode)
	}
	d := filepath.Join(dir, "d")
	noErr(t, "mkdir", unix.Mkdir(d, 0o755))
	noErr(t, "chmod dir", unix.Chmod(d, 0o700))
	if st := lstat(t, d); st.Mode != unix.S_IFDIR|0o700 {
		t.Fatalf("chmod dir: mode %o", st.Mode)
	}
	// Creation modes are masked by the umask of the caller.
	old := unix.Umask(0o027)
	defer unix.Umask(old)
	writeFile(t, filepath.Join(dir, "masked"), nil, 0o666)
	if st := lstat(t, filepath.Join(dir, "masked")); st.Mode&0o777 != 0o640 {
		t.Fatalf("mode under umask 027: %o", st.Mode&0o777)
	}
}

func testChown(t *testing.T, dir string) {
	needRoot(t)
	f := filepath.Join(dir, "f")
	writeFile(t, f, nil, 0o644)
	noErr(t, "chown", unix.Chown(f, 1234, 5678))
	if st := lstat(t, f); st.Uid != 1234 || st.Gid != 5678 {
		t.Fatalf("owner %d:%d", st.Uid, st.Gid)
	}
	noErr(t, "chown gid only", unix.Chown(f, -1, 42))
	if st := lstat(t, f); st.Uid != 1234 || st.Gid != 42 {
		t.Fatalf("owner %d:%d after gid change", st.Uid, st.Gid)
	}
	fd := open(t, f, unix.O_RDONLY, 0)
	noErr(t, "fchown", unix.Fchown(fd, 7, -1))
	if st := lstat(t, f); st.Uid != 7 || st.Gid != 42 {
		t.Fatalf("owner %d:%d after fchown", st.Uid, st.Gid)
	}
	// chown clears set-user-id.
	noErr(t, "chmod", unix.Chmod(f, 0o4755))
	noErr(t, "chown", unix.Chown(f, 8, 8))
	if st := lstat(t, f); st.Mode&0o4000 != 0 {
		t.Errorf("chown kept the set-user-id bit: %o", st.Mode)
	}
	l := filepath.Join(dir, "l")
	noErr(t, "symlink", unix.Symlink("f", l))
	noErr(t, "lchown", unix.Lchown(l, 99, 98))
	if st := lstat(t, l); st.Uid != 99 || st.Gid != 98 {
		t.Fatalf("symlink owner %d:%d", st.Uid, st.Gid)
	}
	if st := lstat(t, f); st.Uid != 8 {
		t.Fatalf("lchown changed the target: uid %d", st.Uid)
	}
}

func testSetgidDir(t *testing.T, dir string) {
	needRoot(t)
	d := filepath.Join(dir, "d")
	noErr(t, "mkdir", unix.Mkdir(d, 0o755))
	noErr(t, "chown", unix.Chown(d, 0, 4242))
	noErr(t, "chmod", unix.Chmod(d, 0o2775))
	writeFile(t, filepath.Join(d, "f"), nil, 0o644)
	noErr(t, "mkdir", unix.Mkdir(filepath.Join(d, "sub"), 0o755))
	if st := lstat(t, filepath.Join(d, "f")); st.Gid != 4242 {
		t.Errorf("file in set-group-ID dir has gid %d, want 4242", st.Gid)
	}
	st := lstat(t, filepath.Join(d, "sub"))
	if st.Gid != 4242 || st.Mode&unix.S_ISGID == 0 {
		t.Errorf("dir in set-group-ID dir: gid %d mode %o, want gid 4242 and set-group-ID", st.Gid, st.Mode)
	}
}

func testUtimens(t *testing.T, dir string) {
	f := filepath.Join(dir, "f")
	writeFile(t, f, []byte("x"), 0o644)
	ts := []unix.Timespec{{Sec: 1000000001, Nsec: 123456789}, {Sec: 1500000002, Nsec: 987654321}}
	noErr(t, "utimensat", unix.UtimesNanoAt(unix.AT_FDCWD, f, ts, 0))
	st := lstat(t, f)
	if st.Atim != ts[0] || st.Mtim != ts[1] {
		t.Fatalf("times %v %v, want %v", st.Atim, st.Mtim, ts)
	}
	// Only mtime; atime is left alone.
	ts2 := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Sec: 1600000000, Nsec: 1}}
	noErr(t, "utimensat omit", unix.UtimesNanoAt(unix.AT_FDCWD, f, ts2, 0))
	st = lstat(t, f)
	if st.Atim != ts[0] || st.Mtim != ts2[1] {
		t.Fatalf("times %v %v after UTIME_OMIT", st.Atim, st.Mtim)
	}
	// Now.
	var before unix.Timespec
	noErr(t, "clock", unix.ClockGettime(unix.CLOCK_REALTIME, &before))
	now := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
	noErr(t, "utimensat now", unix.UtimesNanoAt(unix.AT_FDCWD, f, now, 0))
	st = lstat(t, f)
	if st.Mtim.Sec < before.Sec-1 || st.Atim.Sec < before.Sec-1 {
		t.Fatalf("UTIME_NOW gave %v %v, before %v", st.Atim, st.Mtim, before)
	}
	// A write moves mtime forward.
	old := []unix.Timespec{{Sec: 1000}, {Sec: 1000}}
	noErr(t, "utimensat", unix.UtimesNanoAt(unix.AT_FDCWD, f, old, 0))
	fd := open(t, f, unix.O_WRONLY, 0)
	_, err := unix.Write(fd, []byte("y"))
	noErr(t, "write", err)
	if st := fstat(t, fd); st.Mtim.Sec < before.Sec-1 {
		t.Fatalf("mtime after write: %v", st.Mtim)
	}
	// Symlinks have their own times.
	l := filepath.Join(dir, "l")
	noErr(t, "symlink", unix.Symlink("f", l))
	noErr(t, "lutimes", unix.UtimesNanoAt(unix.AT_FDCWD, l, ts, unix.AT_SYMLINK_NOFOLLOW))
	if st := lstat(t, l); st.Mtim != ts[1] {
		t.Fatalf("symlink mtime %v", st.Mtim)
	}
}

func testXattr(t *testing.T, dir string) {
	f := filepath.Join(dir, "f")
	writeFile(t, f, nil, 0o644)
	val := []byte("a value\x00with nul")
	noErr(t, "setxattr", unix.Setxattr(f, "user.one", val, 0))
	noErr(t, "setxattr", unix.Setxattr(f, "user.two", []byte("2"), 0))
	noErr(t, "setxattr empty", unix.Setxattr(f, "user.empty", nil, 0))

	sz, err := unix.Getxattr(f, "user.one", nil)
	if err != nil || sz != len(val) {
		t.Fatalf("getxattr size probe: %d, %v", sz, err)
	}
	buf := make([]byte, 4)
	_, err = unix.Getxattr(f, "user.one", buf)
	wantErrno(t, "getxattr small buffer", err, unix.ERANGE)
	buf = make([]byte, 100)
	sz, err = unix.Getxattr(f, "user.one", buf)
	if err != nil || !bytes.Equal(buf[:sz], val) {
		t.Fatalf("getxattr: %q, %v", buf[:sz], err)
	}
	sz, err = unix.Getxattr(f, "user.empty", buf)
	if err != nil || sz != 0 {
		t.Fatalf("getxattr empty: %d, %v", sz, err)
	}
	_, err = unix.Getxattr(f, "user.missing", buf)
	wantErrno(t, "getxattr missing", err, unix.ENODATA)

	names := listxattr(t, f)
	for _, want := range []string{"user.one", "user.two", "user.empty"} {
		if !slices.Contains(names, want) {
			t.Fatalf("listxattr %q misses %s", names, want)
		}
	}
	wantErrno(t, "XATTR_CREATE existing", unix.Setxattr(f, "user.one", val, unix.XATTR_CREATE), unix.EEXIST)
	wantErrno(t, "XATTR_REPLACE missing", unix.Setxattr(f, "user.new", val, unix.XATTR_REPLACE), unix.ENODATA)
	noErr(t, "XATTR_REPLACE", unix.Setxattr(f, "user.one", []byte("replaced"), unix.XATTR_REPLACE))
	sz, _ = unix.Getxattr(f, "user.one", buf)
	if string(buf[:sz]) != "replaced" {
		t.Fatalf("after replace: %q", buf[:sz])
	}
	noErr(t, "removexattr", unix.Removexattr(f, "user.two"))
	wantErrno(t, "removexattr missing", unix.Removexattr(f, "user.two"), unix.ENODATA)
	if slices.Contains(listxattr(t, f), "user.two") {
		t.Fatal("removed xattr still listed")
	}
	big := pattern(4000, 5)
	noErr(t, "setxattr 4000 bytes", unix.Setxattr(f, "user.big", big, 0))
	sz, err = unix.Getxattr(f, "user.big", make([]byte, 8192))
	if err != nil || sz != len(big) {
		t.Fatalf("getxattr big: %d, %v", sz, err)
	}
	// On directories too.
	noErr(t, "setxattr dir", unix.Setxattr(dir, "user.dir", []byte("d"), 0))
	sz, err = unix.Getxattr(dir, "user.dir", buf)
	if err != nil || string(buf[:sz]) != "d" {
		t.Fatalf("getxattr dir: %q, %v", buf[:sz], err)
	}
}

func listxattr(t *testing.T, path string) []string {
	t.Helper()
	sz, err := unix.Listxattr(path, nil)
	noErr(t, "listxattr size probe", err)
	if sz > 0 {
		_, err = unix.Listxattr(path, make([]byte, 1))
		wantErrno(t, "listxattr small buffer", err, unix.ERANGE)
	}
	buf := make([]byte, sz+64)
	sz, err = unix.Listxattr(path, buf)
	noErr(t, "listxattr", err)
	return strings.Split(strings.TrimSuffix(string(buf[:sz]), "\x00"), "\x00")
}

func testStatfs(t *testing.T, dir string) {
	var st unix.Statfs_t
	noErr(t, "statfs", unix.Statfs(dir, &st))
	if st.Blocks == 0 || st.Bsize == 0 || st.Bavail > st.Blocks || st.Bfree > st.Blocks {
		t.Fatalf("statfs: %+v", st)
	}
	if st.Namelen != 255 {
		t.Errorf("namelen %d, want 255", st.Namelen)
	}
	f := filepath.Join(dir, "f")
	writeFile(t, f, nil, 0o644)
	fd := open(t, f, unix.O_RDONLY, 0)
	var fst unix.Statfs_t
	noErr(t, "fstatfs", unix.Fstatfs(fd, &fst))
	if fst.Blocks != st.Blocks || fst.Type != st.Type {
		t.Fatalf("fstatfs differs: %+v vs %+v", fst, st)
	}
}

func testFifo(t *testing.T, dir string) {
	p := filepath.Join(dir, "fifo")
	noErr(t, "mkfifo", unix.Mkfifo(p, 0o644))
	if st := lstat(t, p); st.Mode != unix.S_IFIFO|0o644 {
		t.Fatalf("fifo mode %o", st.Mode)
	}
	wantErrno(t, "mkfifo existing", unix.Mkfifo(p, 0o644), unix.EEXIST)
	fd := open(t, p, unix.O_RDWR|unix.O_NONBLOCK, 0)
	_, err := unix.Write(fd, []byte("through the pipe"))
	noErr(t, "write fifo", err)
	buf := make([]byte, 64)
	n, err := unix.Read(fd, buf)
	if err != nil || string(buf[:n]) != "through the pipe" {
		t.Fatalf("read fifo: %q, %v", buf[:n], err)
	}
	noErr(t, "unlink fifo", unix.Unlink(p))

	// An empty regular file made by mknod.
	r := filepath.Join(dir, "reg")
	noErr(t, "mknod regular", unix.Mknod(r, unix.S_IFREG|0o600, 0))
	if st := lstat(t, r); st.Mode != unix.S_IFREG|0o600 || st.Size != 0 {
		t.Fatalf("mknod regular: mode %o size %d", st.Mode, st.Size)
	}
	if isRoot() {
		c := filepath.Join(dir, "null")
		dev := int(unix.Mkdev(1, 3))
		noErr(t, "mknod char device", unix.Mknod(c, unix.S_IFCHR|0o666, dev))
		if st := lstat(t, c); st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != uint64(dev) {
			t.Fatalf("char device: mode %o rdev %x", st.Mode, st.Rdev)
		}
	}
}

const nobody = 65534

// asNobody runs script with sh -c in dir as uid and gid 65534. The shell
// changes to dir itself: see run.
func asNobody(dir, script string) (string, error) {
	cmd := run(`cd "$0" && `+script, dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func testAccess(t *testing.T, dir string) {
	needRoot(t)
	pub := filepath.Join(dir, "public")
	secret := filepath.Join(dir, "secret")
	writeFile(t, pub, []byte("public"), 0o644)
	writeFile(t, secret, []byte("secret"), 0o600)
	noErr(t, "chmod", os.Chmod(pub, 0o644))
	noErr(t, "chmod", os.Chmod(secret, 0o600))
	if out, err := asNobody(dir, "cat public"); err != nil || out != "public" {
		t.Fatalf("uid %d cannot read a 0644 file in %s (%q, %v): the directory and its parents "+
			"must be searchable and a FUSE mount must use allow_other", nobody, dir, out, err)
	}
	deny := func(what, script string) {
		t.Helper()
		out, err := asNobody(dir, script)
		if err == nil || !strings.Contains(out, "Permission denied") && !strings.Contains(out, "not permitted") {
			t.Errorf("%s as uid %d: %q, %v; want EACCES or EPERM", what, nobody, out, err)
		}
	}
	deny("read 0600 file", "cat secret")
	deny("write 0644 file", "echo x >> public")
	deny("create in 0755 dir", "echo x > new")
	deny("unlink in 0755 dir", "rm -f public")
	deny("chmod other's file", "chmod 777 public")
	checkContent(t, secret, []byte("secret"))

	// In a world-writable directory the user creates files it owns.
	open := filepath.Join(dir, "open")
	noErr(t, "mkdir", os.Mkdir(open, 0o777))
	noErr(t, "chmod", os.Chmod(open, 0o777))
	if out, err := asNobody(open, "echo mine > mine && mkdir sub && cat mine"); err != nil || out != "mine\n" {
		t.Fatalf("create as uid %d: %q, %v", nobody, out, err)
	}
	for _, name := range []string{"mine", "sub"} {
		if st := lstat(t, filepath.Join(open, name)); st.Uid != nobody || st.Gid != nobody {
			t.Errorf("%s created by uid %d is owned by %d:%d", name, nobody, st.Uid, st.Gid)
		}
	}
	// Sticky directory: others' files cannot be removed.
	noErr(t, "chmod sticky", unix.Chmod(open, 0o1777))
	writeFile(t, filepath.Join(open, "roots"), nil, 0o666)
	out, err := asNobody(open, "rm -f roots")
	if err == nil || !strings.Contains(out, "not permitted") && !strings.Contains(out, "denied") {
		t.Errorf("remove root's file from sticky dir as uid %d: %q, %v", nobody, out, err)
	}
	if !exists(filepath.Join(open, "roots")) {
		t.Error("sticky dir: file removed by another user")
	}
}
