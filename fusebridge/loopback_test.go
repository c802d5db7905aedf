package fusebridge

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMountLoopback: files written through a loopback mount land in its
// directory, the mount says what it is in /proc/mounts, and reads reach
// the server (the kernel's FUSE passthrough is off).
func TestMountLoopback(t *testing.T) {
	needFuse(t)
	dir, mnt := searchableDir(t), searchableDir(t)
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := MountLoopback(dir, mnt, Options{AllowOther: true, Debug: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmount(t, srv, mnt) })
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "hello" {
		t.Fatalf("backing file: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "g"), []byte("from the disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "g")); err != nil || string(b) != "from the disk" {
		t.Fatalf("read through the mount: %q, %v", b, err)
	}
	if out := buf.String(); !strings.Contains(out, "READ") {
		t.Errorf("no READ reached the server (kernel passthrough on?): %q", lastN(out, 2000))
	}
	b, _ := os.ReadFile("/proc/self/mounts")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[1] == mnt {
			if f[0] != dir || f[2] != "fuse.passthrough" || !strings.Contains(f[3], "default_permissions") {
				t.Errorf("mount line %q", line)
			}
			return
		}
	}
	t.Errorf("%s not in /proc/self/mounts", mnt)
}

func lastN(s string, n int) string { return s[max(0, len(s)-n):] }
