package e2e

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer/disperse"
)

// Helpers of the dispersed-volume tests (disperse_test.go).

// disperseVolume creates and starts a dispersed volume (`disperse N
// redundancy M` over nbricks bricks) and returns its brick directories.
func (n *node) disperseVolume(name string, disperseN, redundancy, nbricks int) []string {
	n.t.Helper()
	return n.createVolume(name, nbricks, []string{"disperse", fmt.Sprint(disperseN), "redundancy", fmt.Sprint(redundancy)}, nil)
}

// startDisperse starts a node with a 4+2 volume, mounted without kernel
// attribute and name caching.
func startDisperse(t *testing.T, vol string) (*node, []string, string) {
	t.Helper()
	n := startNode(t)
	bricks := n.disperseVolume(vol, 6, 2, 6)
	return n, bricks, n.mount(vol, "attr-timeout=0", "entry-timeout=0")
}

// randomFile writes size pseudo-random bytes (from seed) to dir/rel and
// returns them.
func randomFile(t *testing.T, dir, rel string, size int, seed int64) []byte {
	t.Helper()
	data := make([]byte, size)
	rand.New(rand.NewSource(seed)).Read(data)
	if err := os.WriteFile(filepath.Join(dir, rel), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// modelSeed returns MORTAR_MODEL_SEED, or a new seed, and logs it.
func modelSeed(t *testing.T) int64 {
	t.Helper()
	seed, err := strconv.ParseInt(os.Getenv("MORTAR_MODEL_SEED"), 10, 64)
	if err != nil {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (MORTAR_MODEL_SEED=%d replays it)", seed, seed)
	return seed
}

// fragmentSums matches the checksums brickTree gives regular files: the
// fragments of one file differ from brick to brick, their lengths do not.
var fragmentSums = regexp.MustCompile(` sha=[0-9a-f]+`)

// diffDisperseSets compares the bricks of every disperse set of setSize
// bricks: names, gfids, modes, owners, xattrs, symlink targets and
// fragment lengths must be the same on each; "" when they are.
func diffDisperseSets(bricks []string, setSize int) string {
	var diffs []string
	tree := func(b string) (map[string]string, error) {
		t, err := brickTree(b, false)
		for k, v := range t {
			t[k] = fragmentSums.ReplaceAllString(v, "")
		}
		return t, err
	}
	for s := 0; s+setSize <= len(bricks); s += setSize {
		ref, err := tree(bricks[s])
		if err != nil {
			return err.Error()
		}
		for _, b := range bricks[s+1 : s+setSize] {
			other, err := tree(b)
			if err != nil {
				return err.Error()
			}
			if d := diffTrees(ref, other); d != "" {
				diffs = append(diffs, fmt.Sprintf("%s vs %s: %s", bricks[s], b, d))
			}
		}
	}
	return strings.Join(diffs, "\n")
}

// waitDisperseHealed waits until heal info lists nothing pending and the
// bricks of every set agree (see diffDisperseSets). Bricks that still
// differ 10 s after heal info is empty fail the test: nothing will heal
// them.
func (n *node) waitDisperseHealed(vol string, bricks []string, setSize int, within time.Duration) {
	n.t.Helper()
	// replica 1: waitHealed compares no bricks, it waits for heal info.
	n.waitHealed(vol, bricks, 1, false, within)
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := diffDisperseSets(bricks, setSize)
		if d == "" {
			return
		}
		if time.Now().After(deadline) {
			out, _ := n.mortar("volume", "heal", vol, "info")
			n.t.Fatalf("heal info is empty but the bricks of %s differ: %s\n%s", vol, d, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkFragmentLens checks that every brick's fragment of rel (a file of
// size bytes) is as long as the geometry says.
func checkFragmentLens(t *testing.T, bricks []string, rel string, g disperse.Geometry, size int64) {
	t.Helper()
	want := g.FragmentLen(size)
	for _, b := range bricks {
		fi, err := os.Stat(filepath.Join(b, rel))
		if err != nil || fi.Size() != want {
			t.Errorf("fragment of %s on %s: %v bytes (%v), want %d", rel, b, sizeOf(fi), err, want)
		}
	}
}

func sizeOf(fi os.FileInfo) any {
	if fi == nil {
		return "no"
	}
	return fi.Size()
}

// modelOf reads a local directory tree into a model, to compare a mount
// with (diffMount).
func modelOf(t *testing.T, root string) fsModel {
	t.Helper()
	m := fsModel{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		node := &modelNode{perm: fi.Mode().Perm()}
		switch {
		case fi.IsDir():
			node.dir = true
		case fi.Mode()&os.ModeSymlink != 0:
			node.link, err = os.Readlink(p)
		default:
			node.data, err = os.ReadFile(p)
		}
		m[rel] = node
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// diffLinkCounts compares the link counts of the regular files of the
// tree under ref with those of the same names under mnt; "" when equal.
func diffLinkCounts(ref, mnt string) string {
	var diffs []string
	filepath.WalkDir(ref, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(ref, p)
		var a, b syscall.Stat_t
		if err := syscall.Lstat(p, &a); err != nil {
			return err
		}
		if err := syscall.Lstat(filepath.Join(mnt, rel), &b); err != nil || a.Nlink != b.Nlink {
			diffs = append(diffs, fmt.Sprintf("%s: %d links (%v), want %d", rel, b.Nlink, err, a.Nlink))
		}
		return nil
	})
	return strings.Join(diffs, "; ")
}
