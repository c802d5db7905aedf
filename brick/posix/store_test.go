package posix

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
)

const testVolume = "11111111-2222-3333-4444-555555555555"

var ctx = context.Background()

// newBrick marks a fresh directory (under parent, or a test temp dir when
// parent is "") and opens it.
func newBrick(t *testing.T, parent string) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	if parent != "" {
		var err error
		if dir, err = os.MkdirTemp(parent, "brick-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	if err := Mark(dir, testVolume, true); err != nil {
		t.Fatalf("Mark: %v", err)
	}
	s, err := New(dir, Options{VolumeID: testVolume})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func TestConformance(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer {
		s, _ := newBrick(t, "")
		return s
	})
}

func TestConformanceTmpfs(t *testing.T) {
	if testing.Short() || !isTmpfs("/dev/shm") {
		t.Skip("no tmpfs at /dev/shm")
	}
	layertest.Run(t, func(t *testing.T) layer.Layer {
		s, _ := newBrick(t, "/dev/shm")
		return s
	})
}

func isTmpfs(dir string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Type == 0x01021994
}

func wantErrno(t *testing.T, err error, want syscall.Errno, what string) {
	t.Helper()
	var got syscall.Errno
	if !errors.As(err, &got) || got != want {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

func TestMarkAndNew(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(dir, Options{VolumeID: testVolume}); err == nil ||
		!strings.Contains(err.Error(), "is not a brick of any volume") {
		t.Fatalf("New on an unmarked dir: %v", err)
	}
	if err := Mark(dir, testVolume, true); err != nil {
		t.Fatal(err)
	}
	if err := Mark(dir, testVolume, false); err != nil {
		t.Fatalf("Mark again with the same id: %v", err)
	}
	if v, err := ReadMark(dir); err != nil || v != testVolume {
		t.Fatalf("ReadMark = %q, %v", v, err)
	}
	if st, err := os.Stat(filepath.Join(dir, HiddenDir)); err != nil || !st.IsDir() {
		t.Fatalf("hidden dir: %v", err)
	}
	if err := Mark(dir, "other", false); err == nil ||
		!strings.Contains(err.Error(), "is already part of volume "+testVolume) {
		t.Fatalf("Mark with another id: %v", err)
	}
	if _, err := New(dir, Options{VolumeID: "other"}); err == nil ||
		!strings.Contains(err.Error(), "belongs to volume "+testVolume+", not other") {
		t.Fatalf("New with another id: %v", err)
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	if err := Mark(sub, "other", false); err == nil || !strings.Contains(err.Error(), "inside brick") {
		t.Fatalf("Mark inside a brick: %v", err)
	}
	s, err := New(dir, Options{VolumeID: testVolume})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Lookup(ctx, "/")
	if err != nil || a.Gfid != layer.RootGfid {
		t.Fatalf("root: gfid %v, %v", a.Gfid, err)
	}
	s.Close()
	if err := Unmark(dir); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadMark(dir); err != nil || v != "" {
		t.Fatalf("ReadMark after Unmark = %q, %v", v, err)
	}
	if _, err := os.Stat(filepath.Join(dir, HiddenDir)); !os.IsNotExist(err) {
		t.Fatalf("Unmark left the hidden directory: %v", err)
	}
	if err := Mark(dir, "other", false); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Mark after Unmark of a directory with files, without force: %v", err)
	}
	if err := Mark(dir, "other", true); err != nil {
		t.Fatalf("Mark after Unmark, with force: %v", err)
	}
}

func TestMarkRefusals(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	if err := Mark(missing, testVolume, false); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Mark missing: %v", err)
	}
	if _, err := New(missing, Options{VolumeID: testVolume}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("New missing: %v", err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	if err := Mark(file, testVolume, false); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("Mark file: %v", err)
	}
	if _, err := New(file, Options{VolumeID: testVolume}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("New file: %v", err)
	}
	if v, _ := ReadMark("/"); v != "" {
		t.Fatalf("/ got marked")
	}
}

// TestMarkRefusesSystemAndPseudo: the machine's own directories (also
// reached by a symlink or ..), pseudo file systems and the node's data
// directory are never bricks, even with force; nothing is written to them.
func TestMarkRefusesSystemAndPseudo(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "etc-link")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	inData := filepath.Join(data, "bricks", "b1")
	if err := os.MkdirAll(inData, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, why string }{
		{"/", "system directory"},
		{"/etc", "system directory"},
		{"/etc/../etc", "system directory"},
		{link, "system directory"},
		{"/usr", "system directory"},
		{"/var/lib/mortar", "system directory"},
		{"/proc/self", "proc file system"},
		{"/sys/kernel", "sysfs file system"},
		{inData, "data directory"},
	} {
		if _, err := os.Stat(c.path); err != nil {
			continue // not on this machine
		}
		if err := Mark(c.path, testVolume, true, data); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("Mark %s with force: %v, want refused (%s)", c.path, err, c.why)
		}
		if v, _ := ReadMark(c.path); v != "" {
			t.Errorf("%s got marked", c.path)
		}
		if _, err := os.Lstat(filepath.Join(c.path, HiddenDir)); err == nil {
			t.Errorf("%s got a hidden directory", c.path)
		}
	}
	full := filepath.Join(dir, "full")
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "f"), []byte("x"), 0o644)
	if err := Mark(full, testVolume, false, data); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Mark of a non-empty directory without force: %v", err)
	}
	if err := Mark(full, testVolume, true, data); err != nil {
		t.Fatalf("Mark of a non-empty directory with force: %v", err)
	}
}
