// Package posixtest checks that a mounted directory behaves like a POSIX
// file system, using plain system calls only. The same suite runs on a
// mortar mount of any volume type and, as a check of the suite itself, on a
// local directory.
//
// Run runs every test of All, each in its own subdirectory of the given
// directory. Some tests need root (chown, access as another user); they
// are skipped otherwise. Tests of locks between processes re-execute the
// test binary as a helper process: a package that uses this suite must
// call HelperMain first thing in its TestMain:
//
//	func TestMain(m *testing.M) {
//		posixtest.HelperMain()
//		os.Exit(m.Run())
//	}
//
// When run as root, the directory and its ancestors must be searchable by
// uid 65534 and a FUSE mount must allow other users (allow_other): the
// suite checks that the kernel enforces permissions for an ordinary user.
package posixtest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// All lists the tests by name. Each gets a fresh, empty directory.
var All = map[string]func(t *testing.T, dir string){
	"OpenFlags":        testOpenFlags,
	"ReadWrite":        testReadWrite,
	"LargeIO":          testLargeIO,
	"Sparse":           testSparse,
	"Sparse4G":         testSparse4G,
	"Truncate":         testTruncate,
	"Fallocate":        testFallocate,
	"Fsync":            testFsync,
	"DirectIO":         testDirectIO,
	"Mmap":             testMmap,
	"Exec":             testExec,
	"MkdirRmdir":       testMkdirRmdir,
	"UnlinkOpen":       testUnlinkOpen,
	"RenameFile":       testRenameFile,
	"RenameDir":        testRenameDir,
	"RenameErrors":     testRenameErrors,
	"RenameOverOpen":   testRenameOverOpen,
	"HardLinks":        testHardLinks,
	"Symlinks":         testSymlinks,
	"Chmod":            testChmod,
	"Chown":            testChown,
	"SetgidDir":        testSetgidDir,
	"Utimens":          testUtimens,
	"Xattr":            testXattr,
	"Statfs":           testStatfs,
	"Fifo":             testFifo,
	"Errors":           testErrors,
	"Access":           testAccess,
	"Readdir":          testReaddir,
	"ReaddirSeek":      testReaddirSeek,
	"ReaddirRewind":    testReaddirRewind,
	"PosixLocks":       testPosixLocks,
	"PosixLocksWait":   testPosixLocksWait,
	"PosixLocksClose":  testPosixLocksClose,
	"PosixLocksKilled": testPosixLocksKilledWaiter,
	"Flock":            testFlock,
	"FlockWait":        testFlockWait,
	"FlockIndependent": testFlockIndependent,
}

// Run runs every test of All on dir.
func Run(t *testing.T, dir string) {
	RunSome(t, dir, nil)
}

// RunSome runs the tests of All that skip does not name.
func RunSome(t *testing.T, dir string, skip []string) {
	var names []string
	for name := range All {
		if !slices.Contains(skip, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			d := filepath.Join(dir, name)
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			All[name](t, d)
		})
	}
}

// isRoot reports whether the suite may change owners and switch users.
func isRoot() bool { return os.Geteuid() == 0 }

func needRoot(t *testing.T) {
	t.Helper()
	if !isRoot() {
		t.Skip("needs root")
	}
}

func writeFile(t *testing.T, path string, data []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, perm); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkContent(t *testing.T, path string, want []byte) {
	t.Helper()
	if got := readFile(t, path); !bytes.Equal(got, want) {
		t.Fatalf("%s: content %q, want %q", path, trim(got), trim(want))
	}
}

func trim(b []byte) []byte {
	if len(b) > 64 {
		return append(b[:64:64], "..."...)
	}
	return b
}

func lstat(t *testing.T, path string) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatalf("lstat %s: %v", path, err)
	}
	return &st
}

func fstat(t *testing.T, fd int) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatalf("fstat: %v", err)
	}
	return &st
}

// open opens path with open(2) and closes it at the end of the test.
func open(t *testing.T, path string, flags int, perm uint32) int {
	t.Helper()
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, perm)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// wantErrno fails unless err is (or wraps) one of want.
func wantErrno(t *testing.T, what string, err error, want ...syscall.Errno) {
	t.Helper()
	for _, w := range want {
		if errors.Is(err, w) {
			return
		}
	}
	t.Fatalf("%s: got error %v, want %v", what, err, want)
}

func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func exists(path string) bool {
	var st unix.Stat_t
	return unix.Lstat(path, &st) == nil
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}
