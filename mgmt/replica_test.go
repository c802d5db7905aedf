package mgmt

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/brickrun"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/volume"
)

// bricksOn returns "localhost:DIR" for each dir.
func bricksOn(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		out = append(out, "localhost:"+d)
	}
	return out
}

func arbiters(bricks []api.BrickInfo) []bool {
	var out []bool
	for _, b := range bricks {
		out = append(out, b.Arbiter)
	}
	return out
}

func TestCreateReplicated(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	cases := []struct {
		name     string
		replica  int
		arbiter  int
		bricks   int
		wantRepl int
		wantArb  []bool
	}{
		{"r3", 3, 0, 3, 3, []bool{false, false, false}},
		{"r2", 2, 0, 2, 2, []bool{false, false}},
		{"dr3", 3, 0, 6, 3, []bool{false, false, false, false, false, false}},
		{"arb", 3, 1, 6, 3, []bool{false, false, true, false, false, true}},
		{"arb-old", 2, 1, 3, 3, []bool{false, false, true}}, // GlusterFS's older spelling
	}
	for _, tc := range cases {
		vi, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: tc.name, Replica: tc.replica, Arbiter: tc.arbiter, Bricks: bricksOn(brickDirs(t, tc.bricks)), Force: true})
		if err != nil {
			t.Fatalf("%s: create: %v", tc.name, err)
		}
		if vi.Type != volume.Replicate || vi.Replica != tc.wantRepl || !slices.Equal(arbiters(vi.Bricks), tc.wantArb) {
			t.Errorf("%s: info type %s replica %d arbiters %v; want replicate, %d, %v", tc.name, vi.Type, vi.Replica, arbiters(vi.Bricks), tc.wantRepl, tc.wantArb)
		}
		if _, err := c.Start(ctx, tc.name, false); err != nil {
			t.Fatalf("%s: start: %v", tc.name, err)
		}
		spec, err := c.Spec(ctx, tc.name)
		if err != nil || spec.Type != volume.Replicate || spec.Replica != tc.wantRepl || len(spec.Sets()) != tc.bricks/tc.wantRepl || spec.Validate() != nil {
			t.Fatalf("%s: spec %+v, %v", tc.name, spec, err)
		}
		ports := map[string]bool{}
		for i, b := range spec.Bricks {
			if b.Arbiter != tc.wantArb[i] || b.Addr == "" || ports[b.Addr] {
				t.Errorf("%s: spec brick %d: %+v (addresses so far %v)", tc.name, i, b, ports)
			}
			ports[b.Addr] = true
		}
	}
}

func TestCreateLayoutRefusals(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	dirs := brickDirs(t, 66)
	cases := []struct {
		name   string
		req    api.CreateVolumeRequest
		marker error
		msg    string
	}{
		{"not a multiple", api.CreateVolumeRequest{Replica: 3, Bricks: bricksOn(dirs[:4])}, api.ErrInvalid, "replica sets of 3 need a multiple of 3 bricks, not 4"},
		{"replica 1", api.CreateVolumeRequest{Replica: 1, Bricks: bricksOn(dirs[:1])}, api.ErrInvalid, "replica count 1 is out of range"},
		{"replica too big", api.CreateVolumeRequest{Replica: volume.MaxReplica + 1, Bricks: bricksOn(dirs[:1])}, api.ErrInvalid, "out of range: a replica set has 2 to 16 bricks"},
		{"negative replica", api.CreateVolumeRequest{Replica: -2, Bricks: bricksOn(dirs[:2])}, api.ErrInvalid, "out of range"},
		{"arbiter 2", api.CreateVolumeRequest{Replica: 3, Arbiter: 2, Bricks: bricksOn(dirs[:3])}, api.ErrInvalid, "only \"arbiter 1\""},
		{"arbiter alone", api.CreateVolumeRequest{Arbiter: 1, Bricks: bricksOn(dirs[:3])}, api.ErrInvalid, "arbiter needs a replicated volume"},
		{"arbiter replica 4", api.CreateVolumeRequest{Replica: 4, Arbiter: 1, Bricks: bricksOn(dirs[:4])}, api.ErrInvalid, "arbiter volumes are replica 3"},
		{"arbiter old spelling, 4 bricks", api.CreateVolumeRequest{Replica: 2, Arbiter: 1, Bricks: bricksOn(dirs[:4])}, api.ErrInvalid, "replica sets of 3 need"},
		{"redundancy half", api.CreateVolumeRequest{Disperse: 6, Redundancy: 3, Bricks: bricksOn(dirs[:6])}, api.ErrInvalid, "disperse 6 redundancy 3: redundancy 3 is not below half of 6 bricks"},
		{"redundancy more than half", api.CreateVolumeRequest{Disperse: 6, Redundancy: 4, Bricks: bricksOn(dirs[:6])}, api.ErrInvalid, "not below half"},
		{"data + half redundancy", api.CreateVolumeRequest{DisperseData: 2, Redundancy: 2, Bricks: bricksOn(dirs[:4])}, api.ErrInvalid, "not below half of 4 bricks"},
		{"disperse not a multiple", api.CreateVolumeRequest{Disperse: 6, Redundancy: 2, Bricks: bricksOn(dirs[:8])}, api.ErrInvalid, "8 bricks do not make disperse sets of 6"},
		{"data not a multiple", api.CreateVolumeRequest{DisperseData: 4, Redundancy: 2, Bricks: bricksOn(dirs[:9])}, api.ErrInvalid, "9 bricks do not make disperse sets of 6"},
		{"replica and disperse", api.CreateVolumeRequest{Replica: 3, Disperse: 6, Bricks: bricksOn(dirs[:6])}, api.ErrInvalid, "either replicated or dispersed, not both"},
		{"replica and redundancy", api.CreateVolumeRequest{Replica: 3, Redundancy: 1, Bricks: bricksOn(dirs[:3])}, api.ErrInvalid, "either replicated or dispersed"},
		{"arbiter and disperse", api.CreateVolumeRequest{Arbiter: 1, Disperse: 3, Bricks: bricksOn(dirs[:3])}, api.ErrInvalid, "either replicated or dispersed"},
		{"disperse data mismatch", api.CreateVolumeRequest{Disperse: 6, DisperseData: 3, Redundancy: 2, Bricks: bricksOn(dirs[:6])}, api.ErrInvalid, "disperse 6 does not equal disperse-data 3 + redundancy 2"},
		{"disperse too small", api.CreateVolumeRequest{Disperse: 2, Redundancy: 1, Bricks: bricksOn(dirs[:2])}, api.ErrInvalid, "at least 3 bricks"},
		{"disperse too big", api.CreateVolumeRequest{Disperse: -1, Redundancy: 2, Bricks: bricksOn(dirs[:66])}, api.ErrInvalid, "at most 63 bricks"},
		{"negative redundancy", api.CreateVolumeRequest{Disperse: 6, Redundancy: -1, Bricks: bricksOn(dirs[:6])}, api.ErrInvalid, "redundancy must be at least 1"},
	}
	for _, tc := range cases {
		tc.req.Name = "v"
		_, err := c.CreateVolume(ctx, tc.req)
		if !errors.Is(err, tc.marker) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v; want %v containing %q", tc.name, err, tc.marker, tc.msg)
		}
	}
	if vols, _ := c.List(ctx); len(vols) != 0 {
		t.Errorf("refused creates left volumes: %+v", vols)
	}
	for _, d := range dirs {
		if mark, err := posix.ReadMark(d); mark != "" || err != nil {
			t.Errorf("refused create marked %s: %q %v", d, mark, err)
		}
	}
}

func TestReplicaOptions(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "r3", Replica: 3, Bricks: bricksOn(brickDirs(t, 3)), Force: true}); err != nil {
		t.Fatal(err)
	}
	good := [][2]string{
		{options.OptQuorumType, "fixed"}, {options.OptQuorumCount, "2"}, {options.OptQuorumCount, "3"},
		{options.OptFavoriteChildPolicy, "mtime"}, {options.OptFavoriteChildPolicy, "majority"}, {options.OptHealInterval, "0.5"},
	}
	for _, kv := range good {
		if _, err := c.Set(ctx, "r3", kv[0], kv[1]); err != nil {
			t.Errorf("set %s %s: %v", kv[0], kv[1], err)
		}
	}
	bad := map[[2]string]string{
		{options.OptQuorumType, "most"}:             "must be one of auto, fixed, none",
		{options.OptQuorumCount, "0"}:               "integer of at least 1",
		{options.OptQuorumCount, "4"}:               "more than the replica count 3",
		{options.OptFavoriteChildPolicy, "biggest"}: "must be one of none, mtime, size, majority",
		{options.OptHealInterval, "0"}:              "at least 0.1 seconds",
	}
	for kv, msg := range bad {
		if _, err := c.Set(ctx, "r3", kv[0], kv[1]); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), msg) {
			t.Errorf("set %s %s: %v; want %q", kv[0], kv[1], err, msg)
		}
	}
	if _, err := c.Start(ctx, "r3", false); err != nil {
		t.Fatal(err)
	}
	spec, err := c.Spec(ctx, "r3")
	if err != nil || spec.Option(options.OptQuorumCount, "") != "3" || spec.DurationOption(options.OptHealInterval, 0) != 500*time.Millisecond {
		t.Fatalf("options in the spec: %+v, %v", spec.Options, err)
	}
}

// ports returns the bricks' ports from status, failing unless all are
// online.
func onlinePorts(t *testing.T, c *api.Client, name string) []int {
	t.Helper()
	st, err := c.Status(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	var ports []int
	for _, b := range st.Bricks {
		if !b.Online || b.Port == 0 {
			t.Fatalf("brick not online: %+v", b)
		}
		ports = append(ports, b.Port)
	}
	return ports
}

// A brick keeps its port over a volume stop/start and a node restart, and
// the spec (what clients keep) does not change.
func TestBrickPortsKept(t *testing.T) {
	data := t.TempDir()
	n, c := startNode(t, data)
	ctx := ctxT(t)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "gv0", Replica: 3, Bricks: bricksOn(brickDirs(t, 3)), Force: true}); err != nil {
		t.Fatal(err)
	}
	if vi, _ := c.Info(ctx, "gv0"); vi.Bricks[0].Port != 0 || vi.Bricks[0].Addr != "" {
		t.Fatalf("a brick never started has an address: %+v", vi.Bricks[0])
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatal(err)
	}
	first := onlinePorts(t, c, "gv0")
	spec1, _ := c.Spec(ctx, "gv0")
	if _, err := c.Stop(ctx, "gv0"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatal(err)
	}
	if again := onlinePorts(t, c, "gv0"); !slices.Equal(first, again) {
		t.Fatalf("ports after stop/start: %v, before %v", again, first)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	_, c2 := startNode(t, data)
	if again := onlinePorts(t, c2, "gv0"); !slices.Equal(first, again) {
		t.Fatalf("ports after a node restart: %v, before %v", again, first)
	}
	spec2, err := c2.Spec(ctx, "gv0")
	if err != nil || spec2.Version != spec1.Version || spec2.Bricks[2].Addr != spec1.Bricks[2].Addr {
		t.Fatalf("spec after restart %+v, %v; before %+v", spec2, err, spec1)
	}
	if _, err := brickClient(t, spec2, 2).Lookup(ctx, "/"); err != nil {
		t.Fatalf("brick at its old address after a node restart: %v", err)
	}
}

// A killed brick is offline in status with why, is not restarted by
// itself, and "start force" brings it back on its port.
func TestKillBrickStartForce(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	dirs := brickDirs(t, 3)
	vi, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "gv0", Replica: 3, Bricks: bricksOn(dirs), Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatal(err)
	}
	ports := onlinePorts(t, c, "gv0")
	spec, _ := c.Spec(ctx, "gv0")
	pc := brickClient(t, spec, 1)
	if _, err := pc.Lookup(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	victim := vi.Bricks[1].ID
	if err := n.KillBrick(victim); err != nil {
		t.Fatal(err)
	}
	if err := n.KillBrick(victim); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("killing a dead brick: %v", err)
	}
	st, _ := c.Status(ctx, "gv0")
	if b := st.Bricks[1]; b.Online || !strings.Contains(b.Error, "killed") || b.Port != ports[1] {
		t.Fatalf("killed brick in status: %+v", b)
	}
	if !st.Bricks[0].Online || !st.Bricks[2].Online {
		t.Fatalf("the other bricks went down too: %+v", st.Bricks)
	}
	if _, err := c.Start(ctx, "gv0", false); !errors.Is(err, api.ErrState) {
		t.Fatalf("start without force of a started volume: %v", err)
	}
	if _, err := c.Start(ctx, "gv0", true); err != nil {
		t.Fatalf("start force: %v", err)
	}
	if again := onlinePorts(t, c, "gv0"); !slices.Equal(again, ports) {
		t.Fatalf("ports after start force: %v, before %v", again, ports)
	}
	// The client that knew the old address finds the brick again.
	deadline := time.Now().Add(10 * time.Second)
	for _, err := pc.Lookup(ctx, "/"); err != nil; _, err = pc.Lookup(ctx, "/") {
		if time.Now().After(deadline) {
			t.Fatalf("client after the brick came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.Start(ctx, "gv0", true); err != nil {
		t.Fatalf("start force with every brick online: %v", err)
	}
}

// A volume start that fails on one brick says why and leaves no brick
// running; the volume stays stopped.
func TestStartFailureStopsOthers(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	dirs := brickDirs(t, 3)
	vi, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "gv0", Bricks: bricksOn(dirs), Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dirs[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "gv0", false); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), dirs[2]) {
		t.Fatalf("start with a brick dir missing: %v", err)
	}
	st, _ := c.Status(ctx, "gv0")
	for _, b := range st.Bricks {
		if b.Online {
			t.Fatalf("brick left running after a failed start: %+v", b)
		}
	}
	if st.Status != api.StatusCreated {
		t.Fatalf("volume status after a failed start: %s", st.Status)
	}
	// A brick directory that belongs to another volume is refused too.
	if err := os.Mkdir(dirs[2], 0o755); err != nil {
		t.Fatal(err)
	}
	if err := posix.Mark(dirs[2], "some-other-volume", true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "gv0", false); err == nil || !strings.Contains(err.Error(), "some-other-volume") {
		t.Fatalf("start with a brick of another volume: %v", err)
	}
	posix.Unmark(dirs[2])
	if err := posix.Mark(dirs[2], vi.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatalf("start once the brick is back: %v", err)
	}
}

// A brick whose port is taken when it restarts stays offline with a clear
// error; freeing the port and "start force" bring it back there.
func TestBrickPortTaken(t *testing.T) {
	defer func(d time.Duration) { brickrun.AddrInUseWait = d }(brickrun.AddrInUseWait)
	brickrun.AddrInUseWait = 200 * time.Millisecond
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	vi, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "gv0", Bricks: bricksOn(brickDirs(t, 2)), Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatal(err)
	}
	ports := onlinePorts(t, c, "gv0")
	if err := n.KillBrick(vi.Bricks[0].ID); err != nil {
		t.Fatal(err)
	}
	squatter, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Start(ctx, "gv0", true)
	if err == nil || !strings.Contains(err.Error(), "in use by another program") {
		t.Fatalf("start force with the port taken: %v", err)
	}
	st, _ := c.Status(ctx, "gv0")
	if b := st.Bricks[0]; b.Online || !strings.Contains(b.Error, "in use") || b.Port != ports[0] {
		t.Fatalf("brick with its port taken: %+v", b)
	}
	if !st.Bricks[1].Online {
		t.Fatalf("the other brick went down: %+v", st.Bricks[1])
	}
	squatter.Close()
	if _, err := c.Start(ctx, "gv0", true); err != nil {
		t.Fatal(err)
	}
	if again := onlinePorts(t, c, "gv0"); !slices.Equal(again, ports) {
		t.Fatalf("ports: %v, want %v", again, ports)
	}
}

// TestBrickProcesses runs the bricks as processes (this test binary in
// the role of `mortar brick`, see TestMain): readiness, an error reported
// by the child, kill -9, start force, stop.
func TestBrickProcesses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	n, err := Start(Config{DataDir: data, Listen: "127.0.0.1:0", Logger: testLogger(t), BrickExec: exe, BrickLogLevel: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	c := api.NewClient(n.ListenAddr())
	ctx := ctxT(t)
	dirs := brickDirs(t, 3)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "gv0", Replica: 3, Arbiter: 1, Bricks: bricksOn(dirs), Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatalf("start: %v", err)
	}
	st, _ := c.Status(ctx, "gv0")
	pids := map[int]bool{}
	for _, b := range st.Bricks {
		if !b.Online || b.PID <= 0 || b.PID == os.Getpid() || pids[b.PID] {
			t.Fatalf("brick process in status: %+v", b)
		}
		pids[b.PID] = true
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(st.Bricks[2].PID) + "/cmdline")
	if !strings.Contains(string(cmdline), "--arbiter") || !strings.Contains(string(cmdline), dirs[2]) {
		t.Errorf("arbiter brick's command line: %q", cmdline)
	}
	if _, err := os.Stat(filepath.Join(data, "logs", "bricks", brickrun.LogName(dirs[0]))); err != nil {
		t.Errorf("brick log: %v", err)
	}
	spec, _ := c.Spec(ctx, "gv0")
	if _, err := brickClient(t, spec, 0).Lookup(ctx, "/"); err != nil {
		t.Fatalf("lookup on a brick process: %v", err)
	}

	victim := st.Bricks[0]
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var dead api.BrickStatus
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, _ = c.Status(ctx, "gv0")
		if dead = st.Bricks[0]; !dead.Online || time.Now().After(deadline) {
			break
		}
	}
	if dead.Online || dead.PID != 0 || !strings.Contains(dead.Error, "signal: killed") || !strings.Contains(dead.Error, "log") {
		t.Fatalf("brick after kill -9: %+v", dead)
	}
	if _, err := c.Start(ctx, "gv0", true); err != nil {
		t.Fatalf("start force: %v", err)
	}
	st, _ = c.Status(ctx, "gv0")
	if b := st.Bricks[0]; !b.Online || b.Port != victim.Port || b.PID == victim.PID || b.Error != "" {
		t.Fatalf("brick after start force: %+v (was %+v)", b, victim)
	}
	if _, err := c.Stop(ctx, "gv0"); err != nil {
		t.Fatal(err)
	}
	for _, b := range st.Bricks {
		if err := syscall.Kill(b.PID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("brick process %d after stop: %v", b.PID, err)
		}
	}

	// The child's own error reaches the caller.
	if err := os.RemoveAll(dirs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "gv0", false); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("start with a brick dir missing: %v", err)
	}
	if st, _ := c.Status(ctx, "gv0"); st.Bricks[0].Online || st.Bricks[2].Online {
		t.Fatalf("bricks left running after a failed start: %+v", st.Bricks)
	}
}
