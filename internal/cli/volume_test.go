package cli

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt"
	"github.com/mortarfs/mortar/mgmt/api"
)

// run executes the mortar command line and returns its output and error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// startNode runs a node (bricks in-process) and returns it with the
// --server flag that reaches it.
func startNode(t *testing.T) (*mgmt.Node, string) {
	t.Helper()
	n, err := mgmt.Start(mgmt.Config{
		DataDir: t.TempDir(),
		Listen:  "127.0.0.1:0",
		Logger:  slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, "--server=" + n.ListenAddr()
}

func TestVolumeCommands(t *testing.T) {
	_, srv := startNode(t)
	b1, b2 := filepath.Join(t.TempDir(), "b1"), filepath.Join(t.TempDir(), "b2")
	os.Mkdir(b1, 0o755)
	os.Mkdir(b2, 0o755)

	steps := []cliStep{
		{[]string{"volume", "list", srv}, []string{"No volumes present"}, false},
		{[]string{"volume", "create", "gv0", "localhost:" + b1, "127.0.0.1:" + b2, "force", srv}, []string{"volume create: gv0: success: please start the volume"}, false},
		{[]string{"volume", "create", "gv1", "replica", "3", "localhost:" + b1, srv}, []string{"volume create: gv1: failed: replica sets of 3 need a multiple of 3 bricks, not 1"}, true},
		{[]string{"volume", "create", "gv1", "disperse", "3", "localhost:" + b1, srv}, []string{"volume create: gv1: failed: 1 bricks do not make disperse sets of 3"}, true},
		{[]string{"volume", "start", "gv0", srv}, []string{"volume start: gv0: success"}, false},
		{[]string{"volume", "set", "gv0", "performance.attr-timeout", "3", srv}, []string{"volume set: success"}, false},
		{[]string{"volume", "set", "gv0", "nonsense", "3", srv}, []string{"known options: auth.allow, auth.reject, cluster.favorite-child-policy", "network.ping-timeout"}, true},
		{[]string{"volume", "info", "gv0", srv}, []string{
			"Volume Name: gv0\n", "Type: Distribute\n", "Status: Started\n", "Number of Bricks: 2\n",
			"Bricks:\nBrick1: localhost:" + b1 + "\nBrick2: 127.0.0.1:" + b2 + "\n",
			"Bricks:\nBrick1: localhost:" + b1 + "\nBrick2: 127.0.0.1:" + b2 + "\n",
			"Options Reconfigured:\nperformance.attr-timeout: 3\n",
		}, false},
		{[]string{"volume", "status", srv}, []string{"Status of volume: gv0 (started)", "TCP Port  Online  Pid", "Brick localhost:" + b1, " Y "}, false},
		{[]string{"volume", "status", "gv0", "--json", srv}, []string{`"name": "gv0"`, `"online": true`, `"port": `}, false},
		{[]string{"volume", "info", "--json", srv}, []string{`[`, `"name": "gv0"`, `"type": "distribute"`}, false},
		{[]string{"volume", "list", srv}, []string{"gv0\n"}, false},
		{[]string{"volume", "delete", "gv0", srv}, []string{"volume delete: gv0: failed: volume gv0 is started; stop it first"}, true},
		{[]string{"volume", "stop", "gv0", srv}, []string{"volume stop: gv0: success"}, false},
		{[]string{"volume", "delete", "gv0", srv}, []string{"volume delete: gv0: success"}, false},
		{[]string{"volume", "info", "gv0", srv}, []string{"volume info: gv0: failed: volume gv0 does not exist"}, true},
		{[]string{"volume", "start", srv}, []string{"usage: mortar volume start NAME [force]"}, true},
		{[]string{"volume", "start", "gv0", "now", srv}, []string{"only \"force\" may follow"}, true},
	}
	runSteps(t, steps)
}

func TestServerUnreachable(t *testing.T) {
	_, err := run(t, "volume", "list", "--server", "127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "cannot reach mortar server at 127.0.0.1:1") {
		t.Fatalf("unreachable server: %v", err)
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil || !strings.HasPrefix(out, "mortar ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version: %q, %v", out, err)
	}
	info := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "7b2271d1c3e5"}, {Key: "vcs.time", Value: "2026-11-24T14:33:58Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		version string
		info    *debug.BuildInfo
		want    string
	}{
		{"dev", info, "mortar v1.2.3 rev 7b2271d1c3e5 2026-11-24T14:33:58Z modified, go"},
		{"1.0", info, "mortar 1.0 rev 7b2271d1c3e5"},
		{"dev", nil, "mortar dev (no revision: the build carries no VCS information), go"},
	} {
		if got := versionLine(c.version, c.info); !strings.HasPrefix(got, c.want) {
			t.Errorf("versionLine(%q) = %q, want it to start %q", c.version, got, c.want)
		}
	}
}

// TestUnknownSubcommands: a typo or an unknown subcommand, at any level,
// fails with a suggestion instead of printing help and succeeding.
func TestUnknownSubcommands(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"volme"}, `unknown command "volme" for "mortar"`},
		{[]string{"volume", "lst"}, "\tlist"},
		{[]string{"volume", "gte"}, `unknown command "gte" for "mortar volume"`},
		{[]string{"peer", "statu"}, "Did you mean this?\n\tstatus"},
		{[]string{"tls", "ca", "int"}, "Did you mean this?\n\tinit"},
		{[]string{"volume"}, "a subcommand is required"},
	} {
		if _, err := run(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mortar %s: %v, want an error with %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	if _, err := run(t, "volume", "--help"); err != nil {
		t.Errorf("volume --help: %v", err)
	}
}

// TestCreateOnRootFSNeedsForce: a brick directory on the root file system
// (a temp dir here) is refused without force, saying why and what to do;
// nothing is created; force takes it.
func TestCreateOnRootFSNeedsForce(t *testing.T) {
	_, srv := startNode(t)
	b1 := filepath.Join(t.TempDir(), "b1")
	os.Mkdir(b1, 0o755)
	var st, root syscall.Stat_t
	if syscall.Stat(b1, &st) != nil || syscall.Stat("/", &root) != nil || st.Dev != root.Dev {
		t.Skipf("%s is not on the root file system", b1)
	}
	steps := []cliStep{
		{[]string{"volume", "create", "gv0", "localhost:" + b1, srv}, []string{"volume create: gv0: failed: ", b1 + " is on the root file system: ", "use a directory on a disk or partition of its own, or force"}, true},
		{[]string{"volume", "list", srv}, []string{"No volumes present"}, false},
		{[]string{"volume", "create", "gv0", "localhost:" + b1, "force", srv}, []string{"volume create: gv0: success"}, false},
	}
	runSteps(t, steps)
}

// A replicated volume with an arbiter, through the CLI: info shows the
// sets and the arbiter, status the bricks and why one is offline.
func TestReplicatedVolumeCommands(t *testing.T) {
	n, srv := startNode(t)
	args := []string{"volume", "create", "rv", "replica", "2", "arbiter", "1"}
	root := t.TempDir()
	for i := 1; i <= 6; i++ {
		b := filepath.Join(root, "b"+strconv.Itoa(i))
		os.Mkdir(b, 0o755)
		args = append(args, "localhost:"+b)
	}
	if out, err := run(t, append(args, "force", srv)...); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	out, err := run(t, "volume", "info", "rv", srv)
	for _, w := range []string{"Type: Distributed-Replicate\n", "Number of Bricks: 2 x (2 + 1) = 6\n", "Brick3: localhost:" + root + "/b3 (arbiter)\n", "Brick4: localhost:" + root + "/b4\n"} {
		if err != nil || !strings.Contains(out, w) {
			t.Errorf("info lacks %q: %v\n%s", w, err, out)
		}
	}
	if out, err := run(t, "volume", "status", "rv", srv); err != nil || !strings.Contains(out, "N/A") {
		t.Errorf("status of a volume never started (ports N/A): %v\n%s", err, out)
	}
	if out, err := run(t, "volume", "start", "rv", srv); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	vi, err := api.NewClient(n.ListenAddr()).Info(t.Context(), "rv")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.KillBrick(vi.Bricks[4].ID); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "volume", "status", "rv", srv)
	if err != nil || !strings.Contains(out, "Brick localhost:"+root+"/b5 ") || !strings.Contains(out, "Brick localhost:"+root+"/b5: brick killed") {
		t.Errorf("status with a killed brick: %v\n%s", err, out)
	}
	if out, err := run(t, "volume", "start", "rv", "force", srv); err != nil || !strings.Contains(out, "volume start: rv: success") {
		t.Errorf("start force: %v\n%s", err, out)
	}
	if out, err := run(t, "volume", "status", "rv", srv); err != nil || strings.Contains(out, " N ") {
		t.Errorf("status after start force: %v\n%s", err, out)
	}
}

func TestTypeNameAndBrickCount(t *testing.T) {
	bricks := func(n int, arbiterEvery int) []api.BrickInfo {
		var out []api.BrickInfo
		for i := range n {
			out = append(out, api.BrickInfo{Arbiter: arbiterEvery > 0 && i%arbiterEvery == arbiterEvery-1})
		}
		return out
	}
	cases := []struct {
		vi          api.VolumeInfo
		typ, number string
	}{
		{api.VolumeInfo{Type: "distribute", Bricks: bricks(4, 0)}, "Distribute", "4"},
		{api.VolumeInfo{Type: "replicate", Replica: 3, Bricks: bricks(3, 0)}, "Replicate", "1 x 3 = 3"},
		{api.VolumeInfo{Type: "replicate", Replica: 3, Bricks: bricks(6, 0)}, "Distributed-Replicate", "2 x 3 = 6"},
		{api.VolumeInfo{Type: "replicate", Replica: 3, Bricks: bricks(3, 3)}, "Replicate", "1 x (2 + 1) = 3"},
		{api.VolumeInfo{Type: "replicate", Replica: 2, Bricks: bricks(4, 0)}, "Distributed-Replicate", "2 x 2 = 4"},
		{api.VolumeInfo{Type: "disperse", Disperse: 6, Redundancy: 2, Bricks: bricks(6, 0)}, "Disperse", "1 x (4 + 2) = 6"},
		{api.VolumeInfo{Type: "disperse", Disperse: 6, Redundancy: 2, Bricks: bricks(12, 0)}, "Distributed-Disperse", "2 x (4 + 2) = 12"},
		{api.VolumeInfo{Type: "disperse", Disperse: 3, Redundancy: 1, Bricks: bricks(3, 0)}, "Disperse", "1 x (2 + 1) = 3"},
	}
	for _, c := range cases {
		if got := typeName(c.vi); got != c.typ {
			t.Errorf("typeName(%+v) = %q, want %q", c.vi, got, c.typ)
		}
		if got := brickCount(c.vi); got != c.number {
			t.Errorf("brickCount(%+v) = %q, want %q", c.vi, got, c.number)
		}
	}
}

// A dispersed volume through the CLI: create (with the power-of-two
// warning on stderr), info, --json, status and heal info.
func TestDispersedVolumeCommands(t *testing.T) {
	_, srv := startNode(t)
	root := t.TempDir()
	brickArgs := func(first, n int) []string {
		var out []string
		for i := first; i < first+n; i++ {
			b := filepath.Join(root, "b"+strconv.Itoa(i))
			os.Mkdir(b, 0o755)
			out = append(out, "localhost:"+b)
		}
		return out
	}
	out, err := run(t, append(append([]string{"volume", "create", "ec", "disperse-data", "4", "redundancy", "2"}, brickArgs(1, 12)...), "force", srv)...)
	if err != nil || out != "volume create: ec: success: please start the volume to access data\n" {
		t.Fatalf("create: %v\n%s", err, out)
	}
	out, err = run(t, "volume", "info", "ec", srv)
	for _, w := range []string{"Type: Distributed-Disperse\n", "Number of Bricks: 2 x (4 + 2) = 12\n", "Brick12: localhost:" + root + "/b12\n"} {
		if err != nil || !strings.Contains(out, w) {
			t.Errorf("info lacks %q: %v\n%s", w, err, out)
		}
	}
	out, err = run(t, "volume", "info", "ec", "--json", srv)
	for _, w := range []string{`"type": "disperse"`, `"disperse": 6`, `"redundancy": 2`} {
		if err != nil || !strings.Contains(out, w) {
			t.Errorf("info --json lacks %q: %v\n%s", w, err, out)
		}
	}
	if strings.Contains(out, "warnings") {
		t.Errorf("info --json has warnings:\n%s", out)
	}
	// 5 data bricks: created, with a warning.
	out, err = run(t, append(append([]string{"volume", "create", "ec7", "disperse", "7", "redundancy", "2"}, brickArgs(13, 7)...), "force", srv)...)
	if err != nil || !strings.Contains(out, "volume create: ec7: warning: disperse 7 redundancy 2: 5 data bricks is not a power of two") ||
		!strings.Contains(out, "volume create: ec7: success") {
		t.Errorf("create 5+2: %v\n%s", err, out)
	}
	out, err = run(t, "volume", "info", "ec7", srv)
	if err != nil || !strings.Contains(out, "Type: Disperse\n") || !strings.Contains(out, "Number of Bricks: 1 x (5 + 2) = 7\n") {
		t.Errorf("info of ec7: %v\n%s", err, out)
	}
	// Impossible geometries keep their errors.
	_, err = run(t, append(append([]string{"volume", "create", "bad", "disperse", "4", "redundancy", "2"}, brickArgs(20, 4)...), srv)...)
	if err == nil || err.Error() != "volume create: bad: failed: disperse 4 redundancy 2: redundancy 2 is not below half of 4 bricks: use replica instead, or more bricks" {
		t.Errorf("create 2+2: %v", err)
	}
	if out, err := run(t, "volume", "start", "ec", srv); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	if out, err := run(t, "volume", "status", "ec", srv); err != nil || strings.Contains(out, " N ") || !strings.Contains(out, "Brick localhost:"+root+"/b12 ") {
		t.Errorf("status: %v\n%s", err, out)
	}
	// The heal daemon connects to the bricks after the start returns: its
	// connections are awaited (heal info says which are not connected).
	for deadline := time.Now().Add(15 * time.Second); ; {
		out, err = run(t, "volume", "heal", "ec", "info", srv)
		if err == nil && strings.Count(out, "Status: Connected\nNumber of entries: 0\n") == 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heal info 15 s after the start: %v\n%s", err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := run(t, "volume", "heal", "ec", "full", srv); err != nil || !strings.Contains(out, "full self heal on volume ec has been successful") {
		t.Errorf("heal full: %v\n%s", err, out)
	}
	if _, err := run(t, "volume", "set", "ec", "cluster.quorum-type", "none", srv); err == nil || !strings.Contains(err.Error(), "applies to replicated volumes only") {
		t.Errorf("quorum-type on a disperse volume: %v", err)
	}
}

// cliStep is one command of a CLI script test: its output (or error) must
// contain every want.
type cliStep struct {
	args    []string
	want    []string // substrings of the output, or of the error
	wantErr bool
}

// runSteps runs the commands in order.
func runSteps(t *testing.T, steps []cliStep) {
	t.Helper()
	for _, s := range steps {
		out, err := run(t, s.args...)
		if (err != nil) != s.wantErr {
			t.Fatalf("mortar %s: err %v, output:\n%s", strings.Join(s.args, " "), err, out)
		}
		if err != nil {
			out += err.Error()
		}
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				t.Errorf("mortar %s: output lacks %q:\n%s", strings.Join(s.args, " "), w, out)
			}
		}
	}
}

// TestVolumeGetReset: volume get shows every option's value and where it
// comes from; reset puts one or all back to the default, and refuses what
// set would (encryption after the first start).
func TestVolumeGetReset(t *testing.T) {
	_, srv := startNode(t)
	b1 := filepath.Join(t.TempDir(), "b1")
	os.Mkdir(b1, 0o755)
	steps := []cliStep{
		{[]string{"volume", "create", "gv0", "localhost:" + b1, "force", srv}, []string{"success"}, false},
		{[]string{"volume", "set", "gv0", "network.ping-timeout", "3", srv}, []string{"success"}, false},
		{[]string{"volume", "set", "gv0", "performance.attr-timeout", "7", srv}, []string{"success"}, false},
		{[]string{"volume", "set", "gv0", "encryption", "on", srv}, []string{"success"}, false},
		{[]string{"volume", "get", "gv0", "all", srv}, []string{"network.ping-timeout", "3", "set", "performance.entry-timeout", "default"}, false},
		{[]string{"volume", "get", "gv0", "network.ping-timeout", srv}, []string{"network.ping-timeout  3      set"}, false},
		{[]string{"volume", "get", "gv0", "ping-timeout", srv}, []string{`unknown option "ping-timeout"`, "did you mean network.ping-timeout?"}, true},
		{[]string{"volume", "get", "nope", "all", srv}, []string{"failed"}, true},
		{[]string{"volume", "reset", "gv0", "network.ping-timeout", srv}, []string{"volume reset: success"}, false},
		{[]string{"volume", "get", "gv0", "network.ping-timeout", srv}, []string{"network.ping-timeout  5      default"}, false},
		{[]string{"volume", "reset", "gv0", "nonsense", srv}, []string{"unknown option"}, true},
		{[]string{"volume", "start", "gv0", srv}, []string{"success"}, false},
		{[]string{"volume", "reset", "gv0", "encryption", srv}, []string{"before the volume's first start"}, true},
		{[]string{"volume", "reset", "gv0", srv}, []string{"before the volume's first start"}, true},
		{[]string{"volume", "get", "gv0", "performance.attr-timeout", srv}, []string{"7      set"}, false},
		{[]string{"volume", "stop", "gv0", srv}, []string{"success"}, false},
	}
	runSteps(t, steps)
}
