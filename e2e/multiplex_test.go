package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// onePID fails the test unless every brick of pids is served by one
// process other than the node's, and returns its pid.
func (n *node) onePID(pids map[string]int) int {
	n.t.Helper()
	pid := -1
	for path, p := range pids {
		switch {
		case p == 0:
			n.t.Fatalf("brick %s is offline: %v", path, pids)
		case pid >= 0 && p != pid:
			n.t.Fatalf("bricks served by more than one process: %v", pids)
		case p == n.cmd.Process.Pid:
			n.t.Fatalf("bricks served by the node's own process: %v", pids)
		}
		pid = p
	}
	return pid
}

// With --brick-multiplex every brick of the node, of every volume, is
// served by one brick host process; stopping a volume leaves the others'
// bricks serving in it; killing it takes every brick offline, and "volume
// start force" brings them back in a new host, with the data and the
// mount as they were.
func TestBrickMultiplex(t *testing.T) {
	n := &node{t: t, data: t.TempDir(), addr: freeAddr(t), multiplex: true}
	n.start()
	t.Cleanup(n.stop)
	n.replicaVolume("mx", 3, 3, false)
	n.volume("other", 2)
	host := n.onePID(n.brickPIDs("mx"))
	if got := n.onePID(n.brickPIDs("other")); got != host {
		t.Fatalf("volume other's bricks in process %d, mx's in %d: want one host", got, host)
	}
	mnt := n.mount("mx")
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}

	n.must("volume", "stop", "other")
	if got := n.onePID(n.brickPIDs("mx")); got != host {
		t.Fatalf("after stopping another volume, mx's bricks moved from process %d to %d", host, got)
	}

	if err := syscall.Kill(host, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every brick of mx offline after its host was killed", 10*time.Second, func() bool {
		for _, p := range n.brickPIDs("mx") {
			if p != 0 {
				return false
			}
		}
		return true
	})
	n.restartBricks("mx")
	if got := n.onePID(n.brickPIDs("mx")); got == host {
		t.Fatalf("bricks still in killed process %d", host)
	}
	b, err := os.ReadFile(filepath.Join(mnt, "f"))
	if err != nil || string(b) != "kept" {
		t.Fatalf("after the restart: %q, %v; want \"kept\"", b, err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "g"), []byte("new"), 0o644); err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
}

// With --keep-bricks (the default) the brick host outlives its server: a
// server killed with SIGKILL, or stopped, and started again takes the
// running bricks over — same process, same ports — and a mount writing
// all along sees no error.
func TestBricksOutliveServer(t *testing.T) {
	n := &node{t: t, data: t.TempDir(), addr: freeAddr(t), multiplex: true, keep: true}
	n.start()
	n.replicaVolume("keep", 3, 3, false)
	host := n.onePID(n.brickPIDs("keep"))
	t.Cleanup(func() {
		n.stop()
		syscall.Kill(host, syscall.SIGKILL) //nolint:errcheck // the test may have ended it
	})
	ports := n.brickAddrs("keep")
	mnt := n.mount("keep")

	stop := make(chan struct{})
	failed := make(chan error, 1)
	wrote := make(chan int, 1)
	go func() {
		i := 0
		defer func() { wrote <- i }()
		for ; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("f%d", i)), []byte("data"), 0o644); err != nil {
				failed <- fmt.Errorf("write %d: %w", i, err)
				return
			}
		}
	}()
	for _, how := range []string{"SIGKILL", "SIGTERM"} {
		if how == "SIGKILL" {
			n.kill()
		} else {
			n.stop()
		}
		n.start()
		if got := n.onePID(n.brickPIDs("keep")); got != host {
			t.Fatalf("after the server's %s and start, the bricks are in process %d, not %d", how, got, host)
		}
		if got := n.brickAddrs("keep"); !maps.Equal(got, ports) {
			t.Fatalf("after the server's %s and start, the bricks listen on %v, not %v", how, got, ports)
		}
	}
	close(stop)
	count := <-wrote
	select {
	case err := <-failed:
		t.Fatalf("the mount saw an error while the server restarted: %v", err)
	default:
	}
	if count == 0 {
		t.Fatal("nothing was written")
	}
	// The bricks are still the node's: a volume stop stops them.
	n.must("volume", "stop", "keep")
	for path, p := range n.brickPIDs("keep") {
		if p != 0 {
			t.Fatalf("brick %s still serving after volume stop", path)
		}
	}
}

// brickAddrs returns the port of every brick of vol, by path.
func (n *node) brickAddrs(vol string) map[string]int {
	n.t.Helper()
	ports := map[string]int{}
	for _, b := range n.brickStatus(vol) {
		ports[b.Path] = b.Port
	}
	return ports
}
