package posix

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// onRootFS returns a new directory on the file system of "/" (a test temp
// dir), skipping the test if the temp dirs are elsewhere.
func onRootFS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if same, err := sameFS(dir, "/"); err != nil || !same {
		t.Skipf("%s is not on the root file system (%v)", dir, err)
	}
	return dir
}

// offRootFS mounts a tmpfs on a new directory, unmounted when the test
// ends; it skips the test if it cannot mount (not root).
func offRootFS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

func mkdirWith(t *testing.T, parent, name string, files ...string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMarkRootFS: a directory on the root file system becomes a brick
// only with force, and the refusal says why and writes nothing; a
// non-empty one hears both reasons.
func TestMarkRootFS(t *testing.T) {
	root := onRootFS(t)
	empty := mkdirWith(t, root, "empty")
	err := Mark(empty, testVolume, false)
	if err == nil || !strings.Contains(err.Error(), "is on the root file system") || !strings.Contains(err.Error(), "or force") {
		t.Fatalf("Mark of an empty directory on the root file system without force: %v", err)
	}
	if v, _ := ReadMark(empty); v != "" {
		t.Fatalf("a refused Mark marked %s", empty)
	}
	if _, err := os.Lstat(filepath.Join(empty, HiddenDir)); err == nil {
		t.Fatalf("a refused Mark made the hidden directory")
	}
	if err := Mark(empty, testVolume, true); err != nil {
		t.Fatalf("Mark on the root file system with force: %v", err)
	}
	full := mkdirWith(t, root, "full", "f")
	err = Mark(full, testVolume, false)
	if err == nil || !strings.Contains(err.Error(), "not empty") || !strings.Contains(err.Error(), "root file system") {
		t.Fatalf("Mark of a non-empty directory on the root file system: %v, want both reasons", err)
	}
}

// TestMarkOffRootFS: an empty directory on a file system of its own
// becomes a brick without force; a non-empty one there needs force for
// its files only.
func TestMarkOffRootFS(t *testing.T) {
	disk := offRootFS(t)
	if err := Mark(mkdirWith(t, disk, "empty"), testVolume, false); err != nil {
		t.Fatalf("Mark of an empty directory off the root file system: %v", err)
	}
	full := mkdirWith(t, disk, "full", "f")
	err := Mark(full, testVolume, false)
	if err == nil || !strings.Contains(err.Error(), "not empty") || strings.Contains(err.Error(), "root file system") {
		t.Fatalf("Mark of a non-empty directory off the root file system: %v, want only \"not empty\"", err)
	}
}

// TestCheckNewRootFS: a new brick (replace-brick) must be empty even with
// force, and off the root file system unless force.
func TestCheckNewRootFS(t *testing.T) {
	root := onRootFS(t)
	empty := mkdirWith(t, root, "empty")
	if err := CheckNew(empty, false); err == nil || !strings.Contains(err.Error(), "root file system") {
		t.Fatalf("CheckNew on the root file system without force: %v", err)
	}
	if err := CheckNew(empty, true); err != nil {
		t.Fatalf("CheckNew on the root file system with force: %v", err)
	}
	full := mkdirWith(t, root, "full", "f")
	if err := CheckNew(full, true); err == nil || !strings.Contains(err.Error(), "must start empty") {
		t.Fatalf("CheckNew of a non-empty directory with force: %v", err)
	}
	if err := CheckNew(mkdirWith(t, offRootFS(t), "new"), false); err != nil {
		t.Fatalf("CheckNew off the root file system without force: %v", err)
	}
}
