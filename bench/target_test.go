package bench

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	_ clientMounter = (*mortarMount)(nil)
	_ clientMounter = (*glusterMount)(nil)
)

func TestLocalTarget(t *testing.T) {
	work := t.TempDir()
	m, err := NewLocalTarget().Mount(context.Background(), work, Layout{Kind: "distribute", Bricks: 3}, SetupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Dir(), work) || m.Version() == "" {
		t.Fatalf("dir %q version %q", m.Dir(), m.Version())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.Dir()); !os.IsNotExist(err) {
		t.Fatalf("local dir left after Close: %v", err)
	}
	_, err = NewLocalTarget().Mount(context.Background(), work, Layout{}, SetupOptions{Encryption: true})
	if !IsUnsupported(err) {
		t.Fatalf("encryption on the local disk: %v, want unsupported", err)
	}
}

func TestUnsupportedLayouts(t *testing.T) {
	ctx := context.Background()
	mt := NewMortarTarget("/nonexistent", slog.Default())
	for _, c := range []struct {
		l    Layout
		opts SetupOptions
	}{
		{Layout{Kind: "disperse", Bricks: 6, Redundancy: 2}, SetupOptions{}},
		{Layout{Kind: "distribute", Bricks: 3}, SetupOptions{Encryption: true}},
		{Layout{Kind: "distribute", Bricks: 3}, SetupOptions{Net: &NetSetup{Servers: []string{"a", "b"}}}},
	} {
		if _, err := mt.Mount(ctx, t.TempDir(), c.l, c.opts); !IsUnsupported(err) {
			t.Errorf("mortar %s %+v: %v, want unsupported", c.l, c.opts, err)
		}
	}
	gt := NewGlusterTarget(slog.Default(), nil)
	if _, err := gt.Mount(ctx, t.TempDir(), Layout{Kind: "distribute", Bricks: 3}, SetupOptions{Encryption: true}); !IsUnsupported(err) {
		t.Errorf("glusterfs encryption: %v, want unsupported", err)
	}
}

// TestTargetsMount sets up the mortar target (and GlusterFS with
// MORTAR_TEST_GLUSTER=1) on loopback and in network namespaces, writes a
// file through each mount, finds it on a brick, and checks that Close
// leaves no mount and no process. Needs root and FUSE.
func TestTargetsMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("needs /dev/fuse")
	}
	bin := filepath.Join(t.TempDir(), "mortar")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/mortar").CombinedOutput(); err != nil {
		t.Fatalf("building mortar: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	targets := []Target{NewMortarTarget(bin, slog.Default())}
	if os.Getenv("MORTAR_TEST_GLUSTER") == "1" {
		targets = append(targets, NewGlusterTarget(slog.Default(), t.Logf))
	}
	for _, tg := range targets {
		if err := tg.Available(ctx); err != nil {
			t.Fatalf("%s: %v", tg.Name(), err)
		}
		if c, ok := tg.(interface{ Close() error }); ok {
			defer c.Close()
		}
		for _, servers := range []int{0, 1, 2} {
			name := tg.Name() + "/servers=" + string(rune('0'+servers))
			t.Run(name, func(t *testing.T) { checkTargetMount(ctx, t, tg, servers) })
		}
	}
}

// checkTargetMount mounts tg with a distribute volume over 2 bricks, on
// loopback (servers = 0) or behind servers network namespaces.
func checkTargetMount(ctx context.Context, t *testing.T, tg Target, servers int) {
	opts := SetupOptions{NoClientCache: true}
	if servers > 0 {
		topo, err := newNetTopo(ctx, servers, 1000)
		if err != nil {
			t.Skipf("no network namespaces here: %v", err)
		}
		defer topo.Close()
		opts.Net = topo.Setup()
	}
	work := t.TempDir()
	m, err := tg.Mount(ctx, work, Layout{Kind: "distribute", Bricks: 2}, opts)
	if IsUnsupported(err) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := 0; i < 8; i++ {
		if err := os.WriteFile(filepath.Join(m.Dir(), "f"+string(rune('a'+i))), []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	found, _ := filepath.Glob(filepath.Join(work, "b[12]", "f*"))
	if len(found) != 8 {
		t.Errorf("files on the bricks: %v, want 8", found)
	}
	extra := filepath.Join(work, "client2")
	c, err := m.(clientMounter).MountClient(ctx, extra)
	if err != nil {
		t.Fatalf("second client: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(c.Dir(), "fa")); err != nil || string(b) != "hello" {
		t.Errorf("second client reads %q, %v", b, err)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if isMounted(m.Dir()) || isMounted(extra) {
		t.Fatal("still mounted after Close")
	}
}
