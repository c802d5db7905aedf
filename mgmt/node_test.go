package mgmt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/volume"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// startNode starts a node on 127.0.0.1 with its state in dataDir.
func startNode(t *testing.T, dataDir string) (*Node, *api.Client) {
	t.Helper()
	n, err := Start(Config{DataDir: dataDir, Listen: "127.0.0.1:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n, api.NewClient(n.ListenAddr())
}

// brickDirs makes n empty directories and returns their paths.
func brickDirs(t *testing.T, n int) []string {
	t.Helper()
	root := t.TempDir()
	var dirs []string
	for i := range n {
		d := filepath.Join(root, "b"+strconv.Itoa(i+1))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	return dirs
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestVolumeLifecycle(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	dirs := brickDirs(t, 2)
	vi, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "gv0", Bricks: []string{"localhost:" + dirs[0], "127.0.0.1:" + dirs[1]}, Force: true})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if vi.Status != api.StatusCreated || vi.Type != "distribute" || len(vi.Bricks) != 2 || vi.Bricks[1].Name() != "127.0.0.1:"+dirs[1] {
		t.Fatalf("created volume: %+v", vi)
	}
	if mark, err := posix.ReadMark(dirs[0]); err != nil || mark != vi.ID {
		t.Fatalf("brick mark = %q, %v; want %s", mark, err, vi.ID)
	}
	if _, err := c.Spec(ctx, "gv0"); !errors.Is(err, api.ErrState) || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("spec of a created volume: %v", err)
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatalf("start: %v", err)
	}
	if _, err := c.Start(ctx, "gv0", false); !errors.Is(err, api.ErrState) {
		t.Fatalf("second start: %v", err)
	}
	st, err := c.Status(ctx, "gv0")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range st.Bricks {
		if !b.Online || b.Disk == nil || b.Disk.Total == 0 || b.Port == 0 || b.Addr != state.BrickAddr(n.Addr(), b.Port) || b.Addr == n.Addr() {
			t.Fatalf("brick status: %+v (node addr %s)", b, n.Addr())
		}
	}
	if st.Bricks[0].Port == st.Bricks[1].Port {
		t.Fatalf("two bricks on one port: %+v", st.Bricks)
	}
	spec, err := c.Spec(ctx, "gv0")
	if err != nil || spec.ID != vi.ID || len(spec.Bricks) != 2 || spec.Bricks[0].Addr != st.Bricks[0].Addr {
		t.Fatalf("spec = %+v, %v", spec, err)
	}
	if vi, err = c.Set(ctx, "gv0", options.OptAttrTimeout, "2.5"); err != nil || vi.Options[options.OptAttrTimeout] != "2.5" || vi.SpecVersion != spec.Version+1 {
		t.Fatalf("set: %+v, %v", vi, err)
	}
	list, err := c.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "gv0" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if _, err := c.Stop(ctx, "gv0"); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if st, _ := c.Status(ctx, "gv0"); st.Bricks[0].Online {
		t.Fatalf("brick online after stop: %+v", st.Bricks[0])
	}
	keep := filepath.Join(dirs[0], "keep")
	if err := os.WriteFile(keep, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "gv0"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.Info(ctx, "gv0"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("info after delete: %v", err)
	}
	if mark, _ := posix.ReadMark(dirs[0]); mark != "" {
		t.Fatalf("brick still marked %q after delete", mark)
	}
	if data, err := os.ReadFile(keep); err != nil || string(data) != "data" {
		t.Fatalf("brick data after delete: %q, %v", data, err)
	}
	// The directories can make a new volume (with force: it holds files).
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "gv1", Bricks: []string{"localhost:" + dirs[0]}, Force: true}); err != nil {
		t.Fatalf("create again on the same brick: %v", err)
	}
}

func TestCreateRefusals(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	dirs := brickDirs(t, 3)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "taken", Bricks: []string{"localhost:" + dirs[0]}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "taken", false); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dirs[2], "file")
	os.WriteFile(file, nil, 0o644)
	cases := []struct {
		name   string
		req    api.CreateVolumeRequest
		marker error
		msg    string
	}{
		{"missing dir", api.CreateVolumeRequest{Name: "v", Bricks: []string{"localhost:" + dirs[1] + "/nope"}}, api.ErrInvalid, "does not exist"},
		{"not a dir", api.CreateVolumeRequest{Name: "v", Bricks: []string{"localhost:" + file}}, api.ErrInvalid, "not a directory"},
		{"in another volume", api.CreateVolumeRequest{Name: "v", Bricks: []string{"localhost:" + dirs[0]}}, api.ErrInvalid, "already part of volume taken"},
		{"inside another brick", api.CreateVolumeRequest{Name: "v", Bricks: []string{"localhost:" + dirs[0] + "/sub"}}, api.ErrInvalid, "nested"},
		{"foreign host", api.CreateVolumeRequest{Name: "v", Bricks: []string{"192.0.2.7:" + dirs[1]}}, api.ErrInvalid, "host 192.0.2.7 is not a node of this cluster (add it with: mortar peer probe 192.0.2.7)"},
		{"bad name", api.CreateVolumeRequest{Name: "a/b", Bricks: []string{"localhost:" + dirs[1]}}, api.ErrInvalid, "may contain only"},
		{"long name", api.CreateVolumeRequest{Name: strings.Repeat("x", 65), Bricks: []string{"localhost:" + dirs[1]}}, api.ErrInvalid, "longer than 64"},
		{"duplicate brick", api.CreateVolumeRequest{Name: "v", Bricks: []string{"localhost:" + dirs[1], "127.0.0.1:" + dirs[1] + "/"}}, api.ErrInvalid, "duplicate brick"},
		{"no bricks", api.CreateVolumeRequest{Name: "v"}, api.ErrInvalid, "no bricks"},
		{"relative path", api.CreateVolumeRequest{Name: "v", Bricks: []string{"localhost:data"}}, api.ErrInvalid, "absolute"},
		{"existing name", api.CreateVolumeRequest{Name: "taken", Bricks: []string{"localhost:" + dirs[1]}}, api.ErrExists, "volume taken already exists"},
		{"disperse", api.CreateVolumeRequest{Name: "v", Disperse: 3, Bricks: []string{"localhost:" + dirs[1]}}, api.ErrInvalid, "1 bricks do not make disperse sets of 3"},
	}
	for _, tc := range cases {
		_, err := c.CreateVolume(ctx, tc.req)
		if !errors.Is(err, tc.marker) || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v; want %v containing %q", tc.name, err, tc.marker, tc.msg)
		}
	}
	// "/" is refused, even with force (on a node without other bricks,
	// which "/" would contain).
	_, c2 := startNode(t, t.TempDir())
	for _, force := range []bool{false, true} {
		if _, err := c2.CreateVolume(ctx, api.CreateVolumeRequest{Name: "v", Bricks: []string{"localhost:/"}, Force: force}); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "system directory") {
			t.Errorf("brick on / (force %v): %v", force, err)
		}
	}
	// A refused create leaves no mark behind on the bricks it had checked.
	if mark, _ := posix.ReadMark(dirs[1]); mark != "" {
		t.Errorf("%s marked %q after refused creates", dirs[1], mark)
	}
	if err := c.Delete(ctx, "taken"); !errors.Is(err, api.ErrState) || !strings.Contains(err.Error(), "stop it first") {
		t.Errorf("delete of a started volume: %v", err)
	}
	if _, err := c.Set(ctx, "taken", "performance.nonsense", "1"); err == nil || !strings.Contains(err.Error(), options.OptPingTimeout) {
		t.Errorf("unknown option: %v (want the list of known options)", err)
	}
	if _, err := c.Set(ctx, "taken", options.OptPingTimeout, "-1"); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("bad option value: %v", err)
	}
	if _, err := c.Start(ctx, "nope", false); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("start of a missing volume: %v", err)
	}
}

func TestRestartKeepsVolumes(t *testing.T) {
	data := t.TempDir()
	n, c := startNode(t, data)
	ctx := ctxT(t)
	dirs := brickDirs(t, 2)
	for _, name := range []string{"up", "down"} {
		i := map[string]int{"up": 0, "down": 1}[name]
		if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: name, Bricks: []string{"localhost:" + dirs[i]}, Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Start(ctx, "up", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "down", options.OptEntryTimeout, "3"); err != nil {
		t.Fatal(err)
	}
	oldID := n.ID()
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	n2, c2 := startNode(t, data)
	if n2.ID() != oldID {
		t.Fatalf("node id changed over a restart: %s → %s", oldID, n2.ID())
	}
	st, err := c2.Status(ctx, "up")
	if err != nil || st.Status != api.StatusStarted || !st.Bricks[0].Online {
		t.Fatalf("started volume after restart: %+v, %v", st, err)
	}
	spec, err := c2.Spec(ctx, "up")
	if err != nil || spec.Bricks[0].Addr != state.BrickAddr(n2.Addr(), st.Bricks[0].Port) {
		t.Fatalf("spec after restart: %+v, %v (node at %s)", spec, err, n2.Addr())
	}
	vi, err := c2.Info(ctx, "down")
	if err != nil || vi.Status != api.StatusCreated || vi.Options[options.OptEntryTimeout] != "3" {
		t.Fatalf("created volume after restart: %+v, %v", vi, err)
	}
	if st, _ := c2.Status(ctx, "down"); st.Bricks[0].Online {
		t.Fatal("brick of a volume never started is online")
	}
}

func TestDataDirLocked(t *testing.T) {
	data := t.TempDir()
	startNode(t, data)
	_, err := Start(Config{DataDir: data, Listen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second node on one data dir: %v", err)
	}
}

// TestBrickOwnPort: the node's port answers HTTP; a brick is reached on
// its own port (the one in the spec) with the brick protocol.
func TestBrickOwnPort(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	resp, err := http.Get("http://" + n.ListenAddr() + "/v1/node")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), n.ID()) {
		t.Fatalf("GET /v1/node: %d %s", resp.StatusCode, body)
	}
	dirs := brickDirs(t, 1)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "gv0", Bricks: []string{"localhost:" + dirs[0]}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatal(err)
	}
	spec, err := c.Spec(ctx, "gv0")
	if err != nil {
		t.Fatal(err)
	}
	if attr, err := brickClient(t, spec, 0).Lookup(ctx, "/"); err != nil || !attr.IsDir() {
		t.Fatalf("lookup / on the brick's port: %+v, %v", attr, err)
	}
}

// brickClient connects a protocol client to brick i of spec; its first
// operation waits for the connection.
func brickClient(t *testing.T, spec volume.Spec, i int) *protocol.Client {
	t.Helper()
	b := spec.Bricks[i]
	cfg := volume.BrickClientConfig(spec, b)
	cfg.Logger = testLogger(t)
	pc := protocol.New(cfg)
	t.Cleanup(func() { pc.Close() })
	return pc
}

// TestGarbageOnAPIPort: a connection that is not HTTP, sent in pieces,
// gets an HTTP error.
func TestGarbageOnAPIPort(t *testing.T) {
	n, _ := startNode(t, t.TempDir())
	conn, err := net.Dial("tcp", n.ListenAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("XX"))
	time.Sleep(20 * time.Millisecond)
	conn.Write([]byte("XX\r\n\r\n"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	m, _ := conn.Read(buf)
	if !strings.HasPrefix(string(buf[:m]), "HTTP/1.1 400") {
		t.Fatalf("garbage got %q, want an HTTP 400", buf[:m])
	}
}

// TestCloseWithIdleConnection: a connection that never sends its first
// bytes does not hold up Close.
func TestCloseWithIdleConnection(t *testing.T) {
	n, err := Start(Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", n.ListenAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(50 * time.Millisecond) // let the node accept it
	start := time.Now()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Close took %v with an idle connection open", d)
	}
}

func TestConfig(t *testing.T) {
	bad := []Config{
		{},
		{DataDir: "d", Listen: "nope"},
		{DataDir: "d", Advertise: ":7420"},
		{DataDir: "d", Advertise: "0.0.0.0:7420"},
		{DataDir: "d", Advertise: "host:0"},
		{DataDir: "d", Advertise: "host"},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", c)
		}
	}
	if err := (Config{DataDir: "d", Advertise: "server1:7420"}).Validate(); err != nil {
		t.Errorf("good config: %v", err)
	}
	if got := deriveAdvertise("127.0.0.1:7420"); got != "127.0.0.1:7420" {
		t.Errorf("deriveAdvertise(127.0.0.1:7420) = %s", got)
	}
	got := deriveAdvertise("[::]:7420")
	if host, port, err := net.SplitHostPort(got); err != nil || port != "7420" || host == "" || isUnspecified(host) {
		t.Errorf("deriveAdvertise([::]:7420) = %s", got)
	}
	if !api.IsLocalHost(t.Context(), "localhost", "") || !api.IsLocalHost(t.Context(), "127.0.0.2", "") || api.IsLocalHost(t.Context(), "192.0.2.1", "") {
		t.Error("isLocalHost misjudges localhost, 127.0.0.2 or 192.0.2.1")
	}
	if name, err := os.Hostname(); err == nil && !api.IsLocalHost(t.Context(), name, "") {
		t.Errorf("isLocalHost(%q) (the host name) = false", name)
	}
}

// Encryption is chosen before a volume's first start; the access lists
// are checked for shape.
func TestSecurityOptions(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	dirs := brickDirs(t, 1)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "sv", Bricks: []string{"localhost:" + dirs[0]}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "sv", options.OptEncryption, "on"); err != nil {
		t.Fatalf("encryption on before the first start: %v", err)
	}
	if _, err := c.Set(ctx, "sv", options.OptEncryption, "maybe"); !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("encryption maybe: %v", err)
	}
	if _, err := c.Start(ctx, "sv", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "sv", options.OptEncryption, "off"); !errors.Is(err, api.ErrState) {
		t.Fatalf("encryption off after the start: %v, want refused", err)
	}
	if _, err := c.Set(ctx, "sv", options.OptEncryption, "on"); err != nil {
		t.Fatalf("setting the same value again: %v", err)
	}
	if _, err := c.Set(ctx, "sv", options.OptAuthAllow, "client-*,10.0.0.0/8"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "sv", options.OptAuthReject, "a b"); !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("auth.reject with a space: %v", err)
	}
}

// storage.reserve takes a percentage or a size and refuses anything else;
// its bricks read it when they start: at 100 % a brick refuses every new
// file with ENOSPC, and back at the default (after a restart of the
// volume) it takes them again. A change while the bricks run applies to
// them too, both ways.
func TestStorageReserve(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	dirs := brickDirs(t, 1)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "gv0", Bricks: []string{"localhost:" + dirs[0]}, Force: true}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"101", "-1", "lots", "10PB"} {
		if _, err := c.Set(ctx, "gv0", options.OptStorageReserve, bad); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("storage.reserve %q: %v, want refused", bad, err)
		}
	}
	if _, err := c.Set(ctx, "gv0", options.OptStorageReserve, "100"); err != nil {
		t.Fatal(err)
	}
	made := 0
	create := func() error {
		spec, err := c.Spec(ctx, "gv0")
		if err != nil {
			t.Fatal(err)
		}
		pc := brickClient(t, spec, 0)
		defer pc.Close() // a new client each time: one would hold a connection per call
		made++           // a new name: opening one that exists takes no space
		f, _, err := pc.Create(ctx, fmt.Sprint("/f", made), layer.CreateIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Flags: syscall.O_RDWR | syscall.O_CREAT, Mode: 0o644})
		if err == nil {
			f.Release(ctx)
		}
		return err
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatal(err)
	}
	if err := create(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create on a brick that keeps 100%% free: %v, want ENOSPC", err)
	}
	if _, err := c.Stop(ctx, "gv0"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "gv0", options.OptStorageReserve, "1MB"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatal(err)
	}
	if err := create(); err != nil {
		t.Fatalf("create once the reserve is 1MB: %v", err)
	}
	if _, err := c.Set(ctx, "gv0", options.OptStorageReserve, "100"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a running brick refusing new files at a reserve of 100%", func() error {
		if err := create(); !errors.Is(err, syscall.ENOSPC) {
			return fmt.Errorf("create: %v, want ENOSPC", err)
		}
		return nil
	})
	if _, err := c.Set(ctx, "gv0", options.OptStorageReserve, "1MB"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a running brick taking new files again at a reserve of 1MB", create)
}

// The reconciler's sweep stops the run of a volume that its state no
// longer has, and only that: not the run of a volume created and started
// after it read the state (its bricks would go on serving untracked: no
// status, no stop), nor a run made from a leader's state newer than its.
func TestSweepStopsOnlyRunsOfVolumesItsStateDropped(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	stale := n.store.State()
	vi, _ := replicaVolume(t, c, "gv0", 2, 0, 2)
	runs := func(id string) bool {
		n.runMu.Lock()
		defer n.runMu.Unlock()
		return n.vols[id] != nil
	}
	n.sweep(stale)
	if !runs(vi.ID) {
		t.Fatal("a sweep with a state read before the volume existed stopped the volume's run")
	}
	st, err := c.Status(ctx, "gv0")
	if err != nil || len(st.Bricks) != 2 || !st.Bricks[0].Online || !st.Bricks[1].Online {
		t.Fatalf("status after the sweep: %+v, %v", st, err)
	}
	// A volume this node's state never had: its run was made from a
	// leader's state (index ahead), then the volume was deleted.
	now := n.store.State()
	future := &state.Volume{Name: "future", ID: "f00d"}
	if _, err := n.volumeRunFor(future, now.Index+2); err != nil {
		t.Fatal(err)
	}
	defer n.stopVolumeRun(future.ID)
	n.sweep(now)
	if !runs(future.ID) {
		t.Fatal("the run of a volume made from a newer state was stopped by an older one")
	}
	later := now.Clone()
	later.Index += 3 // the create and the delete applied
	n.sweep(later)
	if runs(future.ID) {
		t.Fatal("the run of a volume the state no longer has is left running")
	}
}
