package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer/disperse"
)

// Fault tests of dispersed (erasure-coded) volumes with the real binary:
// bricks are separate processes killed with SIGKILL, fragments are
// corrupted on disk under the bricks, and what the mount reads is checked
// against what was written.

// geo62 is the geometry of `disperse 6 redundancy 2`.
var geo62 = disperse.Geometry{K: 4, M: 2}

// Kill -9 two of the six bricks of a 4+2 set during a big direct write: dd
// sees no error and the file reads back intact with the two still down;
// after the bricks are back, heal rebuilds their fragments, so that the
// file reads back intact with two *other* bricks down.
func TestDisperseKillTwoDuringBigWrite(t *testing.T) {
	n := startNode(t)
	bricks := n.disperseVolume("dv", 6, 2, 6)
	mnt := n.mount("dv")
	size := bigWriteMiB()
	src := filepath.Join(t.TempDir(), "src")
	sh(t, "/", fmt.Sprintf("dd if=/dev/urandom of=%s bs=1M count=%d status=none", src, size))
	want, err := fileSum(src)
	if err != nil {
		t.Fatal(err)
	}
	dd := exec.Command("dd", "if="+src, "of="+filepath.Join(mnt, "big"), "bs=1M", "oflag=direct", "status=none")
	var ddOut bytes.Buffer
	dd.Stdout, dd.Stderr = &ddOut, &ddOut
	if err := dd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill when a third is written (a fragment is a quarter of the file).
	waitSize(t, filepath.Join(bricks[0], "big"), int64(size)<<20/4/3)
	n.killBrick("dv", bricks[1]) // a data brick
	n.killBrick("dv", bricks[4]) // a parity brick
	if fi, err := os.Stat(filepath.Join(bricks[0], "big")); err != nil || fi.Size() >= geo62.FragmentLen(int64(size)<<20) {
		t.Fatalf("dd was over before the bricks were killed (%v): make the file bigger", err)
	}
	if err := dd.Wait(); err != nil {
		t.Fatalf("dd with two bricks killed under it: %v\n%s\n%s", err, ddOut.String(), n.mountLogs())
	}
	if got, err := fileSum(filepath.Join(mnt, "big")); err != nil || got != want {
		t.Fatalf("read back with bricks 2 and 5 down: sha %s %v, want %s\n%s", got, err, want, n.mountLogs())
	}

	n.restartBricks("dv")
	n.waitDisperseHealed("dv", bricks, 6, 3*time.Minute)
	checkFragmentLens(t, bricks, "big", geo62, int64(size)<<20)
	// Bricks 2 and 5 hold the fragments heal rebuilt; with 1 and 3 down
	// every stripe needs them.
	n.killBrick("dv", bricks[0])
	n.killBrick("dv", bricks[2])
	if got, err := fileSum(filepath.Join(mnt, "big")); err != nil || got != want {
		t.Fatalf("read back after heal with bricks 1 and 3 down: sha %s %v, want %s\n%s", got, err, want, n.mountLogs())
	}
}

// flipBytes inverts n bytes of file p at off and returns what was there.
func flipBytes(t *testing.T, p string, off int64, n int) []byte {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := make([]byte, n)
	if _, err := f.ReadAt(old, off); err != nil {
		t.Fatalf("%s at %d: %v", p, off, err)
	}
	flipped := make([]byte, n)
	for i, b := range old {
		flipped[i] = ^b
	}
	if _, err := f.WriteAt(flipped, off); err != nil {
		t.Fatal(err)
	}
	return old
}

// readAt reads n bytes of p at off through a new open (FUSE drops the
// kernel's page cache of a file on open, so the read reaches the client).
func readAt(p string, off int64, n int) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := f.ReadAt(buf, off)
	if err == io.EOF {
		err = nil
	}
	return buf[:k], err
}

// Bytes of a data brick's fragment flipped on disk (in the data of two
// records and in the header of a third) are detected by their checksums:
// the mount reads the original content, never the flipped bytes; the heal
// daemon then rewrites the fragment, whose bytes are the original ones
// again, and the file reads back with two other bricks down.
func TestDisperseCorruptFragment(t *testing.T) {
	n, bricks, mnt := startDisperse(t, "cv")
	file, data := filepath.Join(mnt, "f"), randomFile(t, mnt, "f", 3<<20+12345, 1)
	frag := filepath.Join(bricks[0], "f")
	type flip struct {
		off int64
		old []byte
	}
	var flips []flip
	for _, off := range []int64{
		disperse.HeaderSize + 100,                      // record 0's data
		5*disperse.Record + disperse.HeaderSize + 7000, // record 5's data
		2*disperse.Record + 12,                         // record 2's header (its version)
	} {
		flips = append(flips, flip{off, flipBytes(t, frag, off, 16)})
	}

	// A small read within the first corrupted block, then the whole file.
	if got, err := readAt(file, 100, 16); err != nil || !bytes.Equal(got, data[100:116]) {
		t.Fatalf("read of 16 bytes in a corrupted block: %x %v, want %x\n%s", got, err, data[100:116], n.mountLogs())
	}
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read of a file with a corrupted fragment: %d bytes %v, differs from what was written (first difference at %d)\n%s",
			len(got), err, firstDiff(got, data), n.mountLogs())
	}

	if logs := n.mountLogs(); !strings.Contains(logs, "fail") || !strings.Contains(logs, "checksum") {
		t.Errorf("the mount log says nothing of a chunk failing its checksum:\n%s", logs)
	}
	// The read marked the brick for heal; the heal daemon rewrites it.
	n.waitDisperseHealed("cv", bricks, 6, time.Minute)
	for _, fl := range flips {
		if got, err := readAt(frag, fl.off, len(fl.old)); err != nil || !bytes.Equal(got, fl.old) {
			t.Errorf("fragment on %s at %d after heal: %x %v, want the bytes before corruption %x", bricks[0], fl.off, got, err, fl.old)
		}
	}
	checkFragmentLens(t, bricks, "f", geo62, int64(len(data)))
	n.killBrick("cv", bricks[1])
	n.killBrick("cv", bricks[2])
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read with bricks 2 and 3 down after the heal: %d bytes %v, first difference at %d\n%s",
			len(got), err, firstDiff(got, data), n.mountLogs())
	}

	// A corrupted parity chunk, with two data bricks down: stripe 1 has
	// three good chunks of the four it needs. The read fails; it must not
	// return bytes decoded from the corrupted chunk.
	n.restartBricks("cv")
	n.waitDisperseHealed("cv", bricks, 6, time.Minute)
	parity := filepath.Join(bricks[4], "f")
	old := flipBytes(t, parity, disperse.Record+disperse.HeaderSize+50000, 16)
	n.killBrick("cv", bricks[0])
	n.killBrick("cv", bricks[1])
	got, err := os.ReadFile(file)
	t.Logf("read with a corrupted parity chunk and two data bricks down: %d bytes, %v", len(got), err)
	if err == nil && !bytes.Equal(got, data) || err != nil && !isAny(err, syscall.EIO) {
		t.Fatalf("read with a corrupted parity chunk and two data bricks down: %d bytes (first difference at %d), %v; want EIO",
			len(got), firstDiff(got, data), err)
	}
	n.restartBricks("cv")
	n.waitDisperseHealed("cv", bricks, 6, time.Minute)
	if got, err := readAt(parity, disperse.Record+disperse.HeaderSize+50000, 16); err != nil || !bytes.Equal(got, old) {
		t.Errorf("parity fragment on %s after heal: %x %v, want the bytes before corruption %x", bricks[4], got, err, old)
	}
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after the second heal: %d bytes %v, first difference at %d", len(got), err, firstDiff(got, data))
	}
}

// firstDiff returns the first offset where a and b differ, -1 if equal.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// isAny reports whether err is one of errnos.
func isAny(err error, errnos ...syscall.Errno) bool {
	for _, e := range errnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Three bricks of six down (more than the redundancy): reads fail with EIO
// or ENOTCONN, changes with EROFS, EIO or ENOTCONN, through a new open and
// through a file opened before; the surviving bricks are left untouched,
// and with the bricks back the file is what it was.
func TestDisperseTooManyDown(t *testing.T) {
	n, bricks, mnt := startDisperse(t, "tv")
	file, data := filepath.Join(mnt, "f"), randomFile(t, mnt, "f", 1<<20+4321, 2)
	held, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	down := []int{0, 2, 4} // two data bricks and a parity brick
	for _, i := range down {
		n.killBrick("tv", bricks[i])
	}
	survivors := []string{bricks[1], bricks[3], bricks[5]}
	before := map[string]string{}
	for _, b := range survivors {
		tree, err := brickTree(b, false)
		if err != nil {
			t.Fatal(err)
		}
		before[b] = fmt.Sprint(tree)
	}

	readErrs := []syscall.Errno{syscall.EIO, syscall.ENOTCONN}
	changeErrs := []syscall.Errno{syscall.EROFS, syscall.EIO, syscall.ENOTCONN}
	for _, c := range []struct {
		what string
		want []syscall.Errno
		do   func() error
	}{
		{"read", readErrs, func() error { _, err := os.ReadFile(file); return err }},
		{"read through a file opened before", readErrs, func() error { _, err := held.ReadAt(make([]byte, len(data)), 0); return err }},
		// Write-behind acknowledges a small write at once: its error comes
		// at the fsync (or close) that follows.
		{"partial-stripe write (and fsync) through a file opened before", changeErrs, func() error {
			if _, err := held.WriteAt([]byte("changed"), 70000); err != nil {
				return err
			}
			return held.Sync()
		}},
		{"whole-stripe write through a file opened before", changeErrs, func() error { _, err := held.WriteAt(make([]byte, 1<<20), 0); return err }},
		{"ftruncate", changeErrs, func() error { return held.Truncate(10) }},
		{"overwrite", changeErrs, func() error { return os.WriteFile(file, []byte("overwritten"), 0o644) }},
		{"create", changeErrs, func() error { return os.WriteFile(filepath.Join(mnt, "new"), []byte("x"), 0o644) }},
		{"mkdir", changeErrs, func() error { return os.Mkdir(filepath.Join(mnt, "dir"), 0o755) }},
		{"unlink", changeErrs, func() error { return os.Remove(file) }},
	} {
		err := c.do()
		t.Logf("%s with 3 of 6 bricks down: %v", c.what, err)
		if !isAny(err, c.want...) {
			t.Errorf("%s with 3 of 6 bricks down: %v; want one of %v", c.what, err, c.want)
		}
	}
	held.Close()
	for _, b := range survivors {
		tree, err := brickTree(b, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(tree); got != before[b] {
			t.Errorf("surviving brick %s changed while the set was below K:\nbefore %s\nafter  %s", b, before[b], got)
		}
	}

	n.restartBricks("tv")
	n.waitDisperseHealed("tv", bricks, 6, time.Minute)
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after the bricks are back: %d bytes %v, first difference at %d", len(got), err, firstDiff(got, data))
	}
	for _, p := range []string{"new", "dir"} {
		if _, err := os.Lstat(filepath.Join(mnt, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s refused while the set was below K exists now: %v", p, err)
		}
	}
	checkFragmentLens(t, bricks, "f", geo62, int64(len(data)))
	if err := os.WriteFile(filepath.Join(mnt, "new"), []byte("x"), 0o644); err != nil {
		t.Fatalf("create after the bricks are back: %v", err)
	}
}

// smallSizes are the sizes of the small-file test: empty, a byte, around
// a block, around a chunk and a 2+1 stripe (128 KiB), several stripes.
var smallSizes = []int{0, 1, 4095, 4096, 4097, 65535, 65537, 131072, 131073, 300000}

// writeSmallFiles writes files [from, to) of the small-file tree, the same
// bytes under every root.
func writeSmallFiles(t *testing.T, roots []string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		rel := filepath.Join(fmt.Sprintf("d%d", i%8), fmt.Sprintf("f%03d", i))
		data := make([]byte, smallSizes[i%len(smallSizes)])
		rand.New(rand.NewSource(int64(i))).Read(data)
		for _, root := range roots {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, rel), data, 0o644); err != nil {
				t.Fatalf("%s: %v", filepath.Join(root, rel), err)
			}
		}
	}
}

// checkAgainst compares the mount with the reference tree ref.
func checkAgainst(t *testing.T, n *node, what, mnt, ref string) {
	t.Helper()
	if d := diffMount(mnt, modelOf(t, ref)); d != "" {
		t.Fatalf("%s: the mount differs from the reference tree: %s\n%s", what, d, n.mountLogs())
	}
	if d := diffLinkCounts(ref, mnt); d != "" {
		t.Errorf("%s: link counts differ: %s", what, d)
	}
}

// Small files of awkward sizes and namespace changes (renames, symlinks,
// hard links, truncates, appends, removals) on a distributed-dispersed
// volume, 2 x (2 + 1), with a brick of each set killed halfway: the mount
// equals a local tree that had the same changes, degraded, after heal, and
// with two other bricks down (so that the healed ones serve).
func TestDisperseSmallFilesAndNamespace(t *testing.T) {
	n := startNode(t)
	bricks := n.disperseVolume("sf", 3, 1, 6)
	info := n.must("volume", "info", "sf")
	for _, w := range []string{"Type: Distributed-Disperse\n", "Number of Bricks: 2 x (2 + 1) = 6\n"} {
		if !strings.Contains(info, w) {
			t.Errorf("volume info lacks %q:\n%s", w, info)
		}
	}
	mnt := n.mount("sf", "attr-timeout=0", "entry-timeout=0")
	ref := t.TempDir()
	roots := []string{ref, mnt}
	both := func(script string) {
		t.Helper()
		for _, root := range roots {
			sh(t, root, script)
		}
	}
	writeSmallFiles(t, roots, 0, 100)
	both(`mkdir -p a/b/c && mv d1/f001 a/b/c/moved && mv d2 a/d2 && ln -s ../d3/f003 a/link && ln -s nowhere dangling &&
		ln d4/f004 a/hard4 && ln d5/f005 d6/hard5 && truncate -s 70000 d7/f007 && truncate -s 5 d0/f008 &&
		truncate -s 200000 d4/f012 && echo appended >> d5/f013 && printf 'x%.0s' $(seq 1 5000) >> d6/f014 &&
		rm d7/f015 && chmod 600 d0/f016 && : > d1/f017`)

	n.killBrick("sf", bricks[1]) // set 1's data brick 2
	n.killBrick("sf", bricks[5]) // set 2's parity brick
	writeSmallFiles(t, roots, 100, 200)
	both(`mv a/b/c/moved a/moved-again && mv d3/f003 d3/f003.renamed && ln -s f003.renamed d3/f003 &&
		ln d6/f102 d6/hard102 && ln d4/f004 d4/hard4-again && truncate -s 1 d4/f020 && truncate -s 400000 d5/f021 &&
		echo more >> d5/f013 && cat d0/f104 >> d0/f000 && mv d1/f105 d2new && rm a/hard4 && rm -r a/d2/f010 &&
		mkdir -p e/f/g && mv d7 e/f/g/d7 && printf 'tail' >> e/f/g/d7/f023 && truncate -s 0 d6/f014 &&
		chmod 640 d3/f011 && mv d5/f029 d5/f037`)
	checkAgainst(t, n, "with a brick of each set down", mnt, ref)

	n.restartBricks("sf")
	n.waitDisperseHealed("sf", bricks, 3, 2*time.Minute)
	checkAgainst(t, n, "after heal", mnt, ref)
	// The healed bricks hold the fragments of the files written while
	// they were down; with the other data brick of each set down, reads
	// need them.
	n.killBrick("sf", bricks[0])
	n.killBrick("sf", bricks[3])
	checkAgainst(t, n, "after heal, with two other bricks down", mnt, ref)
}

// Random writes (at random offsets, spanning 256 KiB stripes), appends,
// truncates and reads of a few files through the mount of a 4+2 volume,
// with random bricks killed and restarted, at most two down or not yet
// healed at any time, and heals in between: every read and size equals the
// model's. One file is written through a descriptor held open all along
// (bricks leave it when they die and must come back into it); the others
// are opened for each operation. MORTAR_MODEL_SEED replays a run;
// MORTAR_FAULT_FULL runs longer.
func TestDisperseRandomizedModel(t *testing.T) {
	seed := modelSeed(t)
	r := rand.New(rand.NewSource(seed))
	steps := 150
	if os.Getenv("MORTAR_FAULT_FULL") != "" {
		steps = 1500
	}
	n, bricks, mnt := startDisperse(t, "dm")
	model := fsModel{".": {dir: true, perm: 0o755}}
	names := []string{"f0", "f1", "f2", "f3"}
	for _, name := range names {
		model[name] = &modelNode{perm: 0o644}
		if err := os.WriteFile(filepath.Join(mnt, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// f3's descriptor is closed only while waiting for heal: the bricks
	// of a file open for writing keep a Dirty mark, which heal info lists
	// until the file has been quiet for a while (disperse.Quiet).
	var held *os.File
	hold := func() {
		var err error
		if held, err = os.OpenFile(filepath.Join(mnt, "f3"), os.O_RDWR, 0); err != nil {
			t.Fatal(err)
		}
	}
	hold()
	defer func() { held.Close() }()
	// open opens name for writing: f3 is the held descriptor.
	open := func(name string) (*os.File, func() error, error) {
		if name == "f3" {
			return held, func() error { return nil }, nil
		}
		f, err := os.OpenFile(filepath.Join(mnt, name), os.O_WRONLY, 0)
		if err != nil {
			return nil, nil, err
		}
		return f, f.Close, nil
	}
	down, unhealed := map[int]bool{}, map[int]bool{} // unhealed: killed since the last heal
	state := func() string {
		return fmt.Sprintf("down %v, not healed %v", sortedInts(down), sortedInts(unhealed))
	}
	fail := func(step int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d step %d (%s): %s\n%s", seed, step, state(), fmt.Sprintf(format, args...), n.mountLogs())
	}
	const maxSize = 3 << 20
	for step := 0; step < steps; step++ {
		stepStart := time.Now()
		if step%10 == 5 {
			event := ""
			switch {
			case len(down) > 0 && (len(unhealed) == 2 || r.Intn(2) == 0):
				n.restartBricks("dm")
				clear(down)
				event = "restart"
			case len(down) == 0 && len(unhealed) > 0 && (len(unhealed) == 2 || r.Intn(3) == 0):
				held.Close()
				n.waitDisperseHealed("dm", bricks, 6, healWait())
				hold()
				clear(unhealed)
				event = "healed"
			case len(unhealed) < 2:
				i := r.Intn(len(bricks))
				for down[i] {
					i = r.Intn(len(bricks))
				}
				n.killBrick("dm", bricks[i])
				down[i], unhealed[i] = true, true
				event = fmt.Sprintf("kill %d", i)
			}
			if os.Getenv("MORTAR_MODEL_TRACE") != "" {
				t.Logf("step %d: %s (%s)", step, event, state())
			}
		}
		name := names[r.Intn(len(names))]
		p := filepath.Join(mnt, name)
		cur := model[name].data
		var op string
		switch k := r.Intn(10); {
		case k < 4: // pwrite, maybe past the end (a hole)
			off := r.Intn(min(len(cur)+300<<10, maxSize))
			length := 700 << 10
			if r.Intn(2) == 0 {
				length = 8 << 10 // within a chunk, often: the parity is updated in place
			}
			buf := make([]byte, 1+r.Intn(min(length, maxSize-off)))
			r.Read(buf)
			op = fmt.Sprintf("pwrite %s %d+%d", name, off, len(buf))
			f, done, err := open(name)
			if err == nil {
				_, err = f.WriteAt(buf, int64(off))
				if cerr := done(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fail(step, "%s: %v", op, err)
			}
			if end := off + len(buf); end > len(cur) {
				cur = append(cur, make([]byte, end-len(cur))...)
			}
			copy(cur[off:], buf)
		case k == 4 && name != "f3" && len(cur) < maxSize: // append
			buf := make([]byte, 1+r.Intn(100<<10))
			r.Read(buf)
			op = fmt.Sprintf("append %s %d", name, len(buf))
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				_, err = f.Write(buf)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fail(step, "%s: %v", op, err)
			}
			cur = append(cur, buf...)
		case k < 6: // truncate, shorter or longer
			size := r.Intn(min(len(cur)+300<<10, maxSize))
			op = fmt.Sprintf("truncate %s %d", name, size)
			f, done, err := open(name)
			if err == nil {
				err = f.Truncate(int64(size))
				if cerr := done(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fail(step, "%s: %v", op, err)
			}
			if size > len(cur) {
				cur = append(cur, make([]byte, size-len(cur))...)
			}
			cur = cur[:size]
		default: // read a random range, and the size
			off := r.Intn(len(cur) + 1)
			length := 1 + r.Intn(600<<10)
			op = fmt.Sprintf("read %s %d+%d", name, off, length)
			got, err := readAt(p, int64(off), length)
			want := cur[off:min(off+length, len(cur))]
			if err != nil || !bytes.Equal(got, want) {
				fail(step, "%s: %d bytes %v, want %d; first difference at %d", op, len(got), err, len(want), firstDiff(got, want))
			}
			if fi, err := os.Stat(p); err != nil || fi.Size() != int64(len(cur)) {
				fail(step, "stat %s: size %v %v, want %d", name, sizeOf(fi), err, len(cur))
			}
		}
		model[name].data = cur
		if os.Getenv("MORTAR_MODEL_TRACE") != "" {
			t.Logf("step %d: %s (%v)", step, op, time.Since(stepStart))
		}
	}
	if len(down) > 0 {
		n.restartBricks("dm")
	}
	held.Close()
	n.waitDisperseHealed("dm", bricks, 6, healWait())
	if d := diffMount(mnt, model); d != "" {
		t.Fatalf("seed %d: after the final heal the mount differs from the model: %s", seed, d)
	}
	for _, name := range names {
		checkFragmentLens(t, bricks, name, geo62, int64(len(model[name].data)))
	}
	// Any two bricks down now: the files read back from the other four.
	a := r.Intn(len(bricks))
	b := (a + 1 + r.Intn(len(bricks)-1)) % len(bricks)
	n.killBrick("dm", bricks[a])
	n.killBrick("dm", bricks[b])
	if d := diffMount(mnt, model); d != "" {
		t.Fatalf("seed %d: after the final heal, with bricks %d and %d down, the mount differs from the model: %s", seed, a, b, d)
	}
}

func sortedInts(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// A hard link made in another directory while a brick is down: heal must
// make it a link on that brick too (one inode, two names), or else the
// brick keeps a second, separate fragment that later writes through the
// other name do not update, and reads through this name return it. Heal
// links it from its id (the bricks' gfid index, brick/posix IDDir).
func TestDisperseHealHardLinkAcrossDirs(t *testing.T) {
	n, bricks, mnt := startDisperse(t, "hl")
	sh(t, mnt, "mkdir d1 d2")
	f, g := filepath.Join(mnt, "d1", "f"), filepath.Join(mnt, "d2", "g")
	before := randomFile(t, mnt, "d1/f", int(2*geo62.Stripe()), 3)
	n.killBrick("hl", bricks[1]) // data brick 2: chunk 1 of every stripe
	if err := os.Link(f, g); err != nil {
		t.Fatal(err)
	}
	n.restartBricks("hl")
	n.waitDisperseHealed("hl", bricks, 6, time.Minute)
	for _, b := range bricks {
		var a, c syscall.Stat_t
		errA, errC := syscall.Stat(filepath.Join(b, "d1", "f"), &a), syscall.Stat(filepath.Join(b, "d2", "g"), &c)
		// Two names and the entry in the brick's gfid index.
		if errA != nil || errC != nil || a.Ino != c.Ino || c.Nlink != 3 {
			t.Errorf("brick %s after heal: d1/f inode %d (%v), d2/g inode %d with %d links (%v); want one inode with 3 links",
				b, a.Ino, errA, c.Ino, c.Nlink, errC)
		}
	}
	after := make([]byte, len(before))
	rand.New(rand.NewSource(4)).Read(after)
	if err := os.WriteFile(f, after, 0o644); err != nil {
		t.Fatal(err)
	}
	// Chunk 1 of stripe 0: read from brick 2 alone.
	off := int64(disperse.Chunk) + 1000
	if got, err := readAt(g, off, 100); err != nil || !bytes.Equal(got, after[off:off+100]) {
		t.Errorf("read of 100 bytes at %d through the other name after a rewrite: %v, stale data: %v (want the rewritten bytes)",
			off, err, bytes.Equal(got, before[off:off+100]))
	}
	if got, err := os.ReadFile(g); err != nil || !bytes.Equal(got, after) {
		t.Errorf("read through the other name after a rewrite: %d bytes %v, first difference at %d", len(got), err, firstDiff(got, after))
	}
}

// A small write that extends a file within one chunk of its last stripe
// (the path that updates the parity in place) must leave every fragment
// as long as any other write would: FragmentLen of the new size, on every
// brick of the set.
func TestDisperseSmallExtendingWriteFragmentLengths(t *testing.T) {
	n, bricks, mnt := startDisperse(t, "sx")
	file, data := filepath.Join(mnt, "f"), randomFile(t, mnt, "f", 10000, 5)
	checkFragmentLens(t, bricks, "f", geo62, int64(len(data)))
	// 100 bytes at 40000: within chunk 0 of stripe 0, past the end.
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	extra := bytes.Repeat([]byte{'x'}, 100)
	if _, err := f.WriteAt(extra, 40000); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := append(append(data, make([]byte, 40000-len(data))...), extra...)
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the extending write: %d bytes %v, first difference at %d", len(got), err, firstDiff(got, want))
	}
	checkFragmentLens(t, bricks, "f", geo62, int64(len(want)))
	n.waitHealed("sx", bricks, 1, false, time.Minute) // replica 1: heal info only
	if d := diffDisperseSets(bricks, 6); d != "" {
		t.Errorf("with nothing pending, the bricks differ: %s", d)
	}
}

// A client killed (SIGKILL of `mortar mount`) in the middle of a big
// write leaves the stripe it was writing split between the bricks that got
// it and those that did not, and dirty marks on the file. Through a new
// mount the file reads without error, every 64 KiB chunk its old content
// (zeros: the file was new) or its new one; the heal daemon finds the
// marks (disperse.heal-quiet 1 s here) and makes every brick agree, which
// a read with each pair of bricks down then shows.
func TestDisperseClientKilledMidWrite(t *testing.T) {
	n := startNode(t)
	bricks := n.createVolume("ck", 6, []string{"disperse", "6", "redundancy", "2"}, []string{"disperse.heal-quiet", "1"})
	mnt := n.mount("ck", "attr-timeout=0", "entry-timeout=0")
	const size = 96 << 20
	tmp := t.TempDir()
	src := randomFile(t, tmp, "src", size, 11)
	// Kill the client once a third of the file is on the bricks.
	killClientDuringDD(t, mnt, filepath.Join(tmp, "src"), func() bool {
		fi, err := os.Stat(filepath.Join(bricks[0], "f"))
		return err == nil && fi.Size() > geo62.FragmentLen(size/3)
	})

	mnt = n.mount("ck", "attr-timeout=0", "entry-timeout=0")
	// Old or new, per chunk: before heal (the bricks may still disagree
	// on the size: the dying write raised it on those it reached) and
	// after, when the file must also read the same with any two bricks
	// down.
	oldOrNew := func(what string) []byte {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(mnt, "f"))
		if err != nil {
			t.Fatalf("%s: read: %v", what, err)
		}
		if len(got) < size/3 || len(got) > size {
			t.Fatalf("%s: %d bytes (the client wrote at least a third of %d)", what, len(got), size)
		}
		zero := make([]byte, disperse.Chunk)
		var news, olds int
		for c := 0; c < len(got); c += disperse.Chunk {
			end := min(c+disperse.Chunk, len(got))
			switch {
			case bytes.Equal(got[c:end], src[c:end]):
				news++
			case bytes.Equal(got[c:end], zero[:end-c]):
				olds++
			default:
				t.Fatalf("%s: chunk at %d is neither the old (zeros) nor the new content", what, c)
			}
		}
		t.Logf("%s: %d bytes: %d chunks new, %d old", what, len(got), news, olds)
		return got
	}
	oldOrNew("after the client died")
	n.waitDisperseHealed("ck", bricks, 6, 2*time.Minute)
	healed := oldOrNew("after heal")
	for _, pair := range [][2]int{{0, 1}, {2, 3}, {4, 5}} {
		n.killBrick("ck", bricks[pair[0]])
		n.killBrick("ck", bricks[pair[1]])
		again, err := os.ReadFile(filepath.Join(mnt, "f"))
		if err != nil || !bytes.Equal(again, healed) {
			t.Fatalf("after heal, bricks %v down: %d bytes, %v; first difference at %d", pair, len(again), err, firstDiff(again, healed))
		}
		n.restartBricks("ck")
	}
}
