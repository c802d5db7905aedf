package posixtest

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func testMmap(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	fd := open(t, p, unix.O_CREAT|unix.O_RDWR, 0o644)
	const size = 3 * 4096
	noErr(t, "ftruncate", unix.Ftruncate(fd, size))
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	noErr(t, "mmap", err)
	defer unix.Munmap(m)
	data := pattern(size, 11)
	copy(m, data)
	noErr(t, "msync", unix.Msync(m, unix.MS_SYNC))
	got := make([]byte, size)
	_, err = unix.Pread(fd, got, 0)
	noErr(t, "pread", err)
	if !bytes.Equal(got, data) {
		t.Fatal("pread after msync differs from what was written through the mapping")
	}
	// Writes through the descriptor show in a new read-only mapping.
	_, err = unix.Pwrite(fd, []byte("written"), 4096)
	noErr(t, "pwrite", err)
	fd2 := open(t, p, unix.O_RDONLY, 0)
	r, err := unix.Mmap(fd2, 0, size, unix.PROT_READ, unix.MAP_PRIVATE)
	noErr(t, "mmap read-only", err)
	defer unix.Munmap(r)
	if string(r[4096:4096+7]) != "written" || !bytes.Equal(r[:4096], data[:4096]) {
		t.Fatal("read-only mapping has wrong content")
	}
}

// run returns a command that runs script with /bin/sh -c and args.
//
// The test process must not execute a file on the file system under test,
// nor change its directory there, itself: Go starts commands with
// vfork, and the forked child holds the parent's thread (and its P) until
// it calls execve. If the file system is served by the test process (a
// FUSE mount in the same binary) and the runtime stops the world for a
// garbage collection meanwhile, nothing serves the child's execve and
// both hang. The shell started from outside does it instead.
func run(script string, args ...string) *exec.Cmd {
	cmd := exec.Command("/bin/sh", append([]string{"-c", script}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	return cmd
}

func testExec(t *testing.T, dir string) {
	script := filepath.Join(dir, "script")
	writeFile(t, script, []byte("#!/bin/sh\necho \"hello $1\"\n"), 0o755)
	out, err := run(`exec "$0" world`, script).Output()
	if err != nil || string(out) != "hello world\n" {
		t.Fatalf("run script: %q, %v", out, err)
	}
	// A binary copied onto the file system.
	src, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) to copy")
	}
	bin := filepath.Join(dir, "true")
	in, err := os.Open(src)
	noErr(t, "open", err)
	defer in.Close()
	o, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	noErr(t, "create", err)
	_, err = io.Copy(o, in)
	noErr(t, "copy", err)
	noErr(t, "close", o.Close())
	noErr(t, "run copied binary", run(`exec "$0"`, bin).Run())
	// Not executable: EACCES.
	noErr(t, "chmod", unix.Chmod(bin, 0o644))
	if err := run(`exec "$0"`, bin).Run(); err == nil {
		t.Fatal("ran a file without execute permission")
	}
}
