package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Write-behind on a real mount: small writes are acknowledged before the
// brick has them, and when the brick dies before they are sent, the close
// returns the error.
func TestWriteBehindErrorAtClose(t *testing.T) {
	n := startNode(t)
	// Windows wait at most a minute here: none goes by itself before the
	// brick dies, however slow the machine.
	bricks := n.createVolume("wb", 1, nil, []string{"performance.write-behind-max-age", "60"})
	mnt := n.mount("wb")
	// Found before the file is open: a fork and exec while it is open
	// (as running a command is) closes a copy of its descriptor, and the
	// kernel's flush of that close sends the writes.
	pid := n.brickPID("wb", bricks[0])
	f, err := os.Create(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := f.WriteAt(bytes.Repeat([]byte{'x'}, 4096), int64(i*4096)); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := os.Stat(filepath.Join(bricks[0], "f")); err != nil || st.Size() != 0 {
		t.Fatalf("the brick's file before the close: %v, %v; want it empty (the writes wait)", st, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("brick process %d alive 10 s after SIGKILL", pid)
		}
	}
	err = f.Close()
	if !isAny(err, syscall.ENOTCONN, syscall.EIO) {
		t.Fatalf("close with the brick dead and 40 KiB unsent: %v, want ENOTCONN or EIO", err)
	}
}

// What fsync acknowledged is on the bricks: a mount killed right after
// loses none of it.
func TestWriteBehindFsyncSurvivesClientKill(t *testing.T) {
	n := startNode(t)
	n.volume("wk", 1)
	mnt := n.mount("wk")
	want := bytes.Repeat([]byte("fsynced "), 1000)
	f, err := os.Create(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(want); off += 1000 {
		if _, err := f.WriteAt(want[off:off+1000], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	killMount(t, mnt)
	f.Close() // the mount is gone: its error does not matter
	again := n.mount("wk")
	got, err := os.ReadFile(filepath.Join(again, "f"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the client died: %d bytes, %v; want the %d fsynced", len(got), err, len(want))
	}
}

// killMount kills the process serving mnt (SIGKILL) and unmounts it.
func killMount(t *testing.T, mnt string) {
	t.Helper()
	out, err := exec.Command("pgrep", "-f", "mortar mount .* "+mnt+"$").Output()
	if err != nil {
		t.Fatalf("no mount process for %s: %v", mnt, err)
	}
	for _, s := range strings.Fields(string(out)) {
		pid, _ := strconv.Atoi(s)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(mnt); err != nil || time.Now().After(deadline) {
			break // the mount answers ENOTCONN once its server is gone
		}
		time.Sleep(10 * time.Millisecond)
	}
	exec.Command("umount", "-l", mnt).Run()
}
