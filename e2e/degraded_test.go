package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With a brick of a distribute volume down, `ls` of a directory shows the
// files the other bricks hold, then reports the error (exit status 2,
// "Transport endpoint is not connected") rather than failing outright or
// looking complete; once the brick is back, everything is listed.
func TestListingWithBrickDown(t *testing.T) {
	n := startNode(t)
	bricks := n.volume("dg", 3)
	mnt := n.mount("dg")
	dir := filepath.Join(mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const files = 30
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	onDead := 0
	for i := range files {
		if _, err := os.Stat(filepath.Join(bricks[2], "d", fmt.Sprintf("f%02d", i))); err == nil {
			onDead++
		}
	}
	if onDead == 0 || onDead == files {
		t.Fatalf("%d of %d files on the brick to kill: want some, not all", onDead, files)
	}
	n.killBrick("dg", bricks[2])
	waitFor(t, "the mount to see the brick down", 10*time.Second, func() bool {
		return n.mountsSee("dg", []string{"127.0.0.1:" + bricks[2]}, false)
	})

	cmd := exec.Command("ls", "-1", dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("ls with a brick down: %v, stderr %q; want exit status 2", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Transport endpoint is not connected") {
		t.Errorf("ls stderr %q: want it to say the transport endpoint is not connected", stderr.String())
	}
	if got := len(strings.Fields(string(out))); got != files-onDead {
		t.Errorf("ls with a brick down listed %d names, want the %d on the bricks up", got, files-onDead)
	}

	n.must("volume", "start", "dg", "force")
	waitFor(t, "the mount to reconnect to the restarted brick", 15*time.Second, func() bool {
		return n.mountsSee("dg", []string{"127.0.0.1:" + bricks[2]}, true)
	})
	names, err := os.ReadDir(dir)
	if err != nil || len(names) != files {
		t.Fatalf("after the restart: %d names, %v; want %d", len(names), err, files)
	}
}
