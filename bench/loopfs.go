package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// FileSystems are the file systems --fs can make for a run.
var FileSystems = []string{"xfs", "ext4"}

// loopFSSize is the size of the file a run's own file system lives in
// (sparse: it takes what the run writes).
const loopFSSize = "40G"

// loopFS is a file system made for one run in a file under the work
// directory and mounted through a loop device: every target's bricks,
// mounts and files then live on a file system of the kind bricks are
// given (GlusterFS recommends XFS), whatever the machine's own is. A root
// ext4 without a journal, for one, makes a create scan the inodes freed
// in the last seconds (recently_deleted), so a target measured right
// after another's removals pays for them.
type loopFS struct {
	img, dir string
}

// makeLoopFS makes a file system of type fs in a file under work, mounts
// it and returns it; close unmounts and removes it.
func makeLoopFS(work, fs string) (*loopFS, error) {
	mkfs := map[string][]string{"xfs": {"mkfs.xfs", "-q", "-f", "-i", "size=512"}, "ext4": {"mkfs.ext4", "-q", "-F"}}[fs]
	if mkfs == nil {
		return nil, fmt.Errorf("--fs %s: not one of %s", fs, strings.Join(FileSystems, ", "))
	}
	if _, err := exec.LookPath(mkfs[0]); err != nil {
		pkg := map[string]string{"xfs": "xfsprogs", "ext4": "e2fsprogs"}[fs]
		if out, err := exec.Command("apt-get", "install", "-y", "-q", pkg).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("--fs %s: %s is missing and apt-get install %s failed: %v: %s", fs, mkfs[0], pkg, err, out)
		}
	}
	l := &loopFS{img: filepath.Join(work, "fs-"+fs+".img"), dir: filepath.Join(work, "fs-"+fs)}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"truncate", "-s", loopFSSize, l.img},
		append(mkfs, l.img),
		{"mount", "-o", "loop", l.img, l.dir},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			l.close()
			return nil, fmt.Errorf("--fs %s: %s: %v: %s", fs, strings.Join(s, " "), err, out)
		}
	}
	return l, nil
}

// close unmounts the file system and removes its file.
func (l *loopFS) close() {
	exec.Command("umount", l.dir).Run()
	os.Remove(l.dir)
	os.Remove(l.img)
}

// describe says what the file system is and where it lives.
func (l *loopFS) describe() string {
	return fmt.Sprintf("%s (a %s file on %s, loop-mounted)", fsDescription(l.dir), loopFSSize, fsDescription(filepath.Dir(l.img)))
}
