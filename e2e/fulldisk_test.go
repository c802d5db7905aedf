package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Full disks (issue 15's proof): a replica 3 and a disperse 2+1 volume,
// each on three small ext4 file systems on loop devices, the first smaller
// so that it fills before the others, filled by a small-file loop until the
// writer gets ENOSPC. Every file acknowledged reads back whole; nothing is
// left half made on a brick (every inode has its gfid); ls and rm work on
// the full volume; once space is freed, heal makes the bricks agree and
// the volume takes writes again. (GlusterFS fails this one: a file left on
// one brick without its gfid, rm answering ENOTCONN, heal not fixing it.)
func TestFullDisk(t *testing.T) {
	need(t, "losetup", "mkfs.ext4", "truncate")
	t.Run("replica", func(t *testing.T) {
		fullDisk(t, []string{"replica", "3"}, func(n *node, bricks []string, within time.Duration) {
			n.waitHealed("full", bricks, 3, false, within)
		})
	})
	t.Run("disperse", func(t *testing.T) {
		fullDisk(t, []string{"disperse", "3", "redundancy", "1"}, func(n *node, bricks []string, within time.Duration) {
			n.waitDisperseHealed("full", bricks, 3, within)
		})
	})
}

func fullDisk(t *testing.T, keywords []string, healed func(*node, []string, time.Duration)) {
	n := startNode(t)
	var bricks []string
	for i, mib := range []int{24, 32, 32} {
		bricks = append(bricks, loopBrick(t, n.data, i, mib))
	}
	args := append([]string{"volume", "create", "full"}, keywords...)
	for _, b := range bricks {
		args = append(args, "127.0.0.1:"+b)
	}
	n.must(append(args, "force")...)
	n.must("volume", "start", "full")
	mnt := n.mount("full")
	for d := 0; d < 8; d++ {
		if err := os.Mkdir(filepath.Join(mnt, fmt.Sprintf("d%d", d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	acked, failed, err := fillUp(mnt)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("after %d files, %s: %v; want ENOSPC", len(acked), failed, err)
	}
	if len(acked) < 100 {
		t.Fatalf("only %d files before the volume was full", len(acked))
	}
	if err := writeNumbered(filepath.Join(mnt, "d1", "more"), 1<<20); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a 1 MiB file on the full volume: %v; want ENOSPC", err)
	}
	checkAcked(t, acked, nil)
	checkGfids(t, bricks)
	sh(t, mnt, "ls -lR . >/dev/null")
	// The small brick filled first: the others hold marks for it.
	info := n.must("volume", "heal", "full", "info")
	pending := pendingEntries(info)
	t.Logf("full after %d files (%s: %v); %d entries to heal", len(acked), failed, err, pending)
	if pending == 0 {
		t.Fatalf("nothing pending with the first brick full:\n%s", info)
	}

	// Free space: the file that failed and half the directories.
	if err := os.Remove(failed); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("rm %s on the full volume: %v", failed, err)
	}
	os.Remove(filepath.Join(mnt, "d1", "more"))
	sh(t, mnt, "rm -rf d0 d2 d4 d6")
	healed(n, bricks, 2*time.Minute)
	checkGfids(t, bricks)
	checkAcked(t, acked, func(p string) bool {
		d := filepath.Base(filepath.Dir(p))
		return d == "d0" || d == "d2" || d == "d4" || d == "d6"
	})
	for i := 0; i < 50; i++ {
		if err := writeNumbered(filepath.Join(mnt, "d7", fmt.Sprintf("again%d", i)), 4096+i); err != nil {
			t.Fatalf("writing after space was freed: %v", err)
		}
	}
	healed(n, bricks, time.Minute)
}

// loopBrick makes a file system of mib MiB (ext4, no blocks reserved for
// root: bricks run as root) on a loop device, mounts it under dir and
// returns a brick directory inside it. The test unmounts it at the end.
func loopBrick(t *testing.T, dir string, i, mib int) string {
	t.Helper()
	img := filepath.Join(dir, fmt.Sprintf("disk%d.img", i))
	mp := filepath.Join(dir, fmt.Sprintf("disk%d", i))
	sh(t, dir, fmt.Sprintf("truncate -s %dM %s && mkfs.ext4 -q -m 0 %s && mkdir %s && mount -o loop %s %s && mkdir %s/brick",
		mib, img, img, mp, img, mp, mp))
	// Lazily: the brick processes still hold it; the loop device goes
	// with the last of them (mount -o loop sets autoclear).
	t.Cleanup(func() { exec.Command("umount", "-l", mp).Run() })
	return filepath.Join(mp, "brick")
}

// fillUp writes numbered files of 2–32 KiB round the directories d0..d7
// of mnt until one fails; it returns the files written (path → size), the
// one that failed and its error.
func fillUp(mnt string) (map[string]int, string, error) {
	acked := map[string]int{}
	for i := 0; i < 100000; i++ {
		p := filepath.Join(mnt, fmt.Sprintf("d%d", i%8), fmt.Sprintf("f%05d", i))
		size := 2048 + (i*7919)%30720
		if err := writeNumbered(p, size); err != nil {
			return acked, p, err
		}
		acked[p] = size
	}
	return acked, "", errors.New("never full")
}

// writeNumbered writes size bytes that depend on the file's name and size.
func writeNumbered(p string, size int) error {
	return os.WriteFile(p, numbered(p, size), 0o644)
}

func numbered(p string, size int) []byte {
	seed := []byte(filepath.Base(p) + "|")
	return bytes.Repeat(seed, size/len(seed)+1)[:size]
}

// checkAcked reads back every acknowledged file not skipped.
func checkAcked(t *testing.T, acked map[string]int, skip func(string) bool) {
	t.Helper()
	for p, size := range acked {
		if skip != nil && skip(p) {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, numbered(p, size)) {
			t.Fatalf("%s: %d bytes of %d, %v", p, len(b), size, err)
		}
	}
}

// checkGfids fails the test if an inode of a brick has no gfid.
func checkGfids(t *testing.T, bricks []string) {
	t.Helper()
	for _, b := range bricks {
		err := filepath.WalkDir(b, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Name() == ".mortar" && filepath.Dir(p) == b {
				return filepath.SkipDir
			}
			g := make([]byte, 16)
			if k, err := unix.Lgetxattr(p, "trusted.mortar.gfid", g); err != nil || k != 16 {
				return fmt.Errorf("%s has no gfid (%v)", strings.TrimPrefix(p, b), err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("brick %s: %v", b, err)
		}
	}
}
