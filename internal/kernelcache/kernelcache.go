// Package kernelcache lets tests that make the kernel drop its caches
// (vm.drop_caches: every file system's, every mount's) and tests whose
// claim is that the kernel's caches hold take turns, across the test
// processes `go test ./...` runs at once, through a lock file. A drop in
// fusebridge's TestForget, run beside e2e's control test of the mounts'
// caches, made the kernel ask for attributes the test wanted cached (a
// CI failure on 2026-11-29).
package kernelcache

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// lockPath is the lock file every test process shares.
var lockPath = filepath.Join(os.TempDir(), "mortar-kernel-caches.lock")

// The process's hold of the lock file: one open file (a second one, even
// in the same process, would wait for the first), its mode, and how many
// tests hold it.
var (
	mu    sync.Mutex
	held  *os.File
	mode  int
	users int
)

// lock takes the lock file, shared or exclusive, until the test ends.
func lock(t testing.TB, how int) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if held == nil {
		f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatalf("kernel cache lock: %v", err)
		}
		held, mode = f, 0
	}
	if mode != unix.LOCK_EX && how != mode {
		if err := unix.Flock(int(held.Fd()), how); err != nil {
			t.Fatalf("kernel cache lock: %v", err)
		}
		mode = how
	}
	users++
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if users--; users == 0 {
			held.Close() // lets it go
			held, mode = nil, 0
		}
	})
}

// Hold keeps every Drop out until the test ends: for a test whose claim
// is that what the kernel caches stays cached.
func Hold(t testing.TB) { lock(t, unix.LOCK_SH) }

// Exclusive makes the test the only one dropping or holding the kernel's
// caches until it ends (it may then Drop them at will).
func Exclusive(t testing.TB) { lock(t, unix.LOCK_EX) }

// Drop writes back dirty pages and makes the kernel forget unused
// dentries and inodes (vm.drop_caches 2). The test must hold Exclusive.
// It reports whether it could (not as a user other than root).
func Drop() bool {
	unix.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0) == nil
}
