package volume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// Live is a layer over the graph of a volume's current spec, which a
// client (a FUSE mount, the client library) keeps for its whole life while
// the volume changes: Swap builds the graph of a new spec and moves new
// operations to it, and Follow swaps to every new spec a management node
// publishes.
//
// # Old graphs
//
// Operations in flight and files open on a graph when it is replaced finish
// there: a File keeps working on the graph that opened it, with its locks,
// until Release. A graph counts its users — one reference while it is the
// current graph, one per operation in flight and one per open file — and
// is closed (its connections and goroutines freed) when the count drops to
// zero: by the Swap that replaces it if nothing uses it, else by the last
// operation or Release.
//
// Inodes are named by path and numbered from gfids, which do not depend on
// the graph, so what a caller keeps (the FUSE bridge's node table and
// directory snapshots) stays valid across swaps.
type Live struct {
	cfg liveConfig
	log *slog.Logger
	cur atomic.Pointer[liveGraph] // nil once closed

	swapMu sync.Mutex // serialises Swap and Close
	closed bool       // under swapMu

	mu     sync.Mutex
	graphs map[*liveGraph]struct{} // every graph not closed yet
}

var _ layer.Layer = (*Live)(nil)

// ErrLiveClosed is returned by Swap and Follow once the Live is closed.
var ErrLiveClosed = errors.New("volume graph is closed")

// DefaultConnectWait bounds how long Swap waits for a new graph to reach
// the bricks the old one was connected to.
const DefaultConnectWait = 5 * time.Second

type liveConfig struct {
	build       BuildOptions
	log         *slog.Logger
	connectWait time.Duration
	onClose     func(Spec)
}

// LiveOption tunes a Live.
type LiveOption func(*liveConfig)

// WithBuildOptions makes Swap build new graphs with o (pass the options
// the first graph was built with). Its Logger is the Live's too, unless
// WithLogger says otherwise.
func WithBuildOptions(o BuildOptions) LiveOption {
	return func(c *liveConfig) { c.build = o }
}

// WithLogger sets where the Live logs its swaps.
func WithLogger(log *slog.Logger) LiveOption {
	return func(c *liveConfig) { c.log = log }
}

// WithConnectWait sets how long Swap waits for the new graph to reach the
// bricks the old one was connected to (default DefaultConnectWait); past
// it, Swap switches anyway.
func WithConnectWait(d time.Duration) LiveOption {
	return func(c *liveConfig) { c.connectWait = d }
}

// WithGraphClosed calls fn with a graph's spec after the graph is closed
// (for metrics and tests). fn must not call into the Live.
func WithGraphClosed(fn func(Spec)) LiveOption {
	return func(c *liveConfig) { c.onClose = fn }
}

// NewLive returns a Live whose current graph is g; the Live owns g from
// now on (Close closes it).
func NewLive(g *Graph, opts ...LiveOption) *Live {
	cfg := liveConfig{connectWait: DefaultConnectWait}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.log == nil {
		cfg.log = cfg.build.Logger
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	cfg.build.windows = g.windows // every graph's write-behind sends every graph's windows
	l := &Live{cfg: cfg, log: cfg.log, graphs: map[*liveGraph]struct{}{}}
	l.cur.Store(l.track(g))
	return l
}

// liveGraph is a graph with its count of users.
type liveGraph struct {
	l    *Live
	g    *Graph
	refs atomic.Int64
	once sync.Once
}

// track makes g a graph of l, with the reference of the current graph.
func (l *Live) track(g *Graph) *liveGraph {
	lg := &liveGraph{l: l, g: g}
	lg.refs.Store(1)
	l.mu.Lock()
	l.graphs[lg] = struct{}{}
	l.mu.Unlock()
	return lg
}

// tryRef takes a reference unless the graph is already unused (and so
// closed or being closed).
func (lg *liveGraph) tryRef() bool {
	for {
		n := lg.refs.Load()
		if n <= 0 {
			return false
		}
		if lg.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// unref drops a reference, closing the graph with the last.
func (lg *liveGraph) unref() {
	if lg.refs.Add(-1) == 0 {
		lg.close()
	}
}

// close closes the graph once.
func (lg *liveGraph) close() {
	lg.once.Do(func() {
		if err := lg.g.Close(); err != nil {
			lg.l.log.Warn("closing an old volume graph", "version", lg.g.Spec.Version, "err", err)
		}
		lg.l.mu.Lock()
		delete(lg.l.graphs, lg)
		lg.l.mu.Unlock()
		lg.l.log.Debug("volume graph closed", "volume", lg.g.Spec.Name, "version", lg.g.Spec.Version)
		if lg.l.cfg.onClose != nil {
			lg.l.cfg.onClose(lg.g.Spec)
		}
	})
}

// acquire returns the current graph with a reference for one operation.
func (l *Live) acquire() (*liveGraph, error) {
	for {
		lg := l.cur.Load()
		if lg == nil {
			return nil, syscall.ENOTCONN
		}
		if lg.tryRef() {
			return lg, nil
		}
		// Swapped out and released since the load: the next load sees
		// its successor.
	}
}

// Spec returns (a copy of) the spec of the current graph.
func (l *Live) Spec() Spec {
	lg, err := l.acquire()
	if err != nil {
		return Spec{}
	}
	defer lg.unref()
	s := lg.g.Spec
	s.Bricks, s.Options = slices.Clone(s.Bricks), maps.Clone(s.Options)
	return s
}

// Version returns the version of the current graph's spec (0 once closed).
func (l *Live) Version() uint64 { return l.Spec().Version }

// Connected reports whether the current graph is connected to every brick.
func (l *Live) Connected() bool {
	lg, err := l.acquire()
	if err != nil {
		return false
	}
	defer lg.unref()
	return lg.g.Connected()
}

// Graphs returns how many graphs are not closed yet: the current one and
// the old ones still in use.
func (l *Live) Graphs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.graphs)
}

// Swap builds the graph of spec, waits (at most the connect wait) until
// it reaches the bricks the current graph is connected to, and makes it
// the current graph. spec must be of the same volume (same ID). On error
// the current graph stays.
func (l *Live) Swap(spec Spec) error {
	l.swapMu.Lock()
	defer l.swapMu.Unlock()
	if l.closed {
		return ErrLiveClosed
	}
	old := l.cur.Load()
	if spec.ID != old.g.Spec.ID {
		return fmt.Errorf("volume %s: new spec is of another volume (id %s, not %s): it was deleted and created again; mount it again",
			old.g.Spec.Name, spec.ID, old.g.Spec.ID)
	}
	g, err := Build(spec, l.cfg.build)
	if err != nil {
		return err
	}
	start := time.Now()
	missing := l.waitConnected(old.g, g)
	l.cur.Store(l.track(g))
	l.sendHeld(old.g)
	old.unref()
	l.log.Info("volume graph switched", "volume", spec.Name,
		"old_version", old.g.Spec.Version, "new_version", spec.Version,
		"changes", specChanges(old.g.Spec, spec), "connect_wait", time.Since(start).Round(time.Millisecond))
	if len(missing) > 0 {
		l.log.Warn("new volume graph not connected to every brick the old one was", "volume", spec.Name, "bricks", missing)
	}
	return nil
}

// sendHeld sends, on the graph just replaced, the creates it holds back
// (create-behind), at most the connect wait: the client reports the new
// spec once Swap returns, and the cluster may then fence the old graph's
// layout off (wire.ChallengeSize), which would refuse them. Files open on
// the old graph keep writing there; their creates are made.
func (l *Live) sendHeld(old *Graph) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.connectWait)
	defer cancel()
	old.windows.Send(ctx) // errors stay with their files (not layer.Sync, which takes them)
}

// waitConnected waits until g is connected to the bricks old is connected
// to (by brick id; a brick with a new address counts as the same brick),
// at most the connect wait, and returns those it is not connected to.
func (l *Live) waitConnected(old, g *Graph) []string {
	want := connectedBricks(old)
	var missing []string
	check := func() bool {
		missing = missing[:0]
		now := connectedBricks(g)
		for id, name := range want {
			if _, ok := now[id]; !ok && slices.ContainsFunc(g.Spec.Bricks, func(b Brick) bool { return b.ID == id }) {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0
	}
	if check() {
		return nil
	}
	// protocol.Client has no way to wait for its connection: poll.
	deadline := time.NewTimer(l.cfg.connectWait)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			check()
			slices.Sort(missing)
			return missing
		case <-tick.C:
			if check() {
				return nil
			}
		}
	}
}

// connectedBricks returns the ids (and names) of the bricks g is
// connected to. Build makes one client per brick in spec order.
func connectedBricks(g *Graph) map[string]string {
	out := map[string]string{}
	if len(g.clients) != len(g.Spec.Bricks) {
		if g.Connected() {
			for _, b := range g.Spec.Bricks {
				out[b.ID] = b.Name()
			}
		}
		return out
	}
	for i, c := range g.clients {
		if c.Connected() {
			out[g.Spec.Bricks[i].ID] = g.Spec.Bricks[i].Name()
		}
	}
	return out
}

// Close closes every graph of l, including old ones that files still
// hold open (their operations then fail); operations after Close fail
// with ENOTCONN.
func (l *Live) Close() error {
	l.swapMu.Lock()
	defer l.swapMu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if cur := l.cur.Swap(nil); cur != nil {
		cur.unref()
	}
	l.mu.Lock()
	left := slices.Collect(maps.Keys(l.graphs))
	l.mu.Unlock()
	for _, lg := range left {
		lg.close()
	}
	return nil
}

// Follow keeps l on the latest spec of its volume until ctx is done or l
// is closed: it calls watch with the version it runs, which returns a
// newer spec when there is one (or, after a while, the same), and swaps to
// every newer spec. Errors from watch — the management node down, the
// volume stopped — are retried with backoff while l keeps its graph; a
// spec that cannot be built is logged and skipped.
func (l *Live) Follow(ctx context.Context, watch func(ctx context.Context, after uint64) (Spec, error)) error {
	f := follower{l: l, after: l.Version(), backoff: followBackoffMin}
	for ctx.Err() == nil {
		start := time.Now()
		spec, err := watch(ctx, f.after)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			f.failed(err)
			sleepCtx(ctx, f.backoff)
			f.backoff = min(2*f.backoff, followBackoffMax)
			continue
		}
		f.recovered()
		if spec.Version <= f.after {
			// No change within the server's wait. An answer that came
			// at once is a server that does not wait: do not spin.
			if time.Since(start) < followMinInterval {
				sleepCtx(ctx, followMinInterval)
			}
			continue
		}
		switch err := l.Swap(spec); {
		case errors.Is(err, ErrLiveClosed):
			return err
		case err != nil:
			// Tried again (the spec as it is then) after a pause: a client
			// left on its old graph would be fenced off its layout after
			// a rebalance.
			l.log.Error("cannot switch to the volume's new spec; keeping the current graph",
				"volume", spec.Name, "version", spec.Version, "err", err)
			f.swapWait = min(max(2*f.swapWait, followBackoffMin), followBackoffMax)
			sleepCtx(ctx, f.swapWait)
			continue
		}
		f.after, f.swapWait = spec.Version, 0
	}
	return ctx.Err()
}

// How Follow paces its watches (variables for tests): the backoff after
// a failed watch, and the least time between two watches that saw no
// change.
var (
	followBackoffMin  = 250 * time.Millisecond
	followBackoffMax  = 10 * time.Second
	followMinInterval = time.Second
)

// follower is the state of a Follow loop.
type follower struct {
	l       *Live
	after   uint64
	backoff time.Duration
	failing string // the last error, while watching fails
	// swapWait is the pause before building a spec that failed to build
	// again (0: none failed).
	swapWait time.Duration
}

// failed logs a failed watch: at warning level once per new error.
func (f *follower) failed(err error) {
	msg := err.Error()
	if msg != f.failing {
		f.l.log.Warn("cannot watch the volume's spec; the mount goes on with its current graph", "version", f.after, "err", err)
	} else {
		f.l.log.Debug("cannot watch the volume's spec", "err", err)
	}
	f.failing = msg
}

// recovered notes a watch that worked after failures.
func (f *follower) recovered() {
	if f.failing != "" {
		f.l.log.Info("watching the volume's spec again", "version", f.after)
	}
	f.failing, f.backoff = "", followBackoffMin
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// specChanges describes what changed from old to new, for the log.
func specChanges(old, new Spec) []string {
	var out []string
	if old.Type != new.Type || old.Replica != new.Replica || old.Disperse != new.Disperse || old.Redundancy != new.Redundancy {
		out = append(out, fmt.Sprintf("layout %s → %s", layout(old), layout(new)))
	}
	before := map[string]Brick{}
	for _, b := range old.Bricks {
		before[b.ID] = b
	}
	after := map[string]bool{}
	for _, b := range new.Bricks {
		after[b.ID] = true
		switch o, ok := before[b.ID]; {
		case !ok:
			out = append(out, "brick added "+b.Name())
		case o.Name() != b.Name():
			out = append(out, fmt.Sprintf("brick replaced %s → %s", o.Name(), b.Name()))
		case o.Addr != b.Addr:
			out = append(out, fmt.Sprintf("brick %s moved %s → %s", b.Name(), o.Addr, b.Addr))
		}
	}
	for _, b := range old.Bricks {
		if !after[b.ID] {
			out = append(out, "brick removed "+b.Name())
		}
	}
	keys := slices.Sorted(maps.Keys(new.Options))
	for _, k := range keys {
		if v, ok := old.Options[k]; !ok || v != new.Options[k] {
			out = append(out, fmt.Sprintf("option %s=%s", k, new.Options[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(old.Options)) {
		if _, ok := new.Options[k]; !ok {
			out = append(out, "option "+k+" reset")
		}
	}
	return out
}

func layout(s Spec) string {
	switch s.Type {
	case Replicate:
		return fmt.Sprintf("%s %d", s.Type, s.Replica)
	case Disperse:
		return fmt.Sprintf("%s %d redundancy %d", s.Type, s.Disperse, s.Redundancy)
	}
	return s.Type
}

// The operations run on the current graph, holding it while they run.

func (l *Live) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	lg, err := l.acquire()
	if err != nil {
		return layer.Attr{}, err
	}
	defer lg.unref()
	return lg.g.Top.Lookup(ctx, path)
}

func (l *Live) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	lg, err := l.acquire()
	if err != nil {
		return layer.Attr{}, err
	}
	defer lg.unref()
	return lg.g.Top.Setattr(ctx, path, in)
}

func (l *Live) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	return makeName(l, func(top layer.Layer) (layer.Attr, error) { return top.Mknod(ctx, path, in) })
}

func (l *Live) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	return makeName(l, func(top layer.Layer) (layer.Attr, error) { return top.Mkdir(ctx, path, in) })
}

func (l *Live) Symlink(ctx context.Context, path string, in layer.SymlinkIn) (layer.Attr, error) {
	return makeName(l, func(top layer.Layer) (layer.Attr, error) { return top.Symlink(ctx, path, in) })
}

func (l *Live) Readlink(ctx context.Context, path string) (string, error) {
	lg, err := l.acquire()
	if err != nil {
		return "", err
	}
	defer lg.unref()
	return lg.g.Top.Readlink(ctx, path)
}

func (l *Live) Unlink(ctx context.Context, path string) error {
	lg, err := l.acquire()
	if err != nil {
		return err
	}
	defer lg.unref()
	return lg.g.Top.Unlink(ctx, path)
}

func (l *Live) Rmdir(ctx context.Context, path string) error {
	lg, err := l.acquire()
	if err != nil {
		return err
	}
	defer lg.unref()
	return lg.g.Top.Rmdir(ctx, path)
}

func (l *Live) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	_, err := makeName(l, func(top layer.Layer) (struct{}, error) {
		return struct{}{}, top.Rename(ctx, oldpath, newpath, flags)
	})
	return err
}

func (l *Live) Link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	return makeName(l, func(top layer.Layer) (layer.Attr, error) { return top.Link(ctx, oldpath, newpath) })
}

// Create opens the new file on the current graph, which it holds until
// Release.
func (l *Live) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	var a layer.Attr
	f, err := makeNameHeld(l, func(lg *liveGraph) (layer.File, error) {
		f, made, err := lg.g.Top.Create(ctx, path, in)
		a = made
		if err != nil {
			lg.unref()
			return nil, err
		}
		return &liveFile{File: f, lg: lg}, nil // the operation's reference is the file's
	})
	return f, a, err
}

// makeName runs op, an operation that makes a name, on the current graph
// (see makeNameHeld).
func makeName[T any](l *Live, op func(top layer.Layer) (T, error)) (T, error) {
	return makeNameHeld(l, func(lg *liveGraph) (T, error) {
		defer lg.unref()
		return op(lg.g.Top)
	})
}

// makeNameHeld runs op, an operation that makes a name, on the current
// graph, handing it the graph's reference (op releases it or keeps it
// for what it returns). Fenced there (layer.ErrFenced: the bricks admit
// only a layout newer than the graph's, the operation made nothing), op
// runs once more on the graph that replaced it. With none, or fenced
// again, it fails with EIO: the client runs a layout the volume has
// left, most likely cut off from the management nodes that would give it
// the new one, and names it made would be lost behind a rebalance.
func makeNameHeld[T any](l *Live, op func(lg *liveGraph) (T, error)) (T, error) {
	var fenced *liveGraph
	for {
		lg, err := l.acquire()
		if err != nil {
			var zero T
			return zero, err
		}
		if lg == fenced {
			lg.unref()
			break
		}
		v, err := op(lg)
		if !errors.Is(err, layer.ErrFenced) {
			return v, err
		}
		if fenced != nil {
			break
		}
		fenced = lg
	}
	l.log.Error("the bricks refuse this client's new names: it runs an older layout than the volume's; is it cut off from the management nodes?",
		"volume", fenced.g.Spec.Name, "spec_version", fenced.g.Spec.Version)
	var zero T
	return zero, syscall.EIO
}

// Open opens the file on the current graph, which it holds until Release.
func (l *Live) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	lg, err := l.acquire()
	if err != nil {
		return nil, err
	}
	f, err := lg.g.Top.Open(ctx, path, flags)
	if err != nil {
		lg.unref()
		return nil, err
	}
	return &liveFile{File: f, lg: lg}, nil
}

func (l *Live) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	lg, err := l.acquire()
	if err != nil {
		return layer.DirPage{}, err
	}
	defer lg.unref()
	return lg.g.Top.Readdir(ctx, path, cookie, max)
}

func (l *Live) Statfs(ctx context.Context, path string) (layer.Statfs, error) {
	lg, err := l.acquire()
	if err != nil {
		return layer.Statfs{}, err
	}
	defer lg.unref()
	return lg.g.Top.Statfs(ctx, path)
}

func (l *Live) Getxattr(ctx context.Context, path, name string) ([]byte, error) {
	lg, err := l.acquire()
	if err != nil {
		return nil, err
	}
	defer lg.unref()
	return lg.g.Top.Getxattr(ctx, path, name)
}

func (l *Live) Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	lg, err := l.acquire()
	if err != nil {
		return err
	}
	defer lg.unref()
	return lg.g.Top.Setxattr(ctx, path, name, value, flags)
}

func (l *Live) Listxattr(ctx context.Context, path string) ([]string, error) {
	lg, err := l.acquire()
	if err != nil {
		return nil, err
	}
	defer lg.unref()
	return lg.g.Top.Listxattr(ctx, path)
}

func (l *Live) Removexattr(ctx context.Context, path, name string) error {
	lg, err := l.acquire()
	if err != nil {
		return err
	}
	defer lg.unref()
	return lg.g.Top.Removexattr(ctx, path, name)
}

// liveFile is a file open on one graph of a Live, which it holds until
// Release.
type liveFile struct {
	layer.File
	lg       *liveGraph
	released atomic.Bool
}

func (f *liveFile) Release(ctx context.Context) error {
	err := f.File.Release(ctx)
	if f.released.CompareAndSwap(false, true) {
		f.lg.unref()
	}
	return err
}

// Sync sends what the current graph holds back (layer.Syncer).
func (l *Live) Sync(ctx context.Context) error {
	lg, err := l.acquire()
	if err != nil {
		return err
	}
	defer lg.unref()
	return layer.Sync(ctx, lg.g.Top)
}
