package cli

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume"
	"github.com/mortarfs/mortar/volume/options"
)

// switchHook is a log handler that reports the new version of every
// graph switch a mount logs.
type switchHook struct {
	slog.Handler
	versions chan uint64
}

func (h switchHook) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "volume graph switched" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "new_version" {
				h.versions <- a.Value.Uint64()
			}
			return true
		})
	}
	return h.Handler.Handle(ctx, r)
}

func (h switchHook) WithAttrs(as []slog.Attr) slog.Handler {
	return switchHook{h.Handler.WithAttrs(as), h.versions}
}

func (h switchHook) WithGroup(name string) slog.Handler {
	return switchHook{h.Handler.WithGroup(name), h.versions}
}

// A FUSE mount follows its volume: an option set on the server reaches
// it without a remount, and files (open ones too) stay readable.
func TestMountFollowsSpec(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	n, _ := startNode(t)
	c := api.NewClient(n.ListenAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var bricks []string
	for _, b := range []string{"b1", "b2"} {
		d := filepath.Join(t.TempDir(), b)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		bricks = append(bricks, "127.0.0.1:"+d)
	}
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "gv0", Bricks: bricks, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatal(err)
	}
	spec, err := c.Spec(ctx, "gv0")
	if err != nil {
		t.Fatal(err)
	}

	hook := switchHook{slog.NewTextHandler(t.Output(), nil), make(chan uint64, 10)}
	mnt := t.TempDir()
	req := mountRequest{Source: c.Addr() + ":/gv0", Server: c.Addr(), Volume: "gv0", Mountpoint: mnt}
	srv, m, err := mountSpec(spec, req, slog.New(hook))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unmountOnExit(srv, mnt, slog.Default())
		m.Close()
	})

	a := filepath.Join(mnt, "a")
	if err := os.WriteFile(a, []byte("before"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	held, err := os.OpenFile(a, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	vi, err := c.Set(ctx, "gv0", options.OptAttrTimeout, "0")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-hook.versions:
		if v != vi.SpecVersion {
			t.Fatalf("mount switched to version %d, want %d", v, vi.SpecVersion)
		}
	case <-ctx.Done():
		t.Fatal("the mount did not follow the volume's spec")
	}
	if m.Spec().Version != vi.SpecVersion {
		t.Fatalf("mount runs version %d, want %d", m.Spec().Version, vi.SpecVersion)
	}

	// The file open across the switch works on the old graph.
	if _, err := held.WriteAt([]byte("BEFORE"), 0); err != nil {
		t.Fatal(err)
	}
	if err := held.Sync(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := held.ReadAt(buf, 0); err != nil || string(buf) != "BEFORE" {
		t.Fatalf("open file after the switch: %q, %v", buf, err)
	}
	// The new graph sees the same files with the same inodes.
	if data, err := os.ReadFile(a); err != nil || string(data) != "BEFORE" {
		t.Fatalf("read after the switch: %q, %v", data, err)
	}
	after, err := os.Stat(a)
	if err != nil || after.Sys().(*syscall.Stat_t).Ino != before.Sys().(*syscall.Stat_t).Ino {
		t.Fatalf("inode changed across the switch: %v, %v", after, err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "b"), []byte("after"), 0o644); err != nil {
		t.Fatal(err)
	}
	if names, err := os.ReadDir(mnt); err != nil || len(names) != 2 {
		t.Fatalf("listing after the switch: %v, %v", names, err)
	}

	// Once the file is closed the old graph goes. The kernel releases the
	// file after close returns: no event to wait on but the count.
	held.Close()
	live := m.Layer().(*volume.Live)
	deadline := time.Now().Add(10 * time.Second)
	for live.Graphs() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d graphs left after the open file was closed", live.Graphs())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMountOptionNoFollow(t *testing.T) {
	o, err := parseMountOptions([]string{"defaults,no-follow"}, false)
	if err != nil || !o.NoFollow {
		t.Fatalf("no-follow: %+v, %v", o, err)
	}
	if _, err := parseMountOptions([]string{"no-follow=1"}, false); err == nil {
		t.Fatal("no-follow=1 accepted")
	}
}
