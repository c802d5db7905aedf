package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/volume"
)

// Config is one run.
type Config struct {
	Seed  uint64
	Steps int
	// Dir holds the bricks' directories (a fresh, empty directory).
	Dir string
	// Clients is how many mounts run operations (default 3).
	Clients int
	// Bricks is how many bricks the volume has (default 6); Replica
	// (default 3) or Disperse and Redundancy give its sets.
	Bricks                        int
	Replica, Disperse, Redundancy int
	// Trace, if set, is told every step as it runs.
	Trace func(string)
	// NoFinish stops after the steps, faults and all, for a look at the
	// bricks as they were before heal.
	NoFinish bool
	// FullDisks adds faults that fill a brick's disk (it refuses new data
	// and inodes with ENOSPC) and free it again. Off, a seed runs the
	// steps it ran before they existed.
	FullDisks bool
	// Grow starts the volume with its last set just added (in no range
	// of the layout) and adds rebalance steps among the faults: the
	// layout that gives it a share, clients moving to it, the files moved
	// a directory at a time (rebalance.go).
	Grow bool
	// Shrink is Grow's opposite, a remove-brick: the rebalance steps take
	// the last set out of the layout, move its files to the others, and
	// remove it from the volume (rebalance.go).
	Shrink bool
	// DirRenames adds steps that rename a directory and back, the
	// client dying in the middle half of the time (renamedir.go). Off, a
	// seed runs the steps it ran before they existed.
	DirRenames bool
}

func (c *Config) setDefaults() {
	c.Clients = max(c.Clients, 1)
	if c.Bricks == 0 {
		c.Bricks = 6
	}
	if c.Disperse == 0 && c.Replica == 0 {
		c.Replica = 3
	}
}

// Report counts what a run did.
type Report struct {
	Ops, Faults map[string]int
	// Failed is how many operations failed (as faults allow).
	Failed int
	// Unmarked, if not empty, is a difference between copies that the
	// index heal left (nothing marked it) and a full heal repaired.
	Unmarked string
	// History is every step and its outcome, in order (the trace without
	// times): a seed replays it (TestSimReplays).
	History []string
}

// run is one run under way.
type run struct {
	cfg    Config
	rng    *rand.Rand
	w      *world
	m      *model
	rep    Report
	began  time.Time
	step   int
	trace  []string
	paths  []string
	setLen int
	moved  []*movedDir // directories a failed rename left under either name (renamedir.go)
}

// opTimeout bounds one operation: an operation that takes longer hangs.
const opTimeout = 30 * time.Second

// Run runs cfg: it builds the volume, runs cfg.Steps random steps, lifts
// every fault, heals, and checks the volume against the model. The error
// is a violation (or a failure to set the run up), with the seed and the
// last steps.
func Run(cfg Config) (rep Report, err error) {
	cfg.setDefaults()
	r := &run{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), m: newModel(),
		rep: Report{Ops: map[string]int{}, Faults: map[string]int{}}, began: time.Now()}
	if r.w, err = newWorld(cfg, cfg.Dir); err != nil {
		return r.rep, err
	}
	defer r.w.close()
	r.setLen = r.w.spec.SetSize()
	defer func() {
		if err != nil {
			err = fmt.Errorf("seed %d, step %d: %w\nlast steps:\n%s", cfg.Seed, r.step, err, strings.Join(r.trace, "\n"))
		}
	}()
	if err = r.setup(); err != nil {
		return r.rep, err
	}
	for r.step = 1; r.step <= cfg.Steps; r.step++ {
		if err = r.once(); err != nil {
			return r.rep, err
		}
	}
	if cfg.NoFinish {
		return r.rep, nil
	}
	return r.rep, r.finish()
}

// note records a step in the trace (the last 40 are kept for a report).
func (r *run) note(format string, args ...any) {
	s := fmt.Sprintf("%4d ", r.step) + fmt.Sprintf(format, args...)
	if r.cfg.Trace != nil {
		r.cfg.Trace(fmt.Sprintf("%8.3fs %s", time.Since(r.began).Seconds(), s))
	}
	r.rep.History = append(r.rep.History, s)
	r.trace = append(r.trace, s)
	if len(r.trace) > 40 {
		r.trace = r.trace[1:]
	}
}

// setup makes the directories the files live in.
func (r *run) setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for d := range 3 {
		dir := fmt.Sprintf("/d%d", d)
		if _, err := r.w.clients[0].graph.Top.Mkdir(ctx, dir, layer.MkdirIn{Mode: 0o755}); err != nil {
			return err
		}
		for f := range 6 {
			r.paths = append(r.paths, fmt.Sprintf("%s/f%d", dir, f))
		}
	}
	return nil
}

// once runs one random step.
func (r *run) once() error {
	n := r.rng.IntN(100)
	switch {
	case n < 8:
		return r.fault()
	case n < 30:
		return r.put()
	case n < 40:
		return r.pwrite()
	case n < 44:
		return r.truncate()
	case n < 52:
		return r.unlink()
	case n < 60:
		return r.rename()
	case n < 63 && r.cfg.DirRenames:
		return r.renameDir()
	case n < 66:
		return r.session()
	case n < 90:
		return r.read()
	default:
		return r.list()
	}
}

// client picks a client.
func (r *run) client() (int, layer.Layer) {
	i := r.rng.IntN(len(r.w.clients))
	return i, r.w.clients[i].graph.Top
}

// free picks a path no client holds open.
func (r *run) free() string {
	for {
		p := r.paths[r.rng.IntN(len(r.paths))]
		if !r.heldOpen(p) {
			return p
		}
	}
}

func (r *run) heldOpen(p string) bool {
	for _, c := range r.w.clients {
		for _, f := range c.open {
			if f.path == p {
				return true
			}
		}
	}
	return false
}

// data makes n random bytes (mostly small files, sometimes several
// chunks of heal's 1 MiB... kept under 300 KiB for speed).
func (r *run) data() []byte {
	n := r.rng.IntN(8 << 10)
	if r.rng.IntN(10) == 0 {
		n = 64<<10 + r.rng.IntN(256<<10)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.rng.Uint32())
	}
	return b
}

// changed applies an operation's outcome to the model: done, it is
// what the client was told; failed, the paths are in doubt, unless the
// failure says nothing was changed (EROFS from a replicated volume: no
// quorum, nothing sent; the callers doubt what an earlier request of
// the operation changed).
func (r *run) changed(op string, err error, apply func(), paths ...string) error {
	r.rep.Ops[op]++
	if err != nil {
		r.note("  -> %v", err)
	}
	if !errors.Is(err, syscall.ENOENT) { // ENOENT: under a moved directory, nothing done
		r.learnt(paths...)
	}
	switch {
	case err == nil:
		apply()
	case errors.Is(err, context.DeadlineExceeded):
		return violated("%s %v hung for %v", op, paths, opTimeout)
	case !unavailable(err) && !r.allowed(op, err, paths):
		return violated("%s %v: %v", op, paths, err)
	default:
		r.rep.Failed++
		if !(errors.Is(err, syscall.EROFS) && r.w.spec.Type == volume.Replicate) {
			r.m.doubt(paths...)
		}
	}
	return nil
}

// allowed reports whether an error other than unavailability is what the
// model expects: ENOENT for a file it knows does not exist, ENOSPC while
// a brick's disk is full.
func (r *run) allowed(op string, err error, paths []string) bool {
	if errors.Is(err, syscall.ENOSPC) && r.w.anyFull() {
		return true
	}
	if len(paths) == 0 {
		return false
	}
	for _, p := range paths {
		if errors.Is(err, syscall.ENOENT) && r.movedOf(p) != nil {
			return true // its directory may be under its other name
		}
	}
	exists, known := r.m.known(paths[0])
	return !known || (!exists && errors.Is(err, syscall.ENOENT))
}

func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// put writes a whole file: create (truncating), write, release.
func (r *run) put() error {
	c, top := r.client()
	p, data := r.free(), r.data()
	r.note("client %d put %s (%d bytes)", c, p, len(data))
	created, err := putFile(top, p, data)
	if created && err != nil {
		r.m.doubt(p) // truncated, then failed: whatever the error says
	}
	return r.changed("put", err, func() { r.m.set(p, data) }, p)
}

// putFile writes a whole file; created says whether its create (which
// truncates it) was done, whatever happened next.
func putFile(top layer.Layer, p string, data []byte) (created bool, err error) {
	ctx, cancel := opCtx()
	defer cancel()
	f, _, err := top.Create(ctx, p, layer.CreateIn{Flags: syscall.O_WRONLY | syscall.O_TRUNC, Mode: 0o644})
	if err != nil {
		return false, err
	}
	if len(data) > 0 {
		_, err = f.Write(ctx, data, 0)
	}
	return true, errors.Join(err, f.Release(ctx))
}

// existing picks a free path the model knows exists ("" if none).
func (r *run) existing() string {
	var ps []string
	for _, p := range r.paths {
		if _, ok := r.m.files[p]; ok && !r.heldOpen(p) {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return ""
	}
	return ps[r.rng.IntN(len(ps))]
}

// pwrite writes into an existing file.
func (r *run) pwrite() error {
	p := r.existing()
	if p == "" {
		return r.put()
	}
	c, top := r.client()
	old := r.m.files[p]
	off, data := r.rng.IntN(len(old)+1), r.data()
	r.note("client %d pwrite %s at %d (%d bytes)", c, p, off, len(data))
	ctx, cancel := opCtx()
	defer cancel()
	f, err := top.Open(ctx, p, syscall.O_WRONLY)
	if err == nil {
		_, err = f.Write(ctx, data, int64(off))
		err = errors.Join(err, f.Release(ctx))
	}
	return r.changed("pwrite", err, func() { r.m.set(p, pwrite(old, data, off)) }, p)
}

func (r *run) truncate() error {
	p := r.existing()
	if p == "" {
		return r.put()
	}
	c, top := r.client()
	old := r.m.files[p]
	size := r.rng.IntN(len(old) + 4096)
	r.note("client %d truncate %s to %d", c, p, size)
	ctx, cancel := opCtx()
	defer cancel()
	_, err := top.Setattr(ctx, p, layer.SetattrIn{Valid: layer.SetSize, Size: uint64(size)})
	return r.changed("truncate", err, func() { r.m.set(p, truncated(old, size)) }, p)
}

func (r *run) unlink() error {
	c, top := r.client()
	p := r.free()
	r.note("client %d unlink %s", c, p)
	ctx, cancel := opCtx()
	defer cancel()
	err := top.Unlink(ctx, p)
	return r.changed("unlink", err, func() { r.m.remove(p) }, p)
}

func (r *run) rename() error {
	src := r.existing()
	if src == "" {
		return r.put()
	}
	dst := r.free()
	if dst == src {
		return nil
	}
	c, top := r.client()
	r.note("client %d rename %s %s", c, src, dst)
	ctx, cancel := opCtx()
	defer cancel()
	err := top.Rename(ctx, src, dst, 0)
	data := r.m.files[src]
	return r.changed("rename", err, func() { r.m.remove(src); r.m.set(dst, data) }, src, dst)
}

// read reads a file through a client and checks it against the model.
func (r *run) read() error {
	c, top := r.client()
	p := r.paths[r.rng.IntN(len(r.paths))]
	if r.heldOpen(p) {
		return nil
	}
	r.note("client %d read %s", c, p)
	r.rep.Ops["read"]++
	got, err := readFile(top, p)
	return r.check(p, got, err)
}

// check compares a read of p with the model.
func (r *run) check(p string, got []byte, err error) error {
	exists, known := r.m.known(p)
	switch {
	case !known:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return violated("read %s hung for %v", p, opTimeout)
	case err != nil && unavailable(err):
		r.rep.Failed++
		return nil
	case !exists && errors.Is(err, syscall.ENOENT):
		return nil
	case !exists:
		return violated("read %s: %d bytes, %v; the file was removed", p, len(got), err)
	case err != nil:
		return violated("read %s: %v; the file exists (%d bytes)", p, err, len(r.m.files[p]))
	case string(got) != string(r.m.files[p]):
		return violated("read %s: %d bytes, not the %d written (first difference at %d)", p, len(got), len(r.m.files[p]), firstDiff(got, r.m.files[p]))
	}
	return nil
}

func readFile(top layer.Layer, p string) ([]byte, error) {
	ctx, cancel := opCtx()
	defer cancel()
	f, err := top.Open(ctx, p, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Release(ctx)
	var out []byte
	buf := make([]byte, 128<<10)
	for off := int64(0); ; {
		n, err := f.Read(ctx, buf, off)
		if err != nil {
			return nil, err
		}
		out, off = append(out, buf[:n]...), off+int64(n)
		if n == 0 {
			return out, nil
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// list lists a directory and checks the names the model knows.
func (r *run) list() error {
	c, top := r.client()
	dir := fmt.Sprintf("/d%d", r.rng.IntN(3))
	r.note("client %d list %s", c, dir)
	r.rep.Ops["list"]++
	ctx, cancel := opCtx()
	defer cancel()
	ents, err := layer.ReadDirAll(ctx, top, dir)
	if err != nil {
		if unavailable(err) || errors.Is(err, syscall.ENOENT) && r.movedOf(dir+"/x") != nil {
			r.rep.Failed++
			return nil
		}
		return violated("list %s: %v", dir, err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, dir+"/"+e.Name)
	}
	return r.checkNames(dir, names)
}

// checkNames fails unless names (of dir) hold every file the model knows
// exists there and none it knows does not.
func (r *run) checkNames(dir string, names []string) error {
	for _, p := range r.paths {
		if !strings.HasPrefix(p, dir+"/") || r.heldOpen(p) {
			continue
		}
		exists, known := r.m.known(p)
		if known && exists != slices.Contains(names, p) {
			return violated("list %s: %s listed %v, but it exists %v", dir, p, !exists, exists)
		}
	}
	return nil
}
