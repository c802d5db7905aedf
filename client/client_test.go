package client_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"testing"
	"testing/fstest"
	"time"

	"github.com/mortarfs/mortar/mgmt"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/tlsconf"
	"github.com/mortarfs/mortar/volume/options"

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

// hookHandler logs to its Handler and passes every record to fn.
type hookHandler struct {
	slog.Handler
	fn func(slog.Record)
}

func (h hookHandler) Handle(ctx context.Context, r slog.Record) error {
	h.fn(r)
	return h.Handler.Handle(ctx, r)
}

func (h hookHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return hookHandler{h.Handler.WithAttrs(as), h.fn}
}

func (h hookHandler) WithGroup(name string) slog.Handler {
	return hookHandler{h.Handler.WithGroup(name), h.fn}
}

// An open volume follows its spec: an option set on the server reaches
// it, and files open across the change go on working.
func TestVolumeFollowsSpec(t *testing.T) {
	node, err := startNode(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	switched := make(chan uint64, 10)
	log := slog.New(hookHandler{slog.NewTextHandler(t.Output(), nil), func(r slog.Record) {
		r.Attrs(func(a slog.Attr) bool {
			if r.Message == "volume graph switched" && a.Key == "new_version" {
				switched <- a.Value.Uint64()
			}
			return true
		})
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vol, err := client.Open(ctx, node.Addr()+":/gv0", client.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer vol.Close()
	if err := vol.WriteFile(ctx, "a", []byte("before"), 0o644); err != nil {
		t.Fatal(err)
	}
	held, err := vol.OpenRead(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	vi, err := api.NewClient(node.Addr()).Set(ctx, "gv0", options.OptAttrTimeout, "3")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-switched:
		if v != vi.SpecVersion {
			t.Fatalf("switched to version %d, want %d", v, vi.SpecVersion)
		}
	case <-ctx.Done():
		t.Fatal("the volume did not follow its spec")
	}
	if spec := vol.Spec(); spec.Version != vi.SpecVersion || spec.Options[options.OptAttrTimeout] != "3" {
		t.Fatalf("spec after the change: %+v", spec)
	}
	if data, err := io.ReadAll(held); err != nil || string(data) != "before" {
		t.Fatalf("file open across the change: %q, %v", data, err)
	}
	held.Close()
	if err := vol.WriteFile(ctx, "b", []byte("after"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := vol.ReadFile(ctx, "a"); err != nil || string(data) != "before" {
		t.Fatalf("read after the change: %q, %v", data, err)
	}
}

// Remove of an empty directory, and RemoveAll of a tree, both made by
// this volume handle (their parents leased at mkdir): an unlink of a
// directory must say EISDIR for Remove to rmdir it (found by review of
// unlink-behind, which answered it nil).
func TestRemoveDirUnderLease(t *testing.T) {
	ctx := context.Background()
	vol := openVolume(t)
	if err := vol.MkdirAll(ctx, "top/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := vol.WriteFile(ctx, "top/a/b/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := vol.RemoveAll(ctx, "top"); err != nil {
		t.Fatalf("RemoveAll of a tree the handle made: %v", err)
	}
	if _, err := vol.Stat(ctx, "top"); err == nil {
		t.Fatal("top still there after RemoveAll")
	}
	if err := vol.MkdirAll(ctx, "e/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := vol.Remove(ctx, "e/sub"); err != nil {
		t.Fatal(err)
	}
	if ents, err := vol.ReadDir(ctx, "e"); err != nil || len(ents) != 0 {
		t.Fatalf("e lists %d names after Remove(e/sub): %v", len(ents), err)
	}
}

// On a cluster secured with TLS, Open takes the program's client
// certificate: the spec over HTTPS, the bricks over TLS. Without one it
// fails.
func TestOpenWithTLS(t *testing.T) {
	ca := t.TempDir()
	if err := tlsconf.InitCA(ca, "test"); err != nil {
		t.Fatal(err)
	}
	issue := func(name string, kind tlsconf.Kind, hosts ...string) *tlsconf.Identity {
		if err := tlsconf.Issue(ca, name, kind, hosts, 1); err != nil {
			t.Fatal(err)
		}
		id, err := tlsconf.Load(ca, name)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	nodeID := issue("node1", tlsconf.KindNode, "127.0.0.1")
	node, err := mgmt.Start(mgmt.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", TLS: nodeID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	ctx := context.Background()
	admin := api.NewTLSClient(node.Addr(), nodeID)
	if _, err := admin.CreateVolume(ctx, api.CreateVolumeRequest{Name: "tv", Bricks: []string{"127.0.0.1:" + t.TempDir()}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Start(ctx, "tv", false); err != nil {
		t.Fatal(err)
	}
	target := node.Addr() + ":/tv"
	if _, err := client.Open(ctx, target, client.Options{NoFollow: true}); err == nil {
		t.Fatal("opened a TLS cluster's volume without a certificate")
	}
	vol, err := client.Open(ctx, target, client.Options{TLS: issue("app", tlsconf.KindClient)})
	if err != nil {
		t.Fatalf("open with a client certificate: %v", err)
	}
	defer vol.Close()
	if err := vol.WriteFile(ctx, "f", []byte("over TLS\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := vol.ReadFile(ctx, "f"); err != nil || string(data) != "over TLS\n" {
		t.Fatalf("read back %q, %v", data, err)
	}
}
