package distribute_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/disperse"
	"github.com/mortarfs/mortar/layer/distribute"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/layer/replicate"
	"github.com/mortarfs/mortar/volume"
)

const rbVolume = "vol-rebalance-test"

// cluster is n distribute children, each a brick served on 127.0.0.1 (or
// a replica set of such bricks), reached through protocol clients.
type cluster struct {
	t        *testing.T
	ctx      context.Context
	ids      []string
	children []distribute.Child
	dirs     [][]string // brick directories of each child
}

func newCluster(t *testing.T, n, replica int, opts posix.Options) *cluster {
	t.Helper()
	c := &cluster{t: t, ctx: t.Context()}
	for i := range n {
		id := fmt.Sprintf("c%d", i)
		var members []replicate.Child
		var dirs []string
		for k := range replica {
			b := testbrick.New(t, fmt.Sprintf("%s-%d", id, k), rbVolume, opts)
			cl := protocol.New(protocol.Config{Addr: b.Addr, BrickID: b.ID, VolumeID: rbVolume})
			t.Cleanup(func() { cl.Close() })
			// Connected before use, so that replica sets start whole.
			if _, err := cl.Statfs(c.ctx, "/"); err != nil {
				t.Fatal(err)
			}
			members = append(members, replicate.Child{Name: b.ID, Layer: cl, Up: cl.Connected})
			dirs = append(dirs, b.Dir)
		}
		var l layer.Layer = members[0].Layer
		if opts.Disperse {
			ds, err := disperse.New(members, 1, disperse.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ds.Idle)
			l = ds
		} else if replica > 1 {
			r, err := replicate.New(members, replicate.Options{})
			if err != nil {
				t.Fatal(err)
			}
			l = r
		}
		c.ids = append(c.ids, id)
		c.children = append(c.children, distribute.Child{ID: id, Layer: l})
		c.dirs = append(c.dirs, dirs)
	}
	return c
}

func ranges(l *volume.Layout) []distribute.Range {
	if l == nil {
		return nil
	}
	var out []distribute.Range
	for _, r := range l.Ranges {
		out = append(out, distribute.Range{Start: r.Start, Child: r.Child})
	}
	return out
}

// dist is a distribute over the children named (all if none) with the
// given layouts.
func (c *cluster) dist(cur, prev *volume.Layout, only ...string) *distribute.Distribute {
	c.t.Helper()
	var ch []distribute.Child
	for _, k := range c.children {
		if len(only) == 0 || contains(only, k.ID) {
			ch = append(ch, k)
		}
	}
	d, err := distribute.New(ch, distribute.Options{Layout: ranges(cur), Previous: ranges(prev)})
	if err != nil {
		c.t.Fatal(err)
	}
	return d
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// tree makes dirs×subs directories with files files each through d and
// returns the content of every file by path. A few files are larger than
// the copy chunk and hold a run of zeros (a hole once moved).
func tree(t *testing.T, d layer.Layer, dirs, subs, files int) map[string][]byte {
	t.Helper()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(7, 8))
	model := map[string][]byte{}
	for i := range dirs {
		for j := range subs {
			dir := fmt.Sprintf("/d%d/s%d", i, j)
			for _, p := range []string{fmt.Sprintf("/d%d", i), dir} {
				if _, err := d.Mkdir(ctx, p, layer.MkdirIn{Mode: 0o755}); err != nil && !errors.Is(err, syscall.EEXIST) {
					t.Fatal(err)
				}
			}
			for k := range files {
				p := fmt.Sprintf("%s/f%d", dir, k)
				data := make([]byte, rng.IntN(3000))
				if k == 0 && j == 0 {
					data = make([]byte, 2<<20+333) // a zero chunk, then data
					copy(data[1<<20+5:], "tail")
				}
				for n := range data {
					if n < 1<<20 || n > 2<<20 {
						data[n] = byte(rng.Uint32())
					}
				}
				writeFile(t, d, p, data)
				model[p] = data
			}
		}
	}
	return model
}

func writeFile(t *testing.T, d layer.Layer, p string, data []byte) {
	t.Helper()
	ctx := t.Context()
	f, _, err := d.Create(ctx, p, layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o640})
	if err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
	defer f.Release(ctx)
	if _, err := f.Write(ctx, data, 0); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	if err := d.Setxattr(ctx, p, "user.name", []byte(p), 0); err != nil {
		t.Fatalf("setxattr %s: %v", p, err)
	}
}

func readFile(ctx context.Context, d layer.Layer, p string) ([]byte, error) {
	f, err := d.Open(ctx, p, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Release(ctx)
	return readAll(ctx, f)
}

func readAll(ctx context.Context, f layer.File) ([]byte, error) {
	var out []byte
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(ctx, buf, int64(len(out)))
		if err != nil {
			return nil, err
		}
		out = append(out, buf[:n]...)
		if n < len(buf) {
			return out, nil
		}
	}
}

// check reads every file of model through d and compares.
func check(t *testing.T, d layer.Layer, model map[string][]byte) {
	t.Helper()
	for p, want := range model {
		got, err := readFile(t.Context(), d, p)
		if err != nil {
			t.Errorf("read %s: %v", p, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes differ from the %d written", p, len(got), len(want))
		}
		if v, err := d.Getxattr(t.Context(), p, "user.name"); err != nil || string(v) != p {
			t.Errorf("%s: xattr %q %v", p, v, err)
		}
	}
}

// onBrick counts what a brick directory holds besides directories:
// data files, pointer files and rebalance leftovers.
func onBrick(t *testing.T, dir string) (data, pointers, leftovers int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if e.Name() == posix.HiddenDir {
				return filepath.SkipDir
			}
			return nil
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(e.Name(), ".mortar-"):
			leftovers++
		case st.Mode()&os.ModeSticky != 0 && st.Mode().Perm() == 0:
			pointers++
		default:
			data++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return data, pointers, leftovers
}

func even(ids ...string) *volume.Layout { l := volume.EvenLayout(ids); return &l }

func rebalance(t *testing.T, d *distribute.Distribute, opts distribute.RebalanceOptions) distribute.RebalanceStats {
	t.Helper()
	st, err := d.Rebalance(t.Context(), opts)
	if err != nil {
		t.Fatalf("rebalance: %v (%+v)", err, st)
	}
	if st.Failed != 0 || st.Skipped != 0 {
		t.Fatalf("rebalance: %+v", st)
	}
	return st
}

func TestRebalanceAddChild(t *testing.T) {
	c := newCluster(t, 3, 1, posix.Options{})
	old := even("c0", "c1")
	model := tree(t, c.dist(nil, nil, "c0", "c1"), 5, 4, 25)

	cur := old.With("c2")
	d := c.dist(&cur, old)
	st := rebalance(t, d, distribute.RebalanceOptions{FixLayout: true})
	if st.Moved != 0 || st.Dirs != 1+5+20 || st.DirsMade != 25 {
		t.Fatalf("fix-layout: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(c.dirs[2][0], "d4", "s3")); err != nil {
		t.Fatalf("fix-layout did not make the directories: %v", err)
	}
	check(t, d, model) // through both layouts, before anything moved
	st = rebalance(t, d, distribute.RebalanceOptions{})
	if st.Moved == 0 || st.Scanned != uint64(len(model)) {
		t.Fatalf("rebalance: %+v", st)
	}
	check(t, c.dist(&cur, nil), model)
	data, ptrs, left := onBrick(t, c.dirs[2][0])
	if want := len(model) / 3; data < want/2 || data > want*2 || ptrs != 0 || left != 0 {
		t.Errorf("new child holds %d files, %d pointers, %d leftovers; want about %d files", data, ptrs, left, want)
	}
	total := 0
	for i := range 3 {
		n, ptrs, left := onBrick(t, c.dirs[i][0])
		total += n
		if ptrs != 0 || left != 0 {
			t.Errorf("child %d: %d pointers, %d leftovers", i, ptrs, left)
		}
	}
	if total != len(model) {
		t.Errorf("%d data files on the bricks, want %d", total, len(model))
	}
	// A second run finds nothing to do.
	if st := rebalance(t, d, distribute.RebalanceOptions{}); st.Moved != 0 {
		t.Errorf("second run moved %d", st.Moved)
	}
}

func TestRebalanceRemoveChild(t *testing.T) {
	t.Run("brick", func(t *testing.T) { removeChild(t, newCluster(t, 3, 1, posix.Options{})) })
	t.Run("replica", func(t *testing.T) { removeChild(t, newCluster(t, 3, 2, posix.Options{})) })
	t.Run("disperse", func(t *testing.T) { removeChild(t, newCluster(t, 3, 3, posix.Options{Disperse: true})) })
}

func removeChild(t *testing.T, c *cluster) {
	old := even("c0", "c1", "c2")
	model := tree(t, c.dist(nil, nil), 3, 3, 20)
	// Files with several names, some in other directories: those on the
	// leaving child move with all their names.
	d0 := c.dist(nil, nil)
	for k := range 6 {
		p := fmt.Sprintf("/d0/s0/f%d", k)
		for _, q := range []string{p + ".link", fmt.Sprintf("/d1/s1/l%d", k), fmt.Sprintf("/d2/l%d", k)} {
			if _, err := d0.Link(t.Context(), p, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Files renamed: some names hash to the leaving child, which holds
	// their pointer while the data stays where it was.
	renamed := map[string][]byte{}
	for k := range 12 {
		p, q := fmt.Sprintf("/d2/s1/f%d", k), fmt.Sprintf("/d1/r%d", k)
		if err := d0.Rename(t.Context(), p, q, 0); err != nil {
			t.Fatal(err)
		}
		renamed[q] = model[p]
		delete(model, p)
	}
	linkedOnC1 := 0
	for k := range 6 {
		if fi, err := os.Stat(filepath.Join(c.dirs[1][0], "d0", "s0", fmt.Sprintf("f%d", k))); err == nil && fi.Mode()&os.ModeSticky == 0 {
			linkedOnC1++
		}
	}
	if linkedOnC1 == 0 {
		t.Fatal("no file with several names on the leaving child: choose other names")
	}
	cur := old.Without("c1")
	d := c.dist(&cur, old)
	// As remove-brick runs it: only the leaving child's files are moved.
	leaving := func(id string) bool { return id == "c1" }
	st := rebalance(t, d, distribute.RebalanceOptions{Workers: 8, Source: leaving})
	if st.Moved < uint64(linkedOnC1) {
		t.Errorf("moved %d, want at least the %d files with four names: %+v", st.Moved, linkedOnC1, st)
	}
	if data, ptrs, left := onBrick(t, c.dirs[1][0]); data+ptrs+left != 0 {
		t.Errorf("leaving child still holds %d files, %d pointers, %d leftovers", data, ptrs, left)
	}
	after := c.dist(&cur, nil, "c0", "c2")
	check(t, after, model)
	for q, want := range renamed {
		if got, err := readFile(t.Context(), after, q); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s, renamed before: %v, %d bytes, want %d", q, err, len(got), len(want))
		}
	}
	// Still one file under its four names: a write through one is read
	// through the others.
	for k := range 6 {
		p := fmt.Sprintf("/d0/s0/f%d", k)
		names := []string{p, p + ".link", fmt.Sprintf("/d1/s1/l%d", k)}
		for _, q := range names {
			if got, err := readFile(t.Context(), after, q); err != nil || !bytes.Equal(got, model[p]) {
				t.Errorf("%s: %d bytes, %v; want the %d of %s", q, len(got), err, len(model[p]), p)
			}
		}
		f, err := after.Open(t.Context(), fmt.Sprintf("/d2/l%d", k), syscall.O_RDWR|syscall.O_TRUNC)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Write(t.Context(), []byte("written through another name"), 0)
		f.Release(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range names {
			got, err := readFile(t.Context(), after, q)
			if err != nil || string(got) != "written through another name" {
				t.Errorf("%s after a write through /d2/l%d: %q, %v", q, k, got, err)
			}
		}
		a, err := after.Lookup(t.Context(), p)
		if err != nil || a.Nlink != 4 {
			t.Errorf("%s: %v, %d links, want 4", p, err, a.Nlink)
		}
	}
}

func TestRebalanceResume(t *testing.T) {
	c := newCluster(t, 2, 1, posix.Options{})
	model := tree(t, c.dist(nil, nil, "c0"), 4, 4, 8)
	cur := even("c0").With("c1")
	d := c.dist(&cur, even("c0"))
	ctx, cancel := context.WithCancel(t.Context())
	var last string
	dirs := 0
	st, err := d.Rebalance(ctx, distribute.RebalanceOptions{Checkpoint: func(cp string) {
		last = cp
		if dirs++; dirs == 7 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || st.Dirs != 7 || last == "" {
		t.Fatalf("cancelled run: %v, %+v, checkpoint %q", err, st, last)
	}
	st2 := rebalance(t, d, distribute.RebalanceOptions{Resume: last})
	if st2.Dirs != 1+4+16-7 {
		t.Errorf("resumed run did %d directories, want %d", st2.Dirs, 1+4+16-7)
	}
	if st.Moved+st2.Moved == 0 || st.Scanned+st2.Scanned != uint64(len(model)) {
		t.Errorf("runs moved %d+%d, scanned %d+%d of %d", st.Moved, st2.Moved, st.Scanned, st2.Scanned, len(model))
	}
	check(t, c.dist(&cur, nil), model)
	if _, ptrs, left := onBrick(t, c.dirs[0][0]); ptrs+left != 0 {
		t.Errorf("old child: %d pointers, %d leftovers", ptrs, left)
	}
}

// TestRebalanceOpenFileFollows: a file opened before it moves keeps
// working after, through the same handle, on replica sets.
func TestRebalanceOpenFileFollows(t *testing.T) {
	t.Run("replicate", func(t *testing.T) { openFileFollows(t, newCluster(t, 2, 2, posix.Options{})) })
	t.Run("disperse", func(t *testing.T) { openFileFollows(t, newCluster(t, 2, 3, posix.Options{Disperse: true})) })
}

func openFileFollows(t *testing.T, c *cluster) {
	d0 := c.dist(nil, nil, "c0")
	model := tree(t, d0, 1, 1, 12)
	cur := even("c0").With("c1")
	d := c.dist(&cur, even("c0"))
	open := map[string]layer.File{}
	for p := range model {
		f, err := d.Open(t.Context(), p, syscall.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Release(t.Context())
		open[p] = f
	}
	st := rebalance(t, d, distribute.RebalanceOptions{})
	if st.Moved == 0 {
		t.Fatalf("nothing moved: %+v", st)
	}
	for p, f := range open {
		if _, err := f.Write(t.Context(), []byte("NEW"), 1); err != nil {
			t.Fatalf("write %s after the move: %v", p, err)
		}
		if err := f.Fsync(t.Context(), false); err != nil {
			t.Fatalf("fsync %s: %v", p, err)
		}
		a, err := f.Getattr(t.Context())
		if err != nil || a.Linkto != "" {
			t.Fatalf("getattr %s: %+v %v", p, a, err)
		}
		want := model[p]
		if len(want) < 4 {
			want = append(want, make([]byte, 4-len(want))...)
		}
		copy(want[1:], "NEW")
		model[p] = want
		if got, err := readAll(t.Context(), f); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %s through the old handle: %v", p, err)
		}
	}
	check(t, c.dist(&cur, nil), model)
	for k := range len(c.dirs[1]) { // every brick of the new set holds what moved
		if data, _, _ := onBrick(t, c.dirs[1][k]); data != int(st.Moved) {
			t.Errorf("replica %d of the new set holds %d files, want %d", k, data, st.Moved)
		}
	}
}

// TestRebalanceFreezeExpires: a freeze the rebalancer never lifts (it
// died) ends by itself, releasing the writes it held.
func TestRebalanceFreezeExpires(t *testing.T) {
	c := newCluster(t, 1, 1, posix.Options{FreezeTimeout: 200 * time.Millisecond})
	d := c.dist(nil, nil)
	writeFile(t, d, "/f", []byte("hello"))
	a, err := d.Lookup(t.Context(), "/f")
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.Open(t.Context(), "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(t.Context())
	brick := c.children[0].Layer
	for _, cmd := range []string{"watch", "freeze"} {
		if err := brick.Setxattr(t.Context(), "/f", "trusted.mortar.migrate", []byte(cmd+" "+a.Gfid.String()), 0); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
	}
	start := time.Now()
	if _, err := f.Write(t.Context(), []byte("HE"), 0); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Error("write not held by the freeze")
	}
	if got, _ := readFile(t.Context(), d, "/f"); string(got) != "HEllo" {
		t.Errorf("content %q", got)
	}
	// Callers of distribute cannot send the commands.
	if err := d.Setxattr(t.Context(), "/f", "trusted.mortar.migrate", []byte("watch "+a.Gfid.String()), 0); err == nil {
		t.Error("migration command accepted from a caller")
	}
}

// writer changes its files through handles opened before the rebalance,
// checking every read against its model of them.
type writer struct {
	d     layer.Layer
	rng   *rand.Rand
	files map[string]layer.File
	model map[string][]byte
	ops   int
}

func (w *writer) step(ctx context.Context) error {
	paths := make([]string, 0, len(w.files))
	for p := range w.files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	p := paths[w.rng.IntN(len(paths))]
	f, m := w.files[p], w.model[p]
	w.ops++
	switch op := w.rng.IntN(10); {
	case op < 5: // overwrite
		off := w.rng.IntN(len(m))
		data := bytes.Repeat([]byte{byte(w.ops)}, 1+w.rng.IntN(8000))
		if _, err := f.Write(ctx, data, int64(off)); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		if end := off + len(data); end > len(m) {
			m = append(m, make([]byte, end-len(m))...)
		}
		copy(m[off:], data)
		w.model[p] = m
	case op < 8: // append
		data := bytes.Repeat([]byte{byte(w.ops) | 1}, 1+w.rng.IntN(4000))
		if _, err := f.Write(ctx, data, int64(len(m))); err != nil {
			return fmt.Errorf("append %s: %w", p, err)
		}
		w.model[p] = append(m, data...)
	case op < 9:
		got, err := readAll(ctx, f)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if !bytes.Equal(got, m) {
			return fmt.Errorf("read %s through its handle: content differs from the model", p)
		}
	default:
		got, err := readFile(ctx, w.d, p)
		if err != nil {
			return fmt.Errorf("open and read %s: %w", p, err)
		}
		if !bytes.Equal(got, m) {
			return fmt.Errorf("read %s: content differs from the model", p)
		}
	}
	return nil
}

// TestRebalanceUnderLoad moves files while writers change them through
// open handles and a reader reads others: nobody sees an error, and the
// files end as the writers' models say.
func TestRebalanceUnderLoad(t *testing.T) {
	t.Run("bricks", func(t *testing.T) { underLoad(t, newCluster(t, 3, 1, posix.Options{})) })
	t.Run("disperse", func(t *testing.T) { underLoad(t, newCluster(t, 3, 3, posix.Options{Disperse: true})) })
}

func underLoad(t *testing.T, c *cluster) {
	old := even("c0", "c1")
	d0 := c.dist(nil, nil, "c0", "c1")
	static := tree(t, d0, 2, 2, 10)
	rng := rand.New(rand.NewPCG(3, 4))
	if _, err := d0.Mkdir(t.Context(), "/w", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	cur := old.With("c2")
	d := c.dist(&cur, old)
	var writers []*writer
	for i := range 4 {
		w := &writer{d: d, rng: rand.New(rand.NewPCG(uint64(i), 9)), files: map[string]layer.File{}, model: map[string][]byte{}}
		for k := range 4 {
			p := fmt.Sprintf("/w/file-%d-%d", i, k)
			data := make([]byte, 100<<10+rng.IntN(300<<10))
			for n := range data {
				data[n] = byte(rng.Uint32())
			}
			writeFile(t, d0, p, data)
			f, err := d.Open(t.Context(), p, syscall.O_RDWR)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Release(t.Context())
			w.files[p], w.model[p] = f, data
		}
		writers = append(writers, w)
	}
	ctx := t.Context()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var errs sync.Map
	for i, w := range writers {
		wg.Go(func() {
			after := 0 // steps since the rebalance ended
			for after < 30 {
				if err := w.step(ctx); err != nil {
					errs.Store(i, err)
					return
				}
				select {
				case <-done:
					after++
				default:
				}
			}
		})
	}
	wg.Go(func() {
		for {
			for p, want := range static {
				got, err := readFile(ctx, d, p)
				if err != nil || !bytes.Equal(got, want) {
					errs.Store("reader", fmt.Errorf("read %s: %v (content equal: %v)", p, err, bytes.Equal(got, want)))
					return
				}
			}
			select {
			case <-done:
				return
			default:
			}
		}
	})
	st, err := d.Rebalance(ctx, distribute.RebalanceOptions{})
	close(done)
	wg.Wait()
	errs.Range(func(k, v any) bool {
		t.Errorf("%v: %v", k, v)
		return true
	})
	if err != nil || st.Failed != 0 || st.Skipped != 0 || st.Moved == 0 {
		t.Fatalf("rebalance: %v %+v", err, st)
	}
	if st.Retries == 0 {
		t.Error("no file changed while it was copied: the load did not reach the migrations")
	}
	t.Logf("rebalance under load: %+v; writer ops %d %d %d %d", st, writers[0].ops, writers[1].ops, writers[2].ops, writers[3].ops)
	fresh := c.dist(&cur, nil)
	check(t, fresh, static)
	for _, w := range writers {
		for p, want := range w.model {
			got, err := readFile(ctx, fresh, p)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s after the rebalance: %v (equal %v, %d vs %d bytes)", p, err, bytes.Equal(got, want), len(got), len(want))
			}
		}
	}
}

// Files with several names leave a child while clients write them through
// open handles and link, unlink and rename their names: every name ends
// on the remaining children, one file under all the names it has, with
// every write.
func TestRebalanceRemoveLinkedUnderLoad(t *testing.T) {
	c := newCluster(t, 3, 1, posix.Options{})
	old := even("c0", "c1", "c2")
	d0 := c.dist(nil, nil)
	ctx := t.Context()
	for _, dir := range []string{"/w", "/x"} {
		if _, err := d0.Mkdir(ctx, dir, layer.MkdirIn{Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	cur := old.Without("c1")
	d := c.dist(&cur, old)
	w := &writer{d: d, rng: rand.New(rand.NewPCG(5, 6)), files: map[string]layer.File{}, model: map[string][]byte{}}
	names := map[string][]string{} // each file's names, its first one first
	for k := range 12 {
		p := fmt.Sprintf("/w/f%d", k)
		data := bytes.Repeat([]byte{byte(k)}, 50<<10)
		writeFile(t, d0, p, data)
		names[p] = []string{p}
		for _, q := range []string{fmt.Sprintf("/w/g%d", k), fmt.Sprintf("/x/h%d", k)} {
			if _, err := d0.Link(ctx, p, q); err != nil {
				t.Fatal(err)
			}
			names[p] = append(names[p], q)
		}
		f, err := d.Open(ctx, p, syscall.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Release(ctx)
		w.files[p], w.model[p] = f, data
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var errs sync.Map
	renames := 0
	wg.Go(func() {
		for {
			if err := w.step(ctx); err != nil {
				errs.Store("writer", err)
				return
			}
			select {
			case <-done:
				return
			default:
			}
		}
	})
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(7, 8))
		for n := 0; ; n++ {
			p := fmt.Sprintf("/w/f%d", rng.IntN(12))
			if err := changeNames(ctx, d, rng, names, p, n); err != nil {
				errs.Store("names", err)
				return
			}
			renames++
			select {
			case <-done:
				return
			default:
			}
		}
	})
	leaving := distribute.RebalanceOptions{Source: func(id string) bool { return id == "c1" }}
	st, err := d.Rebalance(ctx, leaving)
	close(done)
	wg.Wait()
	errs.Range(func(k, v any) bool {
		t.Errorf("%v: %v", k, v)
		return true
	})
	if err != nil || st.Failed != 0 {
		t.Fatalf("rebalance under load: %v %+v", err, st)
	}
	t.Logf("under load: %+v; %d writes and reads, %d changes of names", st, w.ops, renames)
	for run := 0; st.Skipped != 0; run++ {
		if run == 3 {
			t.Fatalf("files still skipped after the load stopped: %+v", st)
		}
		st = rebalance(t, d, leaving)
	}
	if data, ptrs, left := onBrick(t, c.dirs[1][0]); data+ptrs+left != 0 {
		t.Errorf("leaving child still holds %d files, %d pointers, %d leftovers", data, ptrs, left)
	}
	fresh := c.dist(&cur, nil, "c0", "c2")
	for p, ns := range names {
		for _, q := range ns {
			got, err := readFile(ctx, fresh, q)
			if err != nil || !bytes.Equal(got, w.model[p]) {
				t.Errorf("%s (a name of %s): %v, equal %v", q, p, err, bytes.Equal(got, w.model[p]))
			}
		}
		if a, err := fresh.Lookup(ctx, p); err != nil || int(a.Nlink) != len(ns) {
			t.Errorf("%s: %v, %d links, want %d (%v)", p, err, a.Nlink, len(ns), ns)
			for _, q := range ns {
				for i, ch := range c.children {
					b, err := ch.Layer.Lookup(ctx, q)
					var ino uint64
					if fi, err := os.Stat(filepath.Join(c.dirs[i][0], q)); err == nil {
						ino = fi.Sys().(*syscall.Stat_t).Ino
					}
					t.Logf("  %s on %s: %v gfid %s linkto %q nlink %d ino %d size %d", q, c.ids[i], err, b.Gfid, b.Linkto, b.Nlink, ino, b.Size)
				}
			}
		}
	}
}

// changeNames links, unlinks or renames one of the extra names of file p
// (never its first), keeping names up to date.
func changeNames(ctx context.Context, d layer.Layer, rng *rand.Rand, names map[string][]string, p string, n int) error {
	ns := names[p]
	fresh := fmt.Sprintf("/x/n%d", n)
	switch op := rng.IntN(3); {
	case op == 0 || len(ns) == 1:
		if _, err := d.Link(ctx, p, fresh); err != nil {
			return fmt.Errorf("link %s %s: %w", p, fresh, err)
		}
		names[p] = append(ns, fresh)
	case op == 1:
		i := 1 + rng.IntN(len(ns)-1)
		if err := d.Unlink(ctx, ns[i]); err != nil {
			return fmt.Errorf("unlink %s: %w", ns[i], err)
		}
		names[p] = slices.Delete(ns, i, i+1)
	default:
		i := 1 + rng.IntN(len(ns)-1)
		if err := d.Rename(ctx, ns[i], fresh, 0); err != nil {
			return fmt.Errorf("rename %s %s: %w", ns[i], fresh, err)
		}
		ns[i] = fresh
	}
	return nil
}
