package mgmt

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/brickrun"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/volume"
)

// disperseVolume creates and starts a dispersed volume over new
// directories, and returns its info and the directories.
func disperseVolume(t *testing.T, c *api.Client, name string, disperse, redundancy, nbricks int) (api.VolumeInfo, []string) {
	t.Helper()
	ctx := ctxT(t)
	dirs := brickDirs(t, nbricks)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: name, Disperse: disperse, Redundancy: redundancy, Bricks: bricksOn(dirs), Force: true}); err != nil {
		t.Fatal(err)
	}
	vi, err := c.Start(ctx, name, false)
	if err != nil {
		t.Fatal(err)
	}
	return vi, dirs
}

// servedDisperse reports whether brick id of volume vid runs in this node
// with the disperse storage.
func servedDisperse(t *testing.T, n *Node, vid, id string) bool {
	t.Helper()
	n.runMu.Lock()
	defer n.runMu.Unlock()
	br := n.vols[vid].brick(id)
	if br == nil || br.proc == nil {
		t.Fatalf("brick %s does not run", id)
	}
	return br.proc.(*brickrun.InProcBrick).Config().Disperse
}

func TestCreateDispersed(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	cases := []struct {
		name   string
		req    api.CreateVolumeRequest
		bricks int
		// what the volume is: set size, redundancy, number of sets
		disperse, redundancy, sets int
		warn                       string
	}{
		{"ec62", api.CreateVolumeRequest{Disperse: 6, Redundancy: 2}, 6, 6, 2, 1, ""},
		{"ec12", api.CreateVolumeRequest{Disperse: 6, Redundancy: 2}, 12, 6, 2, 2, ""},
		{"ecdata", api.CreateVolumeRequest{DisperseData: 4, Redundancy: 2}, 6, 6, 2, 1, ""},
		{"ecdata12", api.CreateVolumeRequest{DisperseData: 4, Redundancy: 2}, 12, 6, 2, 2, ""},
		{"ecboth", api.CreateVolumeRequest{Disperse: 6, DisperseData: 4, Redundancy: 2}, 6, 6, 2, 1, ""},
		{"ecall", api.CreateVolumeRequest{Disperse: -1}, 3, 3, 1, 1, ""},         // "disperse" alone: all the bricks
		{"ecdefault", api.CreateVolumeRequest{Disperse: 6}, 6, 6, 2, 1, ""},      // redundancy: a third
		{"ecredundancy", api.CreateVolumeRequest{Redundancy: 1}, 5, 5, 1, 1, ""}, // "redundancy 1" alone: all the bricks
		{"ec72", api.CreateVolumeRequest{Disperse: 7, Redundancy: 2}, 7, 7, 2, 1, "disperse 7 redundancy 2: 5 data bricks is not a power of two"},
	}
	for _, tc := range cases {
		req := tc.req
		req.Name, req.Bricks, req.Force = tc.name, bricksOn(brickDirs(t, tc.bricks)), true
		vi, err := c.CreateVolume(ctx, req)
		if err != nil {
			t.Fatalf("%s: create: %v", tc.name, err)
		}
		if vi.Type != volume.Disperse || vi.Disperse != tc.disperse || vi.Redundancy != tc.redundancy || vi.Replica != 0 || len(vi.Bricks) != tc.bricks {
			t.Errorf("%s: info %+v; want disperse %d redundancy %d", tc.name, vi, tc.disperse, tc.redundancy)
		}
		switch {
		case tc.warn == "" && len(vi.Warnings) != 0:
			t.Errorf("%s: warnings %q", tc.name, vi.Warnings)
		case tc.warn != "" && (len(vi.Warnings) != 1 || !strings.HasPrefix(vi.Warnings[0], tc.warn)):
			t.Errorf("%s: warnings %q; want one starting with %q", tc.name, vi.Warnings, tc.warn)
		}
		if again, _ := c.Info(ctx, tc.name); len(again.Warnings) != 0 || again.Disperse != tc.disperse || again.Redundancy != tc.redundancy {
			t.Errorf("%s: info after create %+v", tc.name, again)
		}
		if _, err := c.Start(ctx, tc.name, false); err != nil {
			t.Fatalf("%s: start: %v", tc.name, err)
		}
		spec, err := c.Spec(ctx, tc.name)
		if err != nil || spec.Type != volume.Disperse || spec.Disperse != tc.disperse || spec.Redundancy != tc.redundancy ||
			spec.Replica != 0 || len(spec.Sets()) != tc.sets || spec.Validate() != nil {
			t.Fatalf("%s: spec %+v, %v", tc.name, spec, err)
		}
		st, err := c.Status(ctx, tc.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range st.Bricks {
			if !b.Online || b.Error != "" || b.Arbiter {
				t.Errorf("%s: brick %+v", tc.name, b)
			}
			if !servedDisperse(t, n, vi.ID, b.ID) {
				t.Errorf("%s: brick %s runs without the disperse storage", tc.name, b.Name())
			}
		}
	}
	// The bricks of other volumes do not run as disperse bricks.
	rv, _ := replicaVolume(t, c, "r3", 3, 0, 3)
	if servedDisperse(t, n, rv.ID, rv.Bricks[0].ID) {
		t.Error("a replica brick runs with the disperse storage")
	}
	// A dispersed volume mounts (its namespace at least: file data is the
	// disperse layer's business).
	vol := mountVolume(t, c, "ec62")
	if a, err := vol.Lookup(ctx, "/"); err != nil || a.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		t.Fatalf("lookup / on ec62: %+v %v", a, err)
	}
}

// The quorum options are replicate's; the others apply (quick-read and
// create-behind too).
func TestDisperseOptions(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "ec", Disperse: 6, Redundancy: 2, Bricks: bricksOn(brickDirs(t, 6)), Force: true}); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{options.OptQuorumType, "none"}, {options.OptQuorumType, "auto"}, {options.OptQuorumCount, "2"}} {
		_, err := c.Set(ctx, "ec", kv[0], kv[1])
		if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "applies to replicated volumes only") || !strings.Contains(err.Error(), "4 of its 6 bricks") {
			t.Errorf("set %s %s on a disperse volume: %v", kv[0], kv[1], err)
		}
	}
	for _, kv := range [][2]string{{options.OptHealInterval, "0.5"}, {options.OptPingTimeout, "3"}, {options.OptAttrTimeout, "0"},
		{options.OptQuickRead, "on"}, {options.OptQuickReadCacheTimeout, "1"}, {options.OptQuickReadMaxFileSize, "4096"}, {options.OptCreateBehind, "off"}} {
		if _, err := c.Set(ctx, "ec", kv[0], kv[1]); err != nil {
			t.Errorf("set %s %s: %v", kv[0], kv[1], err)
		}
	}
	if vi, _ := c.Info(ctx, "ec"); vi.Options[options.OptQuorumType] != "" || vi.Options[options.OptHealInterval] != "0.5" {
		t.Errorf("options %v", vi.Options)
	}
}

// A dispersed volume has a heal daemon: heal info lists every brick, and
// index and full heals run (on an empty volume).
func TestDisperseHeal(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	vi, dirs := disperseVolume(t, c, "ec", 6, 2, 12)
	n.runMu.Lock()
	d := n.vols[vi.ID].heal
	n.runMu.Unlock()
	if d == nil || d.Current() == nil {
		t.Fatal("no heal daemon for a started dispersed volume")
	}
	r := d.Current()
	if r.Sets() != 2 || r.SetSize(0) != 6 || !strings.Contains(r.Key(), "type=disperse replica=0 disperse=6 redundancy=2") {
		t.Fatalf("heal daemon: %d sets, config %q", r.Sets(), r.Key())
	}
	hi, err := c.HealInfo(ctx, "ec")
	if err != nil {
		t.Fatal(err)
	}
	if hi.Name != "ec" || len(hi.Bricks) != 12 || hi.Pending() != 0 || hi.SplitBrain != 0 {
		t.Fatalf("heal info %+v", hi)
	}
	for i, b := range hi.Bricks {
		if b.Name != "localhost:"+dirs[i] || b.Set != i/6 || b.Error != "" {
			t.Errorf("heal info brick %d: %+v", i, b)
		}
	}
	if err := c.Heal(ctx, "ec"); err != nil {
		t.Fatalf("heal: %v", err)
	}
	if _, err := c.HealFull(ctx, "ec"); err != nil {
		t.Fatalf("heal full: %v", err)
	}
	waitFor(t, 20*time.Second, "full heal of an empty disperse volume", func() error {
		hi, err := c.HealInfo(ctx, "ec")
		switch {
		case err != nil:
			return err
		case hi.Full == nil || hi.Full.Running:
			return errors.New("full heal running")
		case hi.Full.Error != "":
			t.Fatalf("full heal: %s", hi.Full.Error)
		}
		return nil
	})
	sb, err := c.SplitBrain(ctx, "ec")
	if err != nil || len(sb.Bricks) != 12 || len(sb.Entries) != 0 {
		t.Fatalf("split-brain info: %+v %v", sb, err)
	}
	_, err = c.ResolveSplitBrain(ctx, "ec", api.SplitBrainRequest{Policy: api.PolicyLatestMtime, Path: "/f"})
	if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "applies to replicated volumes only") {
		t.Errorf("resolving a split-brain of a dispersed volume: %v", err)
	}
	// Options change the healer, as for a replicated volume.
	if _, err := c.Set(ctx, "ec", options.OptHealInterval, "0.3"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "heal daemon with the new options", func() error {
		if k := d.Current().Key(); !strings.Contains(k, "interval=0.3") || !strings.Contains(k, "disperse=6") {
			return errors.New("config " + k)
		}
		return nil
	})
}

// reset-brick takes a brick of a dispersed volume, and needs as many other
// bricks of its set up as it has data bricks.
func TestDisperseResetBrick(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	vi, dirs := disperseVolume(t, c, "ec", 3, 1, 3)
	wipeBrick(t, n, vi, dirs, 2)
	// Two data bricks are needed; one is down too.
	if err := n.KillBrick(vi.Bricks[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResetBrick(ctx, "ec", "localhost:"+dirs[2]); !errors.Is(err, api.ErrState) || !strings.Contains(err.Error(), "only 1 other bricks of the disperse set") || !strings.Contains(err.Error(), "takes 2") {
		t.Fatalf("reset-brick with too few bricks up: %v", err)
	}
	// Start force brings the first brick back; the empty one cannot start.
	if _, err := c.Start(ctx, "ec", true); err == nil || !strings.Contains(err.Error(), "is not a brick of any volume") {
		t.Fatalf("start force with an empty brick: %v", err)
	}
	if _, err := c.ResetBrick(ctx, "ec", "localhost:"+dirs[2]); err != nil {
		t.Fatalf("reset-brick: %v", err)
	}
	st, _ := c.Status(ctx, "ec")
	for i, b := range st.Bricks {
		if !b.Online {
			t.Errorf("brick %d offline after reset-brick: %+v", i, b)
		}
	}
	if !servedDisperse(t, n, vi.ID, vi.Bricks[2].ID) {
		t.Error("the reset brick runs without the disperse storage")
	}
	waitFor(t, 20*time.Second, "the rebuild of the reset brick", func() error {
		hi, err := c.HealInfo(ctx, "ec")
		switch {
		case err != nil:
			return err
		case hi.Full == nil || hi.Full.Running || hi.Pending() != 0:
			return errors.New("heal running: pending " + strconv.Itoa(hi.Pending()))
		case hi.Full.Error != "":
			t.Fatalf("full heal: %s", hi.Full.Error)
		}
		return nil
	})
}

// Brick processes of a dispersed volume run with --disperse.
func TestDisperseBrickProcesses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	n, err := Start(Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: testLogger(t), BrickExec: exe, BrickLogLevel: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	c := api.NewClient(n.ListenAddr())
	ctx := ctxT(t)
	disperseVolume(t, c, "ec", 3, 1, 3)
	st, err := c.Status(ctx, "ec")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range st.Bricks {
		if !b.Online || b.PID <= 0 {
			t.Fatalf("brick process in status: %+v", b)
		}
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(b.PID) + "/cmdline")
		if !strings.Contains(string(cmdline), "\x00--disperse\x00") || strings.Contains(string(cmdline), "--arbiter") {
			t.Errorf("disperse brick's command line: %q", cmdline)
		}
	}
	spec, _ := c.Spec(ctx, "ec")
	if _, err := brickClient(t, spec, 0).Lookup(ctx, "/"); err != nil {
		t.Fatalf("lookup on a brick process: %v", err)
	}
	if hi, err := c.HealInfo(ctx, "ec"); err != nil || len(hi.Bricks) != 3 {
		t.Fatalf("heal info: %+v %v", hi, err)
	}
}
