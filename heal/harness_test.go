package heal

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
)

const testVolume = "heal-test-volume"

var bg = context.Background()

// cluster is one replica set of posix bricks in temp dirs. Replica i is
// reached through a Counting wrapper (counts[i]) that keeps the store's
// heal index, and is up while up[i] holds.
type cluster struct {
	t      *testing.T
	stores []*posix.Store
	dirs   []string // the bricks' directories
	counts []*layertest.Counting
	up     []*atomic.Bool
	set    Set
}

// countingStore is a Counting layer that still keeps its store's index.
type countingStore struct {
	*layertest.Counting
	layer.HealStore
}

func newCluster(t *testing.T, n int, arbiter bool) *cluster {
	t.Helper()
	c := &cluster{t: t}
	for i := range n {
		c.up = append(c.up, new(atomic.Bool))
		c.up[i].Store(true)
		c.stores = append(c.stores, nil)
		c.dirs = append(c.dirs, "")
		c.counts = append(c.counts, nil)
		c.set = append(c.set, Replica{Name: fmt.Sprintf("host:/brick%d", i), Up: c.up[i].Load})
		c.set[i].Arbiter = arbiter && i == n-1
		c.replace(i)
	}
	return c
}

// replace gives replica i a new, empty brick (a wiped or replaced disk).
func (c *cluster) replace(i int) {
	c.t.Helper()
	dir := c.t.TempDir()
	if err := posix.Mark(dir, testVolume, true); err != nil {
		c.t.Fatal(err)
	}
	s, err := posix.New(dir, posix.Options{VolumeID: testVolume, Arbiter: c.set[i].Arbiter})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { s.Close() })
	c.stores[i], c.dirs[i] = s, dir
	c.counts[i] = layertest.NewCounting(s)
	c.set[i].Layer = countingStore{c.counts[i], s}
}

func (c *cluster) healer(opts Options) *Healer {
	c.t.Helper()
	if opts.Logger == nil && os.Getenv("MORTAR_HEAL_TEST_LOG") != "" {
		opts.Logger = failLog(c.t)
	}
	h, err := New([]Set{c.set}, opts)
	if err != nil {
		c.t.Fatal(err)
	}
	return h
}

// on runs op on the replicas in who, telling them the others miss it
// (what replicate does while the others are away).
func (c *cluster) on(who []int, op func(ctx context.Context, l layer.Layer) error) {
	c.t.Helper()
	var doers uint64
	for _, i := range who {
		doers |= 1 << uint(i)
	}
	all := uint64(1)<<uint(len(c.set)) - 1
	ctx := layer.WithTxn(bg, layer.Txn{Pending: all &^ doers})
	for _, i := range who {
		if err := op(ctx, c.stores[i]); err != nil {
			c.t.Fatalf("on replica %d: %v", i, err)
		}
	}
}

// everywhere runs op on every replica.
func (c *cluster) everywhere(op func(ctx context.Context, l layer.Layer) error) {
	c.t.Helper()
	who := make([]int, len(c.set))
	for i := range who {
		who[i] = i
	}
	c.on(who, op)
}

// without2 runs op on replicas 0 and 1: replica 2 misses it.
func (c *cluster) without2(op func(ctx context.Context, l layer.Layer) error) {
	c.t.Helper()
	c.on([]int{0, 1}, op)
}

// indexed returns how many entries the heal indexes list.
func (c *cluster) indexed() int {
	c.t.Helper()
	n := 0
	for _, s := range c.stores {
		e, err := s.HealIndex(bg, layer.Gfid{}, 1<<20)
		if err != nil {
			c.t.Fatal(err)
		}
		n += len(e)
	}
	return n
}

// healthy fails the test unless every replica holds the same tree and no
// heal index lists anything.
func (c *cluster) healthy() {
	c.t.Helper()
	if err := CompareSet(bg, c.set, "/"); err != nil {
		c.t.Fatal(err)
	}
	for i, s := range c.stores {
		e, err := s.HealIndex(bg, layer.Gfid{}, 100)
		if err != nil {
			c.t.Fatal(err)
		}
		if len(e) > 0 {
			c.t.Fatalf("replica %d still lists %d entries, first %s %s pending %b",
				i, len(e), e[0].Path, e[0].Gfid, e[0].Pending)
		}
	}
}

// pending returns the marks of path on replica i.
func (c *cluster) pending(i int, path string) uint64 {
	c.t.Helper()
	a, err := c.stores[i].Lookup(bg, path)
	if err != nil {
		c.t.Fatal(err)
	}
	return a.Pending
}

// content returns the data of path on replica i.
func (c *cluster) content(i int, path string) []byte {
	c.t.Helper()
	f, err := c.stores[i].Open(bg, path, syscall.O_RDONLY)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Release(bg)
	var out []byte
	buf := make([]byte, 1<<20)
	for off := int64(0); ; {
		n, err := f.Read(bg, buf, off)
		if err != nil {
			c.t.Fatal(err)
		}
		out = append(out, buf[:n]...)
		off += int64(n)
		if n < len(buf) {
			return out
		}
	}
}

// scan heals everything the indexes list and waits, and scans again
// while they list something (at most 5 scans), as Run does after a heal
// kept marks (names it changed on a sink are looked at again; a copy
// changed while it healed).
func scan(h *Healer) {
	for range 5 {
		var wg sync.WaitGroup
		h.scan(bg, &wg)
		wg.Wait()
		if !listed(h) {
			return
		}
	}
}

// listed reports whether some heal index of h lists an entry.
func listed(h *Healer) bool {
	for _, set := range h.stores {
		for _, s := range set {
			if e, err := s.HealIndex(bg, layer.Gfid{}, 1); err == nil && len(e) > 0 {
				return true
			}
		}
	}
	return false
}

// scanSettled scans as Run does after a heal kept marks (a directory
// stale names were removed from is looked at again), until the indexes
// list nothing, at most 3 times.
func (c *cluster) scanSettled(h *Healer) {
	for range 3 {
		scan(h)
		if c.indexed() == 0 {
			return
		}
	}
}

// Operations as replicate sends them: the same gfid to every replica.

func mkdir(path string, g layer.Gfid) func(context.Context, layer.Layer) error {
	return func(ctx context.Context, l layer.Layer) error {
		_, err := l.Mkdir(ctx, path, layer.MkdirIn{Owner: layer.Owner{Gfid: g}, Mode: 0o755})
		return err
	}
}

func create(path string, g layer.Gfid, data []byte) func(context.Context, layer.Layer) error {
	return func(ctx context.Context, l layer.Layer) error {
		f, _, err := l.Create(ctx, path, layer.CreateIn{
			Owner: layer.Owner{Gfid: g}, Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644,
		})
		if err != nil {
			return err
		}
		defer f.Release(ctx)
		_, err = f.Write(ctx, data, 0)
		return err
	}
}

func write(path string, data []byte, off int64) func(context.Context, layer.Layer) error {
	return func(ctx context.Context, l layer.Layer) error {
		f, err := l.Open(ctx, path, syscall.O_RDWR)
		if err != nil {
			return err
		}
		defer f.Release(ctx)
		_, err = f.Write(ctx, data, off)
		return err
	}
}

func setattr(path string, in layer.SetattrIn) func(context.Context, layer.Layer) error {
	return func(ctx context.Context, l layer.Layer) error {
		_, err := l.Setattr(ctx, path, in)
		return err
	}
}

// removeTree removes path and what is under it, as rm -rf through
// replicate would.
func removeTree(path string) func(context.Context, layer.Layer) error {
	return func(ctx context.Context, l layer.Layer) error {
		a, err := l.Lookup(ctx, path)
		if err != nil {
			return err
		}
		return removeAll(ctx, l, path, a)
	}
}

func unlink(path string) func(context.Context, layer.Layer) error {
	return func(ctx context.Context, l layer.Layer) error { return l.Unlink(ctx, path) }
}

// seq runs ops in order.
func seq(ops ...func(context.Context, layer.Layer) error) func(context.Context, layer.Layer) error {
	return func(ctx context.Context, l layer.Layer) error {
		for _, op := range ops {
			if err := op(ctx, l); err != nil {
				return err
			}
		}
		return nil
	}
}

// pattern returns n bytes that differ with seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("heal tests need root (trusted xattrs, chown, mknod)")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// sameBytes fails unless got equals want.
func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, want %d (first bytes %q vs %q)", what, len(got), len(want),
			got[:min(len(got), 16)], want[:min(len(want), 16)])
	}
}

// failLog returns a debug logger whose records t prints if it fails
// (a heal test that fails once in hundreds of runs says what heal did);
// the harness's healers use it with MORTAR_HEAL_TEST_LOG=1 (it slows
// them, and changes how their heals interleave).
func failLog(t *testing.T) *slog.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("the healer's log:\n%s", buf.String())
			mu.Unlock()
		}
	})
	return slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
