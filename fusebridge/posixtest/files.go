package posixtest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func testOpenFlags(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	fd := open(t, p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o640)
	if st := fstat(t, fd); st.Mode != unix.S_IFREG|0o640 || st.Size != 0 {
		t.Fatalf("new file: mode %o size %d", st.Mode, st.Size)
	}
	_, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR, 0o644)
	wantErrno(t, "O_CREAT|O_EXCL on existing file", err, unix.EEXIST)
	_, err = unix.Write(fd, []byte("hello world"))
	noErr(t, "write", err)

	// O_CREAT without O_EXCL opens the existing file.
	fd2 := open(t, p, unix.O_CREAT|unix.O_RDONLY, 0o600)
	buf := make([]byte, 32)
	n, err := unix.Read(fd2, buf)
	noErr(t, "read", err)
	if string(buf[:n]) != "hello world" {
		t.Fatalf("read %q", buf[:n])
	}

	// O_APPEND writes at the end whatever the offset.
	fd3 := open(t, p, unix.O_WRONLY|unix.O_APPEND, 0)
	_, err = unix.Seek(fd3, 0, 0)
	noErr(t, "seek", err)
	_, err = unix.Write(fd3, []byte("!"))
	noErr(t, "append", err)
	checkContent(t, p, []byte("hello world!"))

	// O_TRUNC empties it.
	fd4 := open(t, p, unix.O_WRONLY|unix.O_TRUNC, 0)
	if st := fstat(t, fd4); st.Size != 0 {
		t.Fatalf("size after O_TRUNC: %d", st.Size)
	}
	checkContent(t, p, nil)
	_, err = unix.Write(fd4, []byte("new"))
	noErr(t, "write", err)
	checkContent(t, p, []byte("new"))

	// O_CREAT|O_TRUNC on an existing file keeps its mode.
	open(t, p, unix.O_CREAT|unix.O_TRUNC|unix.O_RDWR, 0o777)
	if st := lstat(t, p); st.Size != 0 || st.Mode&0o777 != 0o640 {
		t.Fatalf("after O_CREAT|O_TRUNC: size %d mode %o", st.Size, st.Mode)
	}
}

func testReadWrite(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	fd := open(t, p, unix.O_CREAT|unix.O_RDWR, 0o644)
	for _, w := range []struct {
		off  int64
		data string
	}{{0, "0123456789"}, {5, "abc"}, {20, "xyz"}, {1, "-"}} {
		n, err := unix.Pwrite(fd, []byte(w.data), w.off)
		if err != nil || n != len(w.data) {
			t.Fatalf("pwrite at %d: %d, %v", w.off, n, err)
		}
	}
	want := "0-234abc89\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00xyz"
	buf := make([]byte, 64)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil || string(buf[:n]) != want {
		t.Fatalf("pread: %q, %v; want %q", buf[:n], err, want)
	}
	n, err = unix.Pread(fd, buf[:4], 6)
	if err != nil || string(buf[:n]) != "bc89" {
		t.Fatalf("pread at 6: %q, %v", buf[:n], err)
	}
	n, err = unix.Pread(fd, buf, 100)
	if err != nil || n != 0 {
		t.Fatalf("pread past EOF: %d, %v", n, err)
	}
	if st := fstat(t, fd); st.Size != int64(len(want)) {
		t.Fatalf("size %d, want %d", st.Size, len(want))
	}
	// Sequential reads and writes through the file offset.
	fd2 := open(t, p, unix.O_RDWR, 0)
	_, err = unix.Seek(fd2, 2, 0)
	noErr(t, "seek", err)
	_, err = unix.Write(fd2, []byte("ZZ"))
	noErr(t, "write", err)
	n, err = unix.Read(fd2, buf[:3])
	if err != nil || string(buf[:n]) != "4ab" {
		t.Fatalf("read after write: %q, %v", buf[:n], err)
	}
}

func testLargeIO(t *testing.T, dir string) {
	p := filepath.Join(dir, "big")
	data := pattern(3<<20+12345, 7)
	fd := open(t, p, unix.O_CREAT|unix.O_RDWR, 0o644)
	n, err := unix.Pwrite(fd, data, 0)
	if err != nil || n != len(data) {
		t.Fatalf("pwrite: %d, %v", n, err)
	}
	// Unaligned overwrite across block boundaries.
	patch := pattern(200000, 9)
	_, err = unix.Pwrite(fd, patch, 1<<20-333)
	noErr(t, "pwrite", err)
	copy(data[1<<20-333:], patch)
	got := make([]byte, len(data)+10)
	n, err = unix.Pread(fd, got, 0)
	if err != nil || n != len(data) || !bytes.Equal(got[:n], data) {
		t.Fatalf("pread: %d bytes, %v, equal %v", n, err, bytes.Equal(got[:n], data))
	}
	checkContent(t, p, data)
}

func testSparse(t *testing.T, dir string) {
	p := filepath.Join(dir, "sparse")
	fd := open(t, p, unix.O_CREAT|unix.O_RDWR, 0o644)
	const off = 10 << 20
	_, err := unix.Pwrite(fd, []byte("end"), off)
	noErr(t, "pwrite", err)
	st := fstat(t, fd)
	if st.Size != off+3 {
		t.Fatalf("size %d", st.Size)
	}
	if st.Blocks*512 >= off {
		t.Errorf("sparse file uses %d blocks", st.Blocks)
	}
	buf := make([]byte, 4096)
	n, err := unix.Pread(fd, buf, off/2)
	if err != nil || n != len(buf) || !bytes.Equal(buf, make([]byte, len(buf))) {
		t.Fatalf("hole: %d, %v, not zeros", n, err)
	}
}

func testSparse4G(t *testing.T, dir string) {
	p := filepath.Join(dir, "huge")
	fd := open(t, p, unix.O_CREAT|unix.O_RDWR, 0o644)
	const off = 5<<30 + 17
	_, err := unix.Pwrite(fd, []byte("far"), off)
	noErr(t, "pwrite beyond 4 GiB", err)
	if st := fstat(t, fd); st.Size != off+3 {
		t.Fatalf("size %d, want %d", st.Size, off+3)
	}
	if st := lstat(t, p); st.Size != off+3 {
		t.Fatalf("stat size %d, want %d", st.Size, off+3)
	}
	buf := make([]byte, 8)
	n, err := unix.Pread(fd, buf, off-2)
	if err != nil || string(buf[:n]) != "\x00\x00far" {
		t.Fatalf("pread: %q, %v", buf[:n], err)
	}
	n, err = unix.Pread(fd, buf, 4<<30)
	if err != nil || n != 8 || !bytes.Equal(buf, make([]byte, 8)) {
		t.Fatalf("pread at 4 GiB: %q, %v", buf[:n], err)
	}
	noErr(t, "ftruncate below 4 GiB", unix.Ftruncate(fd, 1<<20))
	if st := lstat(t, p); st.Size != 1<<20 {
		t.Fatalf("size after truncate %d", st.Size)
	}
}

func testTruncate(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, []byte("0123456789"), 0o644)
	noErr(t, "truncate", unix.Truncate(p, 4))
	checkContent(t, p, []byte("0123"))
	noErr(t, "truncate up", unix.Truncate(p, 8))
	checkContent(t, p, []byte("0123\x00\x00\x00\x00"))

	fd := open(t, p, unix.O_RDWR, 0)
	noErr(t, "ftruncate", unix.Ftruncate(fd, 2))
	if st := fstat(t, fd); st.Size != 2 {
		t.Fatalf("size %d after ftruncate", st.Size)
	}
	buf := make([]byte, 16)
	n, _ := unix.Pread(fd, buf, 0)
	if string(buf[:n]) != "01" {
		t.Fatalf("read %q after ftruncate", buf[:n])
	}
	noErr(t, "ftruncate 0", unix.Ftruncate(fd, 0))
	checkContent(t, p, nil)

	// A read-only descriptor cannot truncate.
	ro := open(t, p, unix.O_RDONLY, 0)
	wantErrno(t, "ftruncate O_RDONLY", unix.Ftruncate(ro, 1), unix.EINVAL, unix.EBADF)
	wantErrno(t, "truncate dir", unix.Truncate(dir, 0), unix.EISDIR)
}

func testFallocate(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	fd := open(t, p, unix.O_CREAT|unix.O_RDWR, 0o644)
	err := unix.Fallocate(fd, 0, 0, 1<<20)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		t.Skipf("fallocate: %v", err)
	}
	noErr(t, "fallocate", err)
	st := fstat(t, fd)
	if st.Size != 1<<20 || st.Blocks*512 < 1<<20 {
		t.Fatalf("after fallocate: size %d blocks %d", st.Size, st.Blocks)
	}
	noErr(t, "fallocate keep size", unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 1<<20, 1<<20))
	if st := fstat(t, fd); st.Size != 1<<20 {
		t.Fatalf("KEEP_SIZE changed size to %d", st.Size)
	}
	_, err = unix.Pwrite(fd, pattern(8192, 1), 0)
	noErr(t, "pwrite", err)
	err = unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return
	}
	noErr(t, "punch hole", err)
	buf := make([]byte, 8192)
	_, err = unix.Pread(fd, buf, 0)
	noErr(t, "pread", err)
	if !bytes.Equal(buf[:4096], make([]byte, 4096)) || !bytes.Equal(buf[4096:], pattern(8192, 1)[4096:]) {
		t.Fatal("punch hole: wrong content")
	}
}

func testFsync(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	fd := open(t, p, unix.O_CREAT|unix.O_RDWR, 0o644)
	_, err := unix.Write(fd, []byte("data"))
	noErr(t, "write", err)
	noErr(t, "fsync", unix.Fsync(fd))
	noErr(t, "fdatasync", unix.Fdatasync(fd))
	dfd := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	noErr(t, "fsync dir", unix.Fsync(dfd))
	noErr(t, "syncfs", unix.Syncfs(fd))
}

func testDirectIO(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0o644)
	if errors.Is(err, unix.EINVAL) {
		t.Skip("O_DIRECT not supported")
	}
	noErr(t, "open O_DIRECT", err)
	defer unix.Close(fd)
	buf := alignedBuf(8192)
	copy(buf, pattern(8192, 3))
	n, err := unix.Pwrite(fd, buf, 4096)
	if err != nil || n != len(buf) {
		t.Fatalf("direct pwrite: %d, %v", n, err)
	}
	got := alignedBuf(8192)
	n, err = unix.Pread(fd, got, 4096)
	if err != nil || n != len(got) || !bytes.Equal(got, buf) {
		t.Fatalf("direct pread: %d, %v", n, err)
	}
	data := readFile(t, p)
	if len(data) != 12288 || !bytes.Equal(data[4096:], buf) {
		t.Fatalf("buffered read after direct write: %d bytes", len(data))
	}
}

// alignedBuf returns a buffer aligned to 4096 bytes for O_DIRECT.
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := int(4096 - uintptr(unsafe.Pointer(&b[0]))%4096)
	return b[off%4096 : off%4096+n]
}

func testUnlinkOpen(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, []byte("still here"), 0o644)
	fd := open(t, p, unix.O_RDWR, 0)
	noErr(t, "unlink", unix.Unlink(p))
	if exists(p) {
		t.Fatal("file visible after unlink")
	}
	buf := make([]byte, 32)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil || string(buf[:n]) != "still here" {
		t.Fatalf("read unlinked: %q, %v", buf[:n], err)
	}
	_, err = unix.Pwrite(fd, []byte("!"), 10)
	noErr(t, "write unlinked", err)
	st := fstat(t, fd)
	if st.Nlink != 0 || st.Size != 11 {
		t.Fatalf("fstat unlinked: nlink %d size %d", st.Nlink, st.Size)
	}
	noErr(t, "ftruncate unlinked", unix.Ftruncate(fd, 5))
	noErr(t, "fchmod unlinked", unix.Fchmod(fd, 0o600))
	if st := fstat(t, fd); st.Size != 5 || st.Mode&0o777 != 0o600 {
		t.Fatalf("fstat unlinked after ftruncate/fchmod: size %d mode %o", st.Size, st.Mode)
	}
	// A new file under the same name is another inode.
	writeFile(t, p, []byte("new"), 0o644)
	if st2 := lstat(t, p); st2.Ino == st.Ino {
		t.Fatal("new file has the inode of the unlinked one")
	}
	n, _ = unix.Pread(fd, buf, 0)
	if string(buf[:n]) != "still" {
		t.Fatalf("unlinked file after re-create: %q", buf[:n])
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}
