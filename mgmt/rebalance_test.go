package mgmt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume"
)

// rebalanceFiles is how many files the rebalance tests spread over
// directories (MORTAR_REBALANCE_FILES overrides it: 10000 in the long
// runs of scripts/fault).
func rebalanceFiles() int {
	if n, err := strconv.Atoi(os.Getenv("MORTAR_REBALANCE_FILES")); err == nil && n > 0 {
		return n
	}
	return 600
}

// liveClient mounts name as a client that follows spec changes, as mortar
// mount does.
func liveClient(t *testing.T, c *api.Client, name string) *volume.Live {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	spec, err := c.Spec(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	g, err := volume.Build(spec, volume.BuildOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	live := volume.NewLive(g, volume.WithLogger(testLogger(t)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		live.Follow(ctx, func(ctx context.Context, after uint64) (volume.Spec, error) { //nolint:errcheck // ends with ctx
			return c.WatchSpec(ctx, name, after)
		})
	}()
	t.Cleanup(func() { cancel(); <-done; live.Close() })
	waitFor(t, 10*time.Second, "the client to connect", func() error {
		_, err := live.Lookup(ctxT(t), "/")
		return err
	})
	return live
}

// model is what the files should hold, with a lock per file so that a
// reader checks a file only while nobody writes it.
type model struct {
	mu    sync.Mutex
	files map[string][]byte
	locks map[string]*sync.Mutex
}

func (m *model) lock(path string) *sync.Mutex {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.locks[path]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[path] = l
	}
	return l
}

func (m *model) set(path string, data []byte) {
	m.mu.Lock()
	m.files[path] = data
	m.mu.Unlock()
}

func (m *model) get(path string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.files[path]
	return d, ok
}

func (m *model) paths() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.files))
	for p := range m.files {
		out = append(out, p)
	}
	return out
}

func readAll(ctx context.Context, l layer.Layer, path string) ([]byte, error) {
	f, err := l.Open(ctx, path, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Release(ctx)
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(ctx, buf, int64(len(out)))
		out = append(out, buf[:n]...)
		if err != nil || n == 0 {
			return out, err
		}
	}
}

// workload writes and reads files of m on l until stop, recording every
// error it sees; one file stays open for appends the whole time.
func workload(ctx context.Context, l layer.Layer, m *model, stop <-chan struct{}) (errs []error, ops int) {
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	// A long-open file appended to throughout.
	wg.Go(func() {
		f, _, err := l.Create(ctx, "/long-open", layer.CreateIn{Flags: syscall.O_WRONLY | syscall.O_TRUNC, Mode: 0o644})
		if err != nil {
			fail(err)
			return
		}
		defer f.Release(ctx)
		var data []byte
		for i := 0; ; i++ {
			select {
			case <-stop:
				m.set("/long-open", data)
				return
			default:
			}
			chunk := []byte(fmt.Sprintf("line %d\n", i))
			if _, err := f.Write(ctx, chunk, int64(len(data))); err != nil {
				fail(fmt.Errorf("append to the long-open file: %w", err))
				m.set("/long-open", data)
				return
			}
			data = append(data, chunk...)
		}
	})
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				paths := m.paths()
				p := paths[rng.IntN(len(paths))]
				if p == "/long-open" {
					continue
				}
				lk := m.lock(p)
				lk.Lock()
				if w == 0 && i%3 != 0 { // a writer: rewrite the file
					data := bytes.Repeat([]byte{byte(rng.IntN(256))}, rng.IntN(40<<10))
					if err := writeFile(ctx, l, p, data); err != nil {
						fail(fmt.Errorf("rewrite %s: %w", p, err))
					} else {
						m.set(p, data)
					}
				} else { // a reader
					want, _ := m.get(p)
					got, err := readAll(ctx, l, p)
					switch {
					case err != nil:
						fail(fmt.Errorf("read %s: %w", p, err))
					case !bytes.Equal(got, want):
						fail(fmt.Errorf("read %s: %d bytes, want %d", p, len(got), len(want)))
					}
				}
				lk.Unlock()
				mu.Lock()
				ops++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs, ops
}

// waitTask polls the volume's task until it is no longer in progress.
func waitTask(t *testing.T, c *api.Client, name string) api.RebalanceStatus {
	t.Helper()
	var rs api.RebalanceStatus
	waitFor(t, 3*time.Minute, "the task of "+name, func() error {
		var err error
		if rs, err = c.RebalanceStatus(ctxT(t), name); err != nil {
			return err
		}
		if rs.Task == nil || rs.Task.Status == api.TaskRunning {
			return fmt.Errorf("task %+v", rs.Task)
		}
		return nil
	})
	return rs
}

// regularFiles counts the regular files of a brick directory outside
// .mortar that are not pointer files (mode 01000, empty).
func regularFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".mortar" {
			return filepath.SkipDir
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() && info.Mode()&os.ModeSticky == 0 {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// add-brick and rebalance under a concurrent writer, reader and appender:
// nobody sees an error, every file keeps its content, files land on the
// new brick and the old layout is dropped; then remove-brick drains a
// brick and commit removes it, again with nothing lost.
func TestAddBrickRebalanceRemoveBrick(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	dirs := twoOfThree(t, c)
	live := liveClient(t, c, "dv")
	m := &model{files: map[string][]byte{}, locks: map[string]*sync.Mutex{}}
	files := rebalanceFiles()
	for d := range 10 {
		mustMkdir(t, live, fmt.Sprintf("/d%d", d))
	}
	for i := range files {
		p := fmt.Sprintf("/d%d/f%d", i%10, i)
		data := bytes.Repeat([]byte{byte(i)}, 1+i%5000)
		mustWrite(t, live, p, data)
		m.set(p, data)
	}
	// Files with a second name in another directory: the remove-brick
	// moves them with both.
	links := map[string]string{}
	for i := 0; i < files; i += 7 {
		p, q := fmt.Sprintf("/d%d/f%d", i%10, i), fmt.Sprintf("/d%d/link%d", (i+3)%10, i)
		if _, err := live.Link(ctx, p, q); err != nil {
			t.Fatal(err)
		}
		links[q] = p
	}

	phase := func(what string, run func()) {
		t.Helper()
		stop := make(chan struct{})
		var errs []error
		var ops int
		done := make(chan struct{})
		go func() {
			defer close(done)
			errs, ops = workload(context.Background(), live, m, stop)
		}()
		run()
		close(stop)
		<-done
		if len(errs) > 0 {
			t.Fatalf("%s: the workload saw %d errors in %d operations, first: %v", what, len(errs), ops, errors.Join(errs[:min(5, len(errs))]...))
		}
		t.Logf("%s: %d operations, no error", what, ops)
	}

	phase("add-brick + rebalance", func() {
		ctx := ctxT(t)
		if _, err := c.AddBrick(ctx, "dv", api.AddBrickRequest{Bricks: []string{"localhost:" + dirs[2]}, Force: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Rebalance(ctx, "dv", api.RebalanceRequest{Action: api.ActionStart}); err != nil {
			t.Fatal(err)
		}
		rs := waitTask(t, c, "dv")
		if rs.Task.Status != api.TaskCompleted || rs.Task.Error != "" {
			t.Fatalf("rebalance: %+v", rs.Task)
		}
		if len(rs.Nodes) != 1 || rs.Nodes[0].Moved == 0 {
			t.Fatalf("rebalance moved nothing: %+v", rs.Nodes)
		}
		t.Logf("rebalance: %+v", rs.Nodes[0].RebalanceStats)
	})
	ctx = ctxT(t) // a new deadline after a long phase
	vi, err := c.Info(ctx, "dv")
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := c.Spec(ctx, "dv")
	if spec.Previous != nil || spec.Layout == nil || len(spec.Layout.Children()) != 3 {
		t.Fatalf("layout after rebalance: %+v previous %+v", spec.Layout, spec.Previous)
	}
	if n := regularFiles(t, dirs[2]); n < files/6 {
		t.Fatalf("the new brick holds %d files of %d", n, files)
	}
	checkModel(t, c, "dv", m)
	checkLinks(t, c, m, links)

	phase("remove-brick", func() {
		ctx := ctxT(t)
		if _, err := c.RemoveBrick(ctx, "dv", api.RemoveBrickRequest{Action: api.ActionCommit, Bricks: []string{vi.Bricks[0].Name()}}); !errors.Is(err, api.ErrState) {
			t.Fatalf("commit before a drain: %v", err)
		}
		if _, err := c.RemoveBrick(ctx, "dv", api.RemoveBrickRequest{Action: api.ActionStart, Bricks: []string{vi.Bricks[0].Name()}}); err != nil {
			t.Fatal(err)
		}
		rs := waitTask(t, c, "dv")
		if rs.Task.Status != api.TaskCompleted || rs.Task.Error != "" {
			t.Fatalf("remove-brick: %+v", rs.Task)
		}
		t.Logf("remove-brick: %+v", rs.Nodes[0].RebalanceStats)
	})
	if n := regularFiles(t, dirs[0]); n != 0 {
		t.Fatalf("the drained brick still holds %d files", n)
	}
	ctx = ctxT(t)
	// A file the drain missed (a client renamed it behind the walk) keeps
	// the commit from going ahead.
	stray := filepath.Join(dirs[0], "d3", "stray")
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = c.RemoveBrick(ctx, "dv", api.RemoveBrickRequest{Action: api.ActionCommit, Bricks: []string{vi.Bricks[0].Name()}})
	if !errors.Is(err, api.ErrState) || !strings.Contains(err.Error(), "/d3/stray") {
		t.Fatalf("commit with a file on the brick: %v", err)
	}
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RemoveBrick(ctx, "dv", api.RemoveBrickRequest{Action: api.ActionCommit, Bricks: []string{vi.Bricks[0].Name()}}); err != nil {
		t.Fatal(err)
	}
	vi, _ = c.Info(ctx, "dv")
	if len(vi.Bricks) != 2 {
		t.Fatalf("bricks after commit: %+v", vi.Bricks)
	}
	checkModel(t, c, "dv", m)
	checkLinks(t, c, m, links)
}

// checkLinks reads every second name in links (to its first) through a
// new client of "dv".
func checkLinks(t *testing.T, c *api.Client, m *model, links map[string]string) {
	t.Helper()
	top := mountVolume(t, c, "dv")
	ctx := ctxT(t)
	for q, p := range links {
		want, _ := m.get(p)
		got, err := readAll(ctx, top, q)
		a, lerr := top.Lookup(ctx, q)
		if err != nil || !bytes.Equal(got, want) || lerr != nil || a.Nlink != 2 {
			t.Fatalf("%s, a second name of %s: %v, %d bytes, want %d; %d links %v", q, p, err, len(got), len(want), a.Nlink, lerr)
		}
	}
}

// twoOfThree makes three brick directories and starts the distribute
// volume "dv" on the first two; the third is for add-brick.
func twoOfThree(t *testing.T, c *api.Client) []string {
	t.Helper()
	ctx := ctxT(t)
	dirs := brickDirs(t, 3)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "dv", Bricks: []string{"localhost:" + dirs[0], "localhost:" + dirs[1]}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "dv", false); err != nil {
		t.Fatal(err)
	}
	return dirs
}

// checkModel reads every file of m through a new client of the volume.
func checkModel(t *testing.T, c *api.Client, name string, m *model) {
	t.Helper()
	top := mountVolume(t, c, name)
	ctx := ctxT(t)
	for _, p := range m.paths() {
		want, _ := m.get(p)
		got, err := readAll(ctx, top, p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %v, %d bytes, want %d", p, err, len(got), len(want))
		}
	}
}

// A node that restarts in the middle of a rebalance resumes it from its
// checkpoint, and the task completes with every file in place.
func TestRebalanceResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	n, c := startNode(t, dir)
	ctx := ctxT(t)
	dirs := twoOfThree(t, c)
	top := mountVolume(t, c, "dv")
	m := &model{files: map[string][]byte{}, locks: map[string]*sync.Mutex{}}
	for d := range 40 {
		mustMkdir(t, top, fmt.Sprintf("/d%02d", d))
		for i := range 30 {
			p := fmt.Sprintf("/d%02d/f%d", d, i)
			data := bytes.Repeat([]byte{byte(d + i)}, 1000+i)
			mustWrite(t, top, p, data)
			m.set(p, data)
		}
	}
	if _, err := c.AddBrick(ctx, "dv", api.AddBrickRequest{Bricks: []string{"localhost:" + dirs[2]}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rebalance(ctx, "dv", api.RebalanceRequest{Action: api.ActionStart}); err != nil {
		t.Fatal(err)
	}
	var before api.NodeProgress
	waitFor(t, time.Minute, "the rebalance to have moved some files", func() error {
		rs, err := c.RebalanceStatus(ctx, "dv")
		if err != nil {
			return err
		}
		if len(rs.Nodes) == 0 || rs.Nodes[0].Checkpoint == "" || rs.Nodes[0].Moved == 0 {
			return fmt.Errorf("nothing moved and checkpointed yet: %+v", rs.Nodes)
		}
		before = rs.Nodes[0]
		return nil
	})
	if before.Status != api.TaskRunning {
		t.Skipf("the rebalance finished before the restart (%+v); nothing to resume", before)
	}
	n.Close()
	_, c = startNode(t, dir)
	rs := waitTask(t, c, "dv")
	if rs.Task.Status != api.TaskCompleted || rs.Task.Error != "" {
		t.Fatalf("task after a restart: %+v", rs.Task)
	}
	after := rs.Nodes[0]
	if after.Dirs <= before.Dirs || after.Moved <= before.Moved {
		t.Fatalf("progress did not carry over: before %+v after %+v", before.RebalanceStats, after.RebalanceStats)
	}
	spec, _ := c.Spec(ctx, "dv")
	if spec.Previous != nil {
		t.Fatal("previous layout kept after a completed rebalance")
	}
	checkModel(t, c, "dv", m)
}
