package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/fusebridge/posixtest"
)

// waitFor polls cond until it holds or the deadline passes; used where the
// thing awaited (a cache expiring, a process noticing a peer) has no event
// a test can subscribe to.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// Two mounts of one volume see each other's changes within the cache
// timeout, and locks taken through one hold against the other.
func TestTwoMounts(t *testing.T) {
	n := startNode(t)
	n.volume("two", 3)
	a := n.mount("two", "attr-timeout=1,entry-timeout=1")
	b := n.mount("two", "attr-timeout=1,entry-timeout=1")

	if err := os.WriteFile(filepath.Join(a, "note"), []byte("from a"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b sees a's new file", 3*time.Second, func() bool {
		got, err := os.ReadFile(filepath.Join(b, "note"))
		return err == nil && string(got) == "from a"
	})
	if err := os.WriteFile(filepath.Join(b, "note"), []byte("from b, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a sees b's rewrite", 3*time.Second, func() bool {
		got, err := os.ReadFile(filepath.Join(a, "note"))
		return err == nil && string(got) == "from b, longer"
	})
	if err := os.Rename(filepath.Join(a, "note"), filepath.Join(a, "renamed")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b sees a's rename", 3*time.Second, func() bool {
		_, errOld := os.Stat(filepath.Join(b, "note"))
		_, errNew := os.Stat(filepath.Join(b, "renamed"))
		return errors.Is(errOld, os.ErrNotExist) && errNew == nil
	})

	// A POSIX write lock held by a process on mount a blocks the range for
	// a process on mount b, and frees it when the holder lets go.
	lockA := filepath.Join(a, "renamed")
	lockB := filepath.Join(b, "renamed")
	res, release := posixtest.HoldInOtherProcess(t, posixtest.LockRequest{Path: lockA, Op: "setlk", Type: syscall.F_WRLCK, Start: 0, Len: 10})
	if res.Errno != 0 {
		t.Fatalf("lock through mount a: %v", res.Errno)
	}
	if got := posixtest.OtherProcess(t, posixtest.LockRequest{Path: lockB, Op: "setlk", Type: syscall.F_WRLCK, Start: 5, Len: 1}); got.Errno != syscall.EAGAIN && got.Errno != syscall.EACCES {
		t.Fatalf("conflicting lock through mount b: errno %v, want EAGAIN", got.Errno)
	}
	if got := posixtest.OtherProcess(t, posixtest.LockRequest{Path: lockB, Op: "setlk", Type: syscall.F_WRLCK, Start: 20, Len: 1}); got.Errno != 0 {
		t.Fatalf("non-overlapping lock through mount b: %v", got.Errno)
	}
	release()
	if got := posixtest.OtherProcess(t, posixtest.LockRequest{Path: lockB, Op: "setlk", Type: syscall.F_WRLCK, Start: 5, Len: 1}); got.Errno != 0 {
		t.Fatalf("lock through mount b after a released it: %v", got.Errno)
	}

	res, release = posixtest.HoldInOtherProcess(t, posixtest.LockRequest{Path: lockA, Op: "flock", How: syscall.LOCK_EX | syscall.LOCK_NB})
	if res.Errno != 0 {
		t.Fatalf("flock through mount a: %v", res.Errno)
	}
	if got := posixtest.OtherProcess(t, posixtest.LockRequest{Path: lockB, Op: "flock", How: syscall.LOCK_EX | syscall.LOCK_NB}); got.Errno != syscall.EWOULDBLOCK {
		t.Fatalf("flock through mount b while a holds it: %v", got.Errno)
	}
	release()
}

// A brick server that dies makes operations fail promptly with an error,
// and the same mount works again when the server is back.
func TestServerDiesAndReturns(t *testing.T) {
	n := startNode(t)
	n.volume("crash", 2)
	mnt := n.mount("crash", "attr-timeout=0,entry-timeout=0")
	file := filepath.Join(mnt, "kept")
	if err := os.WriteFile(file, []byte("before the crash"), 0o644); err != nil {
		t.Fatal(err)
	}

	n.kill()
	took := waitFor(t, "an operation fails once the server is dead", 15*time.Second, func() bool {
		_, err := os.Stat(file)
		if err == nil {
			return false
		}
		if !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.EIO) {
			t.Fatalf("stat on a dead brick: %v, want ENOTCONN or EIO", err)
		}
		return true
	})
	t.Logf("failure seen %s after the kill", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("dead server noticed after %s", took)
	}

	n.start()
	took = waitFor(t, "the mount works again after the server returns", 20*time.Second, func() bool {
		got, err := os.ReadFile(file)
		return err == nil && string(got) == "before the crash"
	})
	t.Logf("mount recovered %s after the server came back", took.Round(time.Millisecond))
	if err := os.WriteFile(filepath.Join(mnt, "after"), []byte("x"), 0o644); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
}

// umount from outside ends the background mount process.
func TestUmountEndsMountProcess(t *testing.T) {
	n := startNode(t)
	n.volume("um", 1)
	mnt := n.mount("um")
	pid := mountPID(t, mnt)
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	waitFor(t, "mount process exits after umount", 10*time.Second, func() bool {
		return syscall.Kill(pid, 0) != nil
	})
}

// mountPID finds the background `mortar mount` process serving mnt.
func mountPID(t *testing.T, mnt string) int {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if len(args) > 2 && args[0] == mortarBin && args[1] == "mount" && args[len(args)-1] == mnt {
			var pid int
			if _, err := fmtSscan(filepath.Base(filepath.Dir(d)), &pid); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no mount process for %s", mnt)
	return 0
}

// The README's "run it" command: mortar dev brings up a mounted volume and
// takes it all down on Ctrl-C.
func TestDevCommand(t *testing.T) {
	data := t.TempDir()
	mnt := filepath.Join(data, "mnt")
	cmd := exec.Command(mortarBin, "dev", "--data", data, "--listen", freeAddr(t), "--bricks", "3")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		unmount(t, mnt)
	})
	waitFor(t, "mortar dev mounts its volume", 30*time.Second, func() bool { return isMounted(mnt) })
	sh(t, mnt, "echo hello > hello && mkdir d && cp hello d/copy && cat d/copy")
	n := 0
	for i := 1; i <= 3; i++ {
		entries, _ := os.ReadDir(filepath.Join(data, "bricks", "b"+string(rune('0'+i))))
		n += len(entries)
	}
	if n == 0 {
		t.Errorf("no files on the bricks under %s/bricks", data)
	}
	cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("mortar dev exited with %v\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("mortar dev did not exit on Ctrl-C\n%s", out.String())
	}
	if isMounted(mnt) {
		t.Error("mortar dev left its mount behind")
	}
	if !strings.Contains(out.String(), mnt) {
		t.Errorf("mortar dev did not say where it mounted:\n%s", out.String())
	}
}
