package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A client killed (SIGKILL of `mortar mount`) in the middle of a big
// write to a replica 3 volume may have sent its last write to some bricks
// and not others, and marked nothing. The bricks see its connections end
// with the file written and mark it Dirty: heal info lists it at once;
// once quiet the healer makes the copies equal. Through a new mount the
// file then reads whole: each 1 MiB block the client's or zeros (the file
// was new), at least the third of it written before the kill.
func TestReplicaClientKilledMidWrite(t *testing.T) {
	n := startNode(t)
	bricks := n.replicaVolume("rk", 3, 3, false)
	mnt := n.mount("rk", "attr-timeout=0", "entry-timeout=0")
	const size = 96 << 20
	tmp := t.TempDir()
	src := randomFile(t, tmp, "src", size, 12)
	killClientDuringDD(t, mnt, filepath.Join(tmp, "src"), func() bool {
		fi, err := os.Stat(filepath.Join(bricks[0], "f"))
		return err == nil && fi.Size() >= size/3
	})

	// The bricks marked the file: heal info lists it before it is quiet.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := n.mortar("volume", "heal", "rk", "info")
		if err == nil && pendingEntries(out) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no brick marked the file the killed client was writing:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.waitHealed("rk", bricks, 3, false, 2*time.Minute)
	mnt = n.mount("rk")
	got, err := os.ReadFile(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < size/3 || len(got) > size {
		t.Fatalf("%d bytes after heal (the client wrote at least a third of %d)", len(got), size)
	}
	zero := make([]byte, 1<<20)
	for off := 0; off < len(got); off += 1 << 20 {
		end := min(off+1<<20, len(got))
		if !bytes.Equal(got[off:end], src[off:end]) && !bytes.Equal(got[off:end], zero[:end-off]) {
			t.Fatalf("block at %d is neither the client's nor zeros", off)
		}
	}
}

// killClientDuringDD copies src to mnt/f with dd (1 MiB O_DIRECT writes),
// kills the mount's process with SIGKILL once grown says enough reached
// the bricks, checks that dd failed, and unmounts what is left.
func killClientDuringDD(t *testing.T, mnt, src string, grown func() bool) {
	t.Helper()
	dd := exec.Command("dd", "if="+src, "of="+filepath.Join(mnt, "f"), "bs=1M", "oflag=direct")
	var ddOut bytes.Buffer
	dd.Stdout, dd.Stderr = &ddOut, &ddOut
	if err := dd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !grown() {
		if time.Now().After(deadline) {
			t.Fatalf("the file did not grow on the bricks in a minute: %s", ddOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(mountPID(t, mnt), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := dd.Wait(); err == nil {
		t.Fatalf("dd finished although its client was killed: %s", ddOut.String())
	}
	exec.Command("umount", "-l", mnt).Run()
}

// A client killed (SIGKILL of `mortar mount`) in the middle of changes of
// names: a loop creates, renames and removes files in one directory. The
// bricks mark the directory its connections changed last (no goodbye
// came), heal info lists it, and heal leaves the bricks with the same
// names, whatever operation the kill cut in two; on a replica 3 and on a
// disperse 4 + 2 volume.
func TestReplicaClientKilledMidNames(t *testing.T) {
	n := startNode(t)
	bricks := n.replicaVolume("rn", 3, 3, false)
	killClientDuringNames(t, n, "rn", bricks[0])
	n.waitHealed("rn", bricks, 3, false, 2*time.Minute)
}

func TestDisperseClientKilledMidNames(t *testing.T) {
	n, bricks, mnt := startDisperse(t, "dn")
	exec.Command("umount", "-l", mnt).Run()
	killClientDuringNames(t, n, "dn", bricks[0])
	n.waitDisperseHealed("dn", bricks, 6, 2*time.Minute)
}

// killClientDuringNames mounts vol, runs the loop in its directory d until
// brick (one of vol's) has 200 of its files, kills the mount with SIGKILL
// and waits for heal info to list d.
func killClientDuringNames(t *testing.T, n *node, vol, brick string) {
	t.Helper()
	mnt := n.mount(vol, "attr-timeout=0", "entry-timeout=0")
	sh(t, mnt, "mkdir d")
	loop := exec.Command("sh", "-c", `i=0; while :; do i=$((i+1)); echo x > d/f$i && mv d/f$i d/g$i && rm -f d/g$((i-2)) || exit 1; done`)
	loop.Dir = mnt
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(brick, "d", "g200")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			loop.Process.Kill()
			t.Fatal("the loop did not reach 200 files on the bricks in a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(mountPID(t, mnt), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := loop.Wait(); err == nil {
		t.Fatal("the loop went on although its client was killed")
	}
	exec.Command("umount", "-l", mnt).Run()
	deadline = time.Now().Add(10 * time.Second)
	for {
		out, err := n.mortar("volume", "heal", vol, "info")
		if err == nil && strings.Contains(out, "/d") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no brick marked the directory the killed client was changing:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
