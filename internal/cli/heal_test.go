package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
)

func TestParseHealArgs(t *testing.T) {
	cases := []struct {
		args []string
		want healArgs
	}{
		{[]string{"gv0"}, healArgs{name: "gv0", op: healIndex}},
		{[]string{"gv0", "full"}, healArgs{name: "gv0", op: healFull}},
		{[]string{"gv0", "info"}, healArgs{name: "gv0", op: healInfo}},
		{[]string{"gv0", "info", "split-brain"}, healArgs{name: "gv0", op: healInfoSplit}},
		{[]string{"gv0", "wait"}, healArgs{name: "gv0", op: healWait}},
		{[]string{"gv0", "split-brain", "latest-mtime", "/a/f"}, healArgs{name: "gv0", op: healResolve, req: api.SplitBrainRequest{Policy: "latest-mtime", Path: "/a/f"}}},
		{[]string{"gv0", "split-brain", "bigger-file", "/f"}, healArgs{name: "gv0", op: healResolve, req: api.SplitBrainRequest{Policy: "bigger-file", Path: "/f"}}},
		{[]string{"gv0", "split-brain", "source-brick", "h:/b2"}, healArgs{name: "gv0", op: healResolve, req: api.SplitBrainRequest{Policy: "source-brick", Source: "h:/b2"}}},
		{[]string{"gv0", "split-brain", "source-brick", "h:/b2", "/f"}, healArgs{name: "gv0", op: healResolve, req: api.SplitBrainRequest{Policy: "source-brick", Source: "h:/b2", Path: "/f"}}},
	}
	for _, c := range cases {
		if got, err := parseHealArgs(c.args); err != nil || got != c.want {
			t.Errorf("parseHealArgs(%q) = %+v, %v; want %+v", c.args, got, err, c.want)
		}
	}
	bad := map[string][]string{
		"unknown heal command \"statistics\"":         {"gv0", "statistics"},
		"unexpected argument \"now\" after full":      {"gv0", "full", "now"},
		"unexpected argument \"now\" after wait":      {"gv0", "wait", "now"},
		"unknown heal info \"summary\"":               {"gv0", "info", "summary"},
		"split-brain needs a policy":                  {"gv0", "split-brain"},
		"latest-mtime takes the PATH of one file":     {"gv0", "split-brain", "latest-mtime"},
		"bigger-file takes the PATH of one file":      {"gv0", "split-brain", "bigger-file", "/a", "/b"},
		"source-brick takes HOST:/BRICK":              {"gv0", "split-brain", "source-brick"},
		"\"/f\" is not a brick; write it HOST:/BRICK": {"gv0", "split-brain", "source-brick", "/f"},
		"unknown split-brain policy \"newest\"":       {"gv0", "split-brain", "newest", "/f"},
	}
	for msg, args := range bad {
		_, err := parseHealArgs(args)
		if err == nil || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), "usage: mortar volume heal NAME") {
			t.Errorf("parseHealArgs(%q) = %v; want an error with %q and the usage", args, err, msg)
		}
	}
}

func TestPrintHealInfo(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 10, 0, time.Local)
	hi := api.HealInfo{
		Name: "gv0",
		Bricks: []api.HealBrick{
			{Name: "h:/b1", Online: true, Entries: 2, Paths: []string{"/dir", "/dir/file"}},
			{Name: "h:/b2"},
			{Name: "h:/b3", Online: true, Entries: 1002, Paths: []string{"/x", "<gfid:0000>"}},
			{Name: "h:/b4", Online: true, Error: "heal index unreadable"},
		},
		Healed: 7, Failed: 1, InProgress: 2, SplitBrain: 3,
		HealedBytes: 3 << 20, Since: now.Add(-2 * time.Second),
		LastScan: now.Add(-1500 * time.Millisecond),
		Full:     &api.FullHeal{Running: true, Started: time.Date(2025, 3, 1, 11, 59, 0, 0, time.Local), Looked: 42},
	}
	var b bytes.Buffer
	printHealInfo(&b, hi, now)
	want := `Brick h:/b1
Status: Connected
Number of entries: 2
/dir
/dir/file

Brick h:/b2
Status: Transport endpoint is not connected
Number of entries: -

Brick h:/b3
Status: Connected
Number of entries: 1002
/x
<gfid:0000>
... and 1000 more

Brick h:/b4
Status: heal index unreadable
Number of entries: -

Healed: 7, failed: 1, in progress: 2, in split-brain: 3
Data healed: 3.0MiB since 12:00:08 (1.5MiB/s)
Last index scan: 1.5s ago
Full heal: running since 11:59:00, 42 inodes looked at
Safe to take a brick down: no: brick h:/b1 has 2 entries to heal; brick h:/b2 is not connected; brick h:/b3 has 1002 entries to heal; brick h:/b4 cannot be asked: heal index unreadable; 2 entries are being healed; 3 files are in split-brain; a full heal is running
`
	if b.String() != want {
		t.Errorf("heal info:\n%s\nwant:\n%s", b.String(), want)
	}
	hi.Bricks, hi.LastScan = nil, time.Time{}
	hi.Full = &api.FullHeal{Started: now.Add(-90 * time.Second), Finished: now.Add(-2 * time.Second), Looked: 9}
	b.Reset()
	printHealInfo(&b, hi, now)
	if want := "Full heal: finished at 12:00:08, took 1m28s, 9 inodes looked at\nSafe to take a brick down: no: 2 entries are being healed; 3 files are in split-brain; no brick\n"; !strings.HasSuffix(b.String(), want) || strings.Contains(b.String(), "Last index scan") {
		t.Errorf("heal info with a finished full heal:\n%s\nwant it to end with %q", b.String(), want)
	}
	hi.Full.Error = "/a: split-brain"
	b.Reset()
	printHealInfo(&b, hi, now)
	if want := "Full heal: finished at 12:00:08 with errors: /a: split-brain\n"; !strings.Contains(b.String(), want) {
		t.Errorf("heal info with a failed full heal:\n%s", b.String())
	}
	hi = api.HealInfo{Bricks: []api.HealBrick{{Name: "h:/b1", Online: true}, {Name: "h:/b2", Online: true, Entries: 1}}}
	b.Reset()
	printHealInfo(&b, hi, now)
	if want := "Safe to take a brick down: no: brick h:/b2 has 1 entry to heal\n"; !strings.HasSuffix(b.String(), want) {
		t.Errorf("heal info with one entry:\n%s\nwant it to end with %q", b.String(), want)
	}
	hi.Bricks[1].Entries = 0
	b.Reset()
	printHealInfo(&b, hi, now)
	if want := "Safe to take a brick down: yes\n"; !strings.HasSuffix(b.String(), want) {
		t.Errorf("heal info with nothing to heal:\n%s\nwant it to end with %q", b.String(), want)
	}
}

// The heal commands against a node: a replica 3 volume, a distribute
// volume that has nothing to heal, and reset-brick's refusals.
func TestHealCommands(t *testing.T) {
	_, srv := startNode(t)
	root := t.TempDir()
	create := []string{"volume", "create", "rv", "replica", "3"}
	for i := 1; i <= 4; i++ {
		os.Mkdir(filepath.Join(root, "b"+strconv.Itoa(i)), 0o755)
	}
	for i := 1; i <= 3; i++ {
		create = append(create, "localhost:"+filepath.Join(root, "b"+strconv.Itoa(i)))
	}
	os.WriteFile(filepath.Join(root, "b1", "old-file"), []byte("x"), 0o644)
	create = append(create, "force") // b1 holds a file; all are on the root file system
	steps := []cliStep{
		{create, []string{"success"}, false},
		{[]string{"volume", "create", "dv", "localhost:" + root + "/b4", "force"}, []string{"success"}, false},
		{[]string{"volume", "heal", "rv"}, []string{"volume heal: rv: failed: volume rv is not started (mortar volume start rv)"}, true},
		{[]string{"volume", "start", "rv"}, []string{"success"}, false},
		{[]string{"volume", "start", "dv"}, []string{"success"}, false},
		{[]string{"volume", "heal", "rv"}, []string{"Launching heal operation to perform index self heal on volume rv has been successful\nUse heal info commands to check status.\n"}, false},
		{[]string{"volume", "heal", "rv", "info"}, []string{
			"Brick localhost:" + root + "/b1\nStatus: Connected\nNumber of entries: 0\n\nBrick localhost:" + root + "/b2\n",
			"Healed: 0, failed: 0, in progress: 0, in split-brain: 0\n",
		}, false},
		{[]string{"volume", "heal", "rv", "full"}, []string{"Launching heal operation to perform full self heal on volume rv has been successful\n"}, false},
		{[]string{"volume", "heal", "rv", "info", "--json"}, []string{`"name": "rv"`, `"online": true`, `"full": {`}, false},
		{[]string{"volume", "heal", "rv", "info", "split-brain"}, []string{"Brick localhost:" + root + "/b3\nStatus: Connected\nNumber of entries in split-brain: 0\n"}, false},
		{[]string{"volume", "heal", "rv", "info", "split-brain", "--json"}, []string{`"entries": []`}, false},
		{[]string{"volume", "heal", "rv", "full", "--json"}, []string{"--json goes with info"}, true},
		{[]string{"volume", "heal", "rv", "split-brain", "latest-mtime", "/nothing"}, []string{"volume heal: rv: failed: /nothing is not in split-brain in volume rv"}, true},
		{[]string{"volume", "heal", "rv", "split-brain", "source-brick", "localhost:/elsewhere"}, []string{"localhost:/elsewhere is not a brick of volume rv"}, true},
		{[]string{"volume", "heal", "dv", "info"}, []string{"volume heal: dv: failed: volume dv is neither replicated nor dispersed: nothing to heal"}, true},
		{[]string{"volume", "heal"}, []string{"usage: mortar volume heal NAME"}, true},
		{[]string{"volume", "reset-brick", "rv", "localhost:" + root + "/b1"}, []string{"volume reset-brick: rv: failed: brick directory " + root + "/b1 is not empty (it holds \"old-file\")"}, true},
		{[]string{"volume", "reset-brick", "dv", "localhost:" + root + "/b4"}, []string{"volume dv is neither replicated nor dispersed"}, true},
		{[]string{"volume", "reset-brick", "rv"}, []string{"usage: mortar volume reset-brick NAME HOST:/BRICK"}, true},
	}
	for i := range steps {
		steps[i].args = append(steps[i].args, srv)
	}
	runSteps(t, steps)
	out, err := run(t, "volume", "heal", "rv", "info", "--json", srv)
	var hi api.HealInfo
	if err != nil || json.Unmarshal([]byte(out), &hi) != nil || len(hi.Bricks) != 3 {
		t.Fatalf("heal info --json: %v\n%s", err, out)
	}
}
