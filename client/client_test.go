package client_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"testing"
	"testing/fstest"

	"github.com/mortarfs/mortar/client"
)

func openVolume(t *testing.T) *client.Volume {
	t.Helper()
	dir := t.TempDir()
	node, err := startNode(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	vol, err := client.Open(context.Background(), node.Addr()+":/gv0", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vol.Close() })
	return vol
}

func TestParseTarget(t *testing.T) {
	for in, want := range map[string][2]string{
		"host:/gv0":         {"host", "gv0"},
		"host:7420:/gv0":    {"host:7420", "gv0"},
		"[::1]:7420:/gv0":   {"[::1]:7420", "gv0"},
		"10.0.0.1:/archive": {"10.0.0.1", "archive"},
	} {
		addr, name, err := client.ParseTarget(in)
		if err != nil || addr != want[0] || name != want[1] {
			t.Errorf("ParseTarget(%q) = %q, %q, %v", in, addr, name, err)
		}
	}
	for _, bad := range []string{"host", "host:/", ":/gv0", "host:/a/b", "gv0"} {
		if _, _, err := client.ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q) accepted", bad)
		}
	}
}

func TestFileAPI(t *testing.T) {
	vol := openVolume(t)
	ctx := context.Background()
	f, err := vol.OpenFile(ctx, "f", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(2, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := io.ReadFull(f, buf); err != nil || string(buf) != "234" {
		t.Fatalf("read after seek: %q %v", buf, err)
	}
	if end, _ := f.Seek(0, io.SeekEnd); end != 10 {
		t.Fatalf("seek end: %d", end)
	}
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 4 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("stat: %v %v", fi, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := vol.OpenFile(ctx, "f", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL on an existing file: %v", err)
	}
	if _, err := vol.Stat(ctx, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of a missing file: %v", err)
	}
	if _, err := vol.Stat(ctx, "../../etc/passwd"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a name climbing above the root must stay inside the volume: %v", err)
	}
	if err := vol.MkdirAll(ctx, "a/b/c", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := vol.WriteFile(ctx, "a/b/c/x", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := vol.RemoveAll(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := vol.Stat(ctx, "a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after RemoveAll: %v", err)
	}
}

// The volume passes the standard library's file system checks.
func TestFS(t *testing.T) {
	vol := openVolume(t)
	ctx := context.Background()
	files := map[string]string{"a.txt": "a", "dir/b.txt": "bb", "dir/sub/c.txt": "ccc"}
	for name, data := range files {
		if err := vol.MkdirAll(ctx, name[:max(0, len(name)-len("x.txt")-1)], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vol.WriteFile(ctx, name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fstest.TestFS(vol.FS(ctx), "a.txt", "dir/b.txt", "dir/sub/c.txt"); err != nil {
		t.Fatal(err)
	}
}
