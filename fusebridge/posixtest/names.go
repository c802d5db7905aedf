package posixtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func testMkdirRmdir(t *testing.T, dir string) {
	d := filepath.Join(dir, "d")
	noErr(t, "mkdir", unix.Mkdir(d, 0o750))
	st := lstat(t, d)
	if st.Mode != unix.S_IFDIR|0o750 {
		t.Fatalf("mode %o", st.Mode)
	}
	wantErrno(t, "mkdir existing", unix.Mkdir(d, 0o755), unix.EEXIST)
	noErr(t, "mkdir nested", unix.Mkdir(filepath.Join(d, "sub"), 0o755))
	if st := lstat(t, d); st.Nlink != 3 {
		t.Errorf("nlink of dir with one subdir: %d, want 3", st.Nlink)
	}
	writeFile(t, filepath.Join(d, "sub", "f"), []byte("x"), 0o644)
	wantErrno(t, "rmdir non-empty", unix.Rmdir(d), unix.ENOTEMPTY, unix.EEXIST)
	wantErrno(t, "rmdir file", unix.Rmdir(filepath.Join(d, "sub", "f")), unix.ENOTDIR)
	wantErrno(t, "unlink dir", unix.Unlink(filepath.Join(d, "sub")), unix.EISDIR, unix.EPERM)
	noErr(t, "unlink", unix.Unlink(filepath.Join(d, "sub", "f")))
	noErr(t, "rmdir sub", unix.Rmdir(filepath.Join(d, "sub")))
	noErr(t, "rmdir", unix.Rmdir(d))
	if exists(d) {
		t.Fatal("dir exists after rmdir")
	}
	wantErrno(t, "rmdir missing", unix.Rmdir(d), unix.ENOENT)

	// A directory removed while it is the working directory of an open
	// descriptor: creating in it fails.
	noErr(t, "mkdir", unix.Mkdir(d, 0o755))
	fd := open(t, d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	noErr(t, "rmdir", unix.Rmdir(d))
	_, err := unix.Openat(fd, "x", unix.O_CREAT|unix.O_WRONLY, 0o644)
	wantErrno(t, "create in removed dir", err, unix.ENOENT)
}

func testRenameFile(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	noErr(t, "mkdir", os.Mkdir(a, 0o755))
	noErr(t, "mkdir", os.Mkdir(b, 0o755))
	writeFile(t, filepath.Join(a, "f"), []byte("one"), 0o644)
	ino := lstat(t, filepath.Join(a, "f")).Ino

	noErr(t, "rename in dir", unix.Rename(filepath.Join(a, "f"), filepath.Join(a, "g")))
	noErr(t, "rename across dirs", unix.Rename(filepath.Join(a, "g"), filepath.Join(b, "h")))
	if exists(filepath.Join(a, "f")) || exists(filepath.Join(a, "g")) {
		t.Fatal("old names still exist")
	}
	st := lstat(t, filepath.Join(b, "h"))
	if st.Ino != ino {
		t.Fatalf("inode changed on rename: %d -> %d", ino, st.Ino)
	}
	checkContent(t, filepath.Join(b, "h"), []byte("one"))

	// Over an existing file: the target is replaced.
	writeFile(t, filepath.Join(a, "other"), []byte("two"), 0o644)
	noErr(t, "rename over file", unix.Rename(filepath.Join(b, "h"), filepath.Join(a, "other")))
	checkContent(t, filepath.Join(a, "other"), []byte("one"))
	if st := lstat(t, filepath.Join(a, "other")); st.Ino != ino || st.Nlink != 1 {
		t.Fatalf("after rename over: ino %d nlink %d", st.Ino, st.Nlink)
	}
	if exists(filepath.Join(b, "h")) {
		t.Fatal("source exists after rename over")
	}

	// RENAME_NOREPLACE.
	writeFile(t, filepath.Join(a, "x"), []byte("x"), 0o644)
	err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(a, "x"), unix.AT_FDCWD, filepath.Join(a, "other"), unix.RENAME_NOREPLACE)
	wantErrno(t, "RENAME_NOREPLACE over existing", err, unix.EEXIST)
	err = unix.Renameat2(unix.AT_FDCWD, filepath.Join(a, "x"), unix.AT_FDCWD, filepath.Join(b, "y"), unix.RENAME_NOREPLACE)
	noErr(t, "RENAME_NOREPLACE", err)
	checkContent(t, filepath.Join(b, "y"), []byte("x"))

	// Renaming a name onto another name of the same inode does nothing.
	noErr(t, "link", unix.Link(filepath.Join(b, "y"), filepath.Join(b, "z")))
	noErr(t, "rename onto hard link", unix.Rename(filepath.Join(b, "y"), filepath.Join(b, "z")))
	if !exists(filepath.Join(b, "y")) || !exists(filepath.Join(b, "z")) {
		t.Fatal("rename onto a hard link of itself removed a name")
	}
}

func testRenameDir(t *testing.T, dir string) {
	// a/b/c/f; rename a/b to x/b2 and use the files below through the new
	// names, including descriptors opened before.
	deep := filepath.Join(dir, "a", "b", "c")
	noErr(t, "mkdir", os.MkdirAll(deep, 0o755))
	noErr(t, "mkdir", os.Mkdir(filepath.Join(dir, "x"), 0o755))
	writeFile(t, filepath.Join(deep, "f"), []byte("deep"), 0o644)
	fd := open(t, filepath.Join(deep, "f"), unix.O_RDWR, 0)
	cfd := open(t, deep, unix.O_RDONLY|unix.O_DIRECTORY, 0)

	noErr(t, "rename dir", unix.Rename(filepath.Join(dir, "a", "b"), filepath.Join(dir, "x", "b2")))
	if exists(filepath.Join(dir, "a", "b")) {
		t.Fatal("old dir name exists")
	}
	moved := filepath.Join(dir, "x", "b2", "c", "f")
	checkContent(t, moved, []byte("deep"))
	_, err := unix.Pwrite(fd, []byte("DEEP"), 0)
	noErr(t, "write through old descriptor", err)
	checkContent(t, moved, []byte("DEEP"))
	// Create through a descriptor of a directory that moved.
	nfd, err := unix.Openat(cfd, "new", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	noErr(t, "openat in moved dir", err)
	unix.Close(nfd)
	if !exists(filepath.Join(dir, "x", "b2", "c", "new")) {
		t.Fatal("file created in moved dir is not at its new path")
	}
	if st := lstat(t, filepath.Join(dir, "x")); st.Nlink != 3 {
		t.Errorf("nlink of new parent: %d, want 3", st.Nlink)
	}
	if st := lstat(t, filepath.Join(dir, "a")); st.Nlink != 2 {
		t.Errorf("nlink of old parent: %d, want 2", st.Nlink)
	}

	// Over an empty directory.
	noErr(t, "mkdir", os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	noErr(t, "rename over empty dir", unix.Rename(filepath.Join(dir, "x", "b2"), filepath.Join(dir, "empty")))
	checkContent(t, filepath.Join(dir, "empty", "c", "f"), []byte("DEEP"))
	// And back: directories can move up and down the tree.
	noErr(t, "rename up", unix.Rename(filepath.Join(dir, "empty", "c"), filepath.Join(dir, "c")))
	checkContent(t, filepath.Join(dir, "c", "f"), []byte("DEEP"))
}

func testRenameErrors(t *testing.T, dir string) {
	d, e := filepath.Join(dir, "d"), filepath.Join(dir, "e")
	f := filepath.Join(dir, "f")
	noErr(t, "mkdir", os.MkdirAll(filepath.Join(d, "sub"), 0o755))
	noErr(t, "mkdir", os.MkdirAll(filepath.Join(e, "full"), 0o755))
	writeFile(t, f, []byte("f"), 0o644)

	wantErrno(t, "rename file over dir", unix.Rename(f, e), unix.EISDIR)
	wantErrno(t, "rename dir over file", unix.Rename(d, f), unix.ENOTDIR)
	wantErrno(t, "rename dir over non-empty dir", unix.Rename(d, e), unix.ENOTEMPTY, unix.EEXIST)
	wantErrno(t, "rename dir into itself", unix.Rename(d, filepath.Join(d, "sub", "d")), unix.EINVAL)
	wantErrno(t, "rename missing", unix.Rename(filepath.Join(dir, "nope"), filepath.Join(dir, "x")), unix.ENOENT)
	wantErrno(t, "rename into missing dir", unix.Rename(f, filepath.Join(dir, "nope", "f")), unix.ENOENT)

	// RENAME_EXCHANGE swaps, or fails with EINVAL where unsupported.
	g := filepath.Join(dir, "g")
	writeFile(t, g, []byte("g"), 0o644)
	err := unix.Renameat2(unix.AT_FDCWD, f, unix.AT_FDCWD, g, unix.RENAME_EXCHANGE)
	if err == nil {
		checkContent(t, f, []byte("g"))
		checkContent(t, g, []byte("f"))
	} else {
		wantErrno(t, "RENAME_EXCHANGE", err, unix.EINVAL)
		checkContent(t, f, []byte("f"))
	}
}

func testRenameOverOpen(t *testing.T, dir string) {
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	writeFile(t, src, []byte("new content"), 0o644)
	writeFile(t, dst, []byte("old"), 0o644)
	fd := open(t, dst, unix.O_RDONLY, 0)
	noErr(t, "rename", unix.Rename(src, dst))
	buf := make([]byte, 32)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil || string(buf[:n]) != "old" {
		t.Fatalf("replaced file through open descriptor: %q, %v", buf[:n], err)
	}
	if st := fstat(t, fd); st.Nlink != 0 || st.Size != 3 {
		t.Fatalf("fstat of replaced file: nlink %d size %d", st.Nlink, st.Size)
	}
	checkContent(t, dst, []byte("new content"))
}

func testHardLinks(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "sub", "b")
	noErr(t, "mkdir", os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	writeFile(t, a, []byte("shared"), 0o644)
	noErr(t, "link", unix.Link(a, b))
	sa, sb := lstat(t, a), lstat(t, b)
	if sa.Ino != sb.Ino || sa.Nlink != 2 || sb.Nlink != 2 {
		t.Fatalf("after link: ino %d/%d nlink %d/%d", sa.Ino, sb.Ino, sa.Nlink, sb.Nlink)
	}
	wantErrno(t, "link to existing name", unix.Link(a, b), unix.EEXIST)
	wantErrno(t, "link a directory", unix.Link(dir, filepath.Join(dir, "d")), unix.EPERM)

	fd := open(t, b, unix.O_WRONLY|unix.O_APPEND, 0)
	_, err := unix.Write(fd, []byte("+"))
	noErr(t, "write through link", err)
	checkContent(t, a, []byte("shared+"))

	noErr(t, "link 3", unix.Link(b, filepath.Join(dir, "c")))
	if st := lstat(t, a); st.Nlink != 3 {
		t.Fatalf("nlink %d, want 3", st.Nlink)
	}
	noErr(t, "unlink a", unix.Unlink(a))
	if st := lstat(t, b); st.Nlink != 2 {
		t.Fatalf("nlink after unlink: %d, want 2", st.Nlink)
	}
	noErr(t, "chmod through b", unix.Chmod(b, 0o600))
	if st := lstat(t, filepath.Join(dir, "c")); st.Mode&0o777 != 0o600 {
		t.Fatalf("mode through other link: %o", st.Mode)
	}
	noErr(t, "rename b", unix.Rename(b, filepath.Join(dir, "b2")))
	checkContent(t, filepath.Join(dir, "c"), []byte("shared+"))
	checkContent(t, filepath.Join(dir, "b2"), []byte("shared+"))
}

func testSymlinks(t *testing.T, dir string) {
	target := filepath.Join(dir, "target")
	writeFile(t, target, []byte("pointed"), 0o644)
	l := filepath.Join(dir, "l")
	noErr(t, "symlink", unix.Symlink("target", l))
	st := lstat(t, l)
	if st.Mode&unix.S_IFMT != unix.S_IFLNK || st.Size != int64(len("target")) {
		t.Fatalf("lstat symlink: mode %o size %d", st.Mode, st.Size)
	}
	got, err := os.Readlink(l)
	if err != nil || got != "target" {
		t.Fatalf("readlink: %q, %v", got, err)
	}
	checkContent(t, l, []byte("pointed"))
	var fst unix.Stat_t
	noErr(t, "stat through symlink", unix.Stat(l, &fst))
	if fst.Mode&unix.S_IFMT != unix.S_IFREG {
		t.Fatalf("stat follows to mode %o", fst.Mode)
	}
	wantErrno(t, "symlink over existing", unix.Symlink("x", l), unix.EEXIST)

	// Dangling, absolute and long targets.
	noErr(t, "dangling", unix.Symlink("does/not/exist", filepath.Join(dir, "dangling")))
	_, err = os.ReadFile(filepath.Join(dir, "dangling"))
	if !os.IsNotExist(err) {
		t.Fatalf("read dangling: %v", err)
	}
	long := strings.Repeat("x/", 1000) + "end"
	noErr(t, "long target", unix.Symlink(long, filepath.Join(dir, "long")))
	if got, _ := os.Readlink(filepath.Join(dir, "long")); got != long {
		t.Fatal("long target changed")
	}
	noErr(t, "absolute", unix.Symlink("/etc/hostname", filepath.Join(dir, "abs")))
	if got, _ := os.Readlink(filepath.Join(dir, "abs")); got != "/etc/hostname" {
		t.Fatalf("absolute target: %q", got)
	}
	// A symlink to a directory, walked through.
	noErr(t, "mkdir", os.Mkdir(filepath.Join(dir, "d"), 0o755))
	writeFile(t, filepath.Join(dir, "d", "in"), []byte("in"), 0o644)
	noErr(t, "symlink dir", unix.Symlink("d", filepath.Join(dir, "ld")))
	checkContent(t, filepath.Join(dir, "ld", "in"), []byte("in"))
	noErr(t, "unlink symlink", unix.Unlink(l))
	checkContent(t, target, []byte("pointed"))
}

func testErrors(t *testing.T, dir string) {
	f := filepath.Join(dir, "f")
	writeFile(t, f, []byte("f"), 0o644)
	_, err := unix.Open(filepath.Join(dir, "missing"), unix.O_RDONLY, 0)
	wantErrno(t, "open missing", err, unix.ENOENT)
	_, err = unix.Open(filepath.Join(dir, "missing", "x"), unix.O_CREAT|unix.O_WRONLY, 0o644)
	wantErrno(t, "create in missing dir", err, unix.ENOENT)
	_, err = unix.Open(filepath.Join(f, "x"), unix.O_RDONLY, 0)
	wantErrno(t, "open below a file", err, unix.ENOTDIR)
	wantErrno(t, "mkdir below a file", unix.Mkdir(filepath.Join(f, "d"), 0o755), unix.ENOTDIR)
	_, err = unix.Open(dir, unix.O_WRONLY, 0)
	wantErrno(t, "open dir for writing", err, unix.EISDIR)
	_, err = unix.Open(f, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	wantErrno(t, "O_DIRECTORY on a file", err, unix.ENOTDIR)
	wantErrno(t, "mkdir over file", unix.Mkdir(f, 0o755), unix.EEXIST)
	wantErrno(t, "unlink missing", unix.Unlink(filepath.Join(dir, "missing")), unix.ENOENT)

	long := strings.Repeat("n", 256)
	_, err = unix.Open(filepath.Join(dir, long), unix.O_CREAT|unix.O_WRONLY, 0o644)
	wantErrno(t, "create 256-byte name", err, unix.ENAMETOOLONG)
	var st unix.Stat_t
	wantErrno(t, "stat 256-byte name", unix.Lstat(filepath.Join(dir, long), &st), unix.ENAMETOOLONG)
	wantErrno(t, "mkdir 256-byte name", unix.Mkdir(filepath.Join(dir, long), 0o755), unix.ENAMETOOLONG)
	ok := strings.Repeat("n", 255)
	writeFile(t, filepath.Join(dir, ok), []byte("255"), 0o644)
	checkContent(t, filepath.Join(dir, ok), []byte("255"))
	noErr(t, "unlink 255-byte name", unix.Unlink(filepath.Join(dir, ok)))

	// Names with odd bytes.
	for _, name := range []string{"sp ace", "new\nline", "ütf-8 ☃", "-dash", ".hidden", "..dots"} {
		p := filepath.Join(dir, name)
		writeFile(t, p, []byte(name), 0o644)
		checkContent(t, p, []byte(name))
	}
}
