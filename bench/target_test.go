package bench

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer/crypt"
)

var (
	_ clientMounter = (*mortarMount)(nil)
	_ clientMounter = (*glusterMount)(nil)
	_ clientMounter = (*passthroughMount)(nil)
)

// buildMortar builds the mortar binary into a temporary directory.
func buildMortar(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mortar")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/mortar").CombinedOutput(); err != nil {
		t.Fatalf("building mortar: %v\n%s", err, out)
	}
	return bin
}

// TestPassthroughTarget mounts the fuse-passthrough target, writes and
// reads a file through it (which lands in the backing directory) and
// through a second client mount, and checks that Close unmounts both and
// ends the processes. Needs root and FUSE.
func TestPassthroughTarget(t *testing.T) {
	if err := canMountFUSE(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tg := NewPassthroughTarget(buildMortar(t))
	if err := tg.Available(ctx); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	m, err := tg.Mount(ctx, work, Layout{Kind: "distribute", Bricks: 3}, SetupOptions{NoClientCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pm := m.(*passthroughMount)
	if !isMounted(m.Dir()) || !strings.Contains(m.Version(), "go-fuse") {
		t.Fatalf("%s mounted: %v; version %q", m.Dir(), isMounted(m.Dir()), m.Version())
	}
	if err := os.WriteFile(filepath.Join(m.Dir(), "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir(), "f")); err != nil || string(b) != "hello" {
		t.Errorf("read back %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(pm.backing, "f")); err != nil || string(b) != "hello" {
		t.Errorf("backing directory has %q, %v", b, err)
	}
	c, err := pm.MountClient(ctx, filepath.Join(work, "client2"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(c.Dir(), "f")); err != nil || string(b) != "hello" {
		t.Errorf("second client reads %q, %v", b, err)
	}
	procs := []*passthroughProc{pm.passthroughProc, c.(*passthroughProc)}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if isMounted(p.dir) || p.cmd.ProcessState == nil {
			t.Errorf("%s: mounted %v, process state %v after Close", p.dir, isMounted(p.dir), p.cmd.ProcessState)
		}
	}
	if _, err := os.Stat(pm.backing); !os.IsNotExist(err) {
		t.Errorf("backing directory left after Close: %v", err)
	}
	if _, err := NewPassthroughTarget("x").Mount(ctx, work, Layout{}, SetupOptions{Encryption: true}); !IsUnsupported(err) {
		t.Errorf("encryption: %v, want unsupported", err)
	}
}

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

// An encrypted mortar volume gets a fresh key in a private file of the
// work directory (seed 000's encryption=on).
func TestMortarKeyFile(t *testing.T) {
	m := &mortarMount{work: t.TempDir()}
	if err := m.makeKey(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(m.keyFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %s: %v, %v", m.keyFile, st, err)
	}
	if _, err := crypt.LoadKeyFile(m.keyFile); err != nil {
		t.Fatal(err)
	}
}

// TestMortarCreateArgs checks the `volume create` commands the mortar
// and mortar-distribute targets build (GlusterFS's keywords, one brick
// directory per brick under the work directory) and the rows they get.
func TestMortarCreateArgs(t *testing.T) {
	disperse := Layout{Kind: "disperse", Bricks: 6, Redundancy: 2}
	for _, c := range []struct {
		target Target
		l      Layout
		kw     string // the keywords between the name and the bricks
		bricks int
		label  string
	}{
		{NewMortarTarget("mortar", nil), Layout{Kind: "distribute", Bricks: 3}, "", 3, "distribute x3"},
		{NewMortarTarget("mortar", nil), Layout{Kind: "replicate", Bricks: 3, Replica: 3}, "replica 3", 3, "replica 3"},
		{NewMortarTarget("mortar", nil), disperse, "disperse 6 redundancy 2", 6, "disperse 4+2"},
		{NewMortarDistributeTarget("mortar", nil), disperse, "", 6, "distribute x6"},
		{NewMortarDistributeTarget("mortar", nil), Layout{Kind: "replicate", Bricks: 3, Replica: 3}, "", 3, "distribute x3"},
	} {
		mt := c.target.(*mortarTarget)
		l := c.l
		if mt.distribute {
			l = sameBricks(l)
		}
		work := t.TempDir()
		m := &mortarMount{t: mt, work: work, addr: "127.0.0.1:7420", volume: "v"}
		args, err := m.createArgs(l)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"volume", "create", "v"}
		if c.kw != "" {
			want = append(want, strings.Fields(c.kw)...)
		}
		for i := 1; i <= c.bricks; i++ {
			b := filepath.Join(work, "b"+strconv.Itoa(i))
			if fi, err := os.Stat(b); err != nil || !fi.IsDir() {
				t.Errorf("%s %s: brick %s not made: %v", c.target.Name(), c.l, b, err)
			}
			want = append(want, "127.0.0.1:"+b)
		}
		want = append(want, "force")
		if !slices.Equal(args, want) {
			t.Errorf("%s %s:\n got %q\nwant %q", c.target.Name(), c.l, args, want)
		}
		if got := labelFor(c.target.Name(), c.l); got != c.label {
			t.Errorf("%s %s: row label %q, want %q", c.target.Name(), c.l, got, c.label)
		}
	}
}

// TestLayoutKeywords: GlusterFS gets the same keywords as mortar.
func TestLayoutKeywords(t *testing.T) {
	for _, c := range []struct {
		l      Layout
		kw     string
		bricks int
	}{
		{Layout{Kind: "distribute"}, "", 1},
		{Layout{Kind: "distribute", Bricks: 4}, "", 4},
		{Layout{Kind: "replicate", Replica: 3}, "replica 3", 3},
		{Layout{Kind: "disperse", Bricks: 6, Redundancy: 2}, "disperse 6 redundancy 2", 6},
	} {
		if kw := strings.Join(c.l.Keywords(), " "); kw != c.kw || c.l.BrickCount() != c.bricks {
			t.Errorf("%s: keywords %q, %d bricks; want %q, %d", c.l, kw, c.l.BrickCount(), c.kw, c.bricks)
		}
	}
	if measures(MortarDistribute, Layout{Kind: "distribute", Bricks: 3}) || !measures(MortarDistribute, Layout{Kind: "disperse", Bricks: 6, Redundancy: 2}) ||
		!measures("mortar", Layout{Kind: "distribute", Bricks: 3}) {
		t.Error("mortar-distribute measures only the redundant layouts; mortar all of them")
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
	bin := buildMortar(t)
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
		t.Run(tg.Name()+"/disperse", func(t *testing.T) { checkDisperseMount(ctx, t, tg) })
	}
}

// checkDisperseMount mounts tg with a disperse 4+2 volume on loopback,
// writes a file of several stripes with O_DIRECT-sized writes, reads it
// back, and finds a fragment of it on each of the six bricks.
func checkDisperseMount(ctx context.Context, t *testing.T, tg Target) {
	work := t.TempDir()
	m, err := tg.Mount(ctx, work, Layout{Kind: "disperse", Bricks: 6, Redundancy: 2}, SetupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	f := filepath.Join(m.Dir(), "big")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(f); err != nil || !slices.Equal(b, data) {
		t.Fatalf("read back %d bytes, %v; want the %d written", len(b), err, len(data))
	}
	for i := 1; i <= 6; i++ {
		if _, err := os.Stat(filepath.Join(work, "b"+strconv.Itoa(i), "big")); err != nil {
			t.Errorf("brick %d has no fragment: %v", i, err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
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
	if mm, ok := m.(*mortarMount); ok {
		out, err := mm.cli(ctx, "volume", "get", mm.volume, "performance.client-cache")
		if err != nil || !strings.Contains(out, "off") {
			t.Errorf("client caches off: volume get says %q, %v", out, err)
		}
	}
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
