package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
)

// status runs `mortar volume status NAME --json`.
func (n *node) status(vol string) api.VolumeStatus {
	n.t.Helper()
	var st api.VolumeStatus
	out := n.must("volume", "status", vol, "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		n.t.Fatalf("volume status --json: %v\n%s", err, out)
	}
	return st
}

// brickDirs makes n brick directories named after vol.
func (n *node) brickDirs(vol string, count int) []string {
	n.t.Helper()
	var out []string
	for i := 1; i <= count; i++ {
		b := filepath.Join(n.data, vol+"-b"+strconv.Itoa(i))
		if err := os.MkdirAll(b, 0o755); err != nil {
			n.t.Fatal(err)
		}
		out = append(out, "127.0.0.1:"+b)
	}
	return out
}

// procArgs returns the command line of process pid, or nil if it is gone
// (a zombie counts as gone: it no longer runs, whoever reaps it).
func procArgs(pid int) []string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
		return nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil
	}
	return strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
}

// checkBrickProcesses checks that every brick of st is online in a
// `mortar brick` process of its own, and returns their ports and pids.
func checkBrickProcesses(t *testing.T, st api.VolumeStatus) (ports, pids []int) {
	t.Helper()
	for _, b := range st.Bricks {
		args := procArgs(b.PID)
		if !b.Online || b.Port == 0 || len(args) < 2 || args[0] != mortarBin || args[1] != "brick" || !strings.Contains(strings.Join(args, " "), "--path "+b.Path) {
			t.Fatalf("brick %s: %+v, process %d runs %q", b.Name(), b, b.PID, args)
		}
		ports, pids = append(ports, b.Port), append(pids, b.PID)
	}
	return ports, pids
}

// A replicated volume runs one process per brick, as GlusterFS runs
// glusterfsd: a brick killed with SIGKILL shows offline with its exit
// status, stays down, and comes back on its port with "start force"; a
// server killed with SIGKILL takes its brick processes with it and starts
// them again, on the same ports, when it restarts.
func TestReplicaBrickProcesses(t *testing.T) {
	n := startNode(t)
	n.must(append(append([]string{"volume", "create", "gv0", "replica", "3"}, n.brickDirs("gv0", 3)...), "force")...)
	n.must("volume", "start", "gv0")
	info := n.must("volume", "info", "gv0")
	for _, w := range []string{"Type: Replicate\n", "Number of Bricks: 1 x 3 = 3\n"} {
		if !strings.Contains(info, w) {
			t.Errorf("volume info lacks %q:\n%s", w, info)
		}
	}
	ports, pids := checkBrickProcesses(t, n.status("gv0"))

	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var dead api.BrickStatus
	waitFor(t, "the killed brick shows offline", 10*time.Second, func() bool {
		dead = n.status("gv0").Bricks[1]
		return !dead.Online
	})
	if !strings.Contains(dead.Error, "signal: killed") || dead.PID != 0 || dead.Port != ports[1] {
		t.Fatalf("killed brick in status: %+v", dead)
	}
	if table := n.must("volume", "status", "gv0"); !strings.Contains(table, "signal: killed") {
		t.Errorf("volume status does not say why the brick is offline:\n%s", table)
	}
	time.Sleep(300 * time.Millisecond) // long enough for a restart, if there were one
	if st := n.status("gv0"); st.Bricks[1].Online {
		t.Fatalf("a dead brick came back by itself: %+v", st.Bricks[1])
	}
	n.must("volume", "start", "gv0", "force")
	again, againPids := checkBrickProcesses(t, n.status("gv0"))
	if again[1] != ports[1] || againPids[1] == pids[1] || againPids[0] != pids[0] {
		t.Fatalf("after start force: ports %v pids %v; before %v %v", again, againPids, ports, pids)
	}

	// An arbiter volume: its arbiter bricks run as arbiters.
	n.must(append(append([]string{"volume", "create", "arb", "replica", "3", "arbiter", "1"}, n.brickDirs("arb", 3)...), "force")...)
	n.must("volume", "start", "arb")
	if info := n.must("volume", "info", "arb"); !strings.Contains(info, "Number of Bricks: 1 x (2 + 1) = 3\n") || !strings.Contains(info, "arb-b3 (arbiter)\n") {
		t.Errorf("arbiter volume info:\n%s", info)
	}
	_, arbPids := checkBrickProcesses(t, n.status("arb"))
	if args := strings.Join(procArgs(arbPids[2]), " "); !strings.Contains(args, "--arbiter") {
		t.Errorf("arbiter brick runs %q", args)
	}

	all := append(append([]int(nil), againPids...), arbPids...)
	n.kill()
	waitFor(t, "brick processes die with the server", 10*time.Second, func() bool {
		for _, pid := range all {
			if procArgs(pid) != nil {
				return false
			}
		}
		return true
	})
	n.start()
	restarted, _ := checkBrickProcesses(t, n.status("gv0"))
	if !slices.Equal(restarted, ports) {
		t.Fatalf("ports after a server restart: %v, before %v", restarted, ports)
	}
	_, arbPids = checkBrickProcesses(t, n.status("arb"))

	n.must("volume", "stop", "arb")
	st := n.status("arb")
	for i, b := range st.Bricks {
		if b.Online || procArgs(arbPids[i]) != nil {
			t.Errorf("brick of a stopped volume: %+v", b)
		}
	}
}
