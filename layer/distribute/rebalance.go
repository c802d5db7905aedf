package distribute

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// RebalanceOptions tune a Rebalance.
type RebalanceOptions struct {
	// FixLayout only makes every directory on every child (the first
	// phase, before a child enters the layout); nothing is moved.
	FixLayout bool
	// Source, if set, limits the files moved to those whose data is on a
	// child it accepts: each node moves the files of its own bricks, in
	// parallel across nodes.
	Source func(childID string) bool
	// Workers is how many files are moved at once (default 4).
	Workers int
	// Resume is a checkpoint of an earlier run: the directories it had
	// finished are not done again.
	Resume string
	// Checkpoint, if set, is called after every directory with a
	// checkpoint to persist (for Resume).
	Checkpoint func(cp string)
	// Progress, if set, is called after every directory.
	Progress func(RebalanceStats)
}

// RebalanceStats count what a Rebalance did.
type RebalanceStats struct {
	Scanned  uint64 // non-directory entries looked at
	Moved    uint64 // files moved to their hashed child
	Skipped  uint64 // files left for a later run: kept changing, or a set not fully up
	Failed   uint64 // files that cannot be placed (see Errors)
	Bytes    uint64 // bytes of the files moved
	Dirs     uint64 // directories done
	Linked   uint64 // names left where their data is, with a pointer on the hashed child: of files with several names, or of a leaving child's pointers
	Pointers uint64 // stale pointer files removed
	DirsMade uint64 // directory copies made on children that lacked them
	Retries  uint64 // copies made again because the file changed while copied
	Errors   []string
}

// maxErrors bounds RebalanceStats.Errors.
const maxErrors = 20

// rebalancer is one run of Rebalance.
type rebalancer struct {
	d    *Distribute
	opts RebalanceOptions

	mu    sync.Mutex
	stats RebalanceStats
	links map[layer.Gfid]*linked // files with several names to move (links.go)
}

// Rebalance moves every file to the child the layout puts it on (see the
// package documentation, "Changing the layout"), while clients keep using
// the volume. It walks the directories depth first in name order; on
// error or when ctx is done it stops, having thawed what it froze, and
// returns what it did with the error. The checkpoints it reports make a
// later run (Resume) skip the directories done.
func (d *Distribute) Rebalance(ctx context.Context, opts RebalanceOptions) (RebalanceStats, error) {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	r := &rebalancer{d: d, opts: opts}
	err := r.walk(ctx, "/")
	if err == nil && !opts.FixLayout {
		r.moveLinked(ctx)
		err = ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stats
	st.Errors = slices.Clone(st.Errors)
	return st, err
}

// count applies fn to the stats.
func (r *rebalancer) count(fn func(st *RebalanceStats)) {
	r.mu.Lock()
	fn(&r.stats)
	r.mu.Unlock()
}

// fail counts a file that cannot be placed.
func (r *rebalancer) fail(path string, err error) {
	r.d.log.Warn("rebalance: file not placed", "path", path, "err", err)
	r.count(func(st *RebalanceStats) {
		st.Failed++
		if len(st.Errors) < maxErrors {
			st.Errors = append(st.Errors, path+": "+err.Error())
		}
	})
}

// source reports whether files whose data is on child c are this run's.
func (r *rebalancer) source(c int) bool {
	return r.opts.Source == nil || r.opts.Source(r.d.children[c].ID)
}

// walk does directory dir, then its subdirectories in name order.
func (r *rebalancer) walk(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	lists, err := r.list(ctx, dir)
	if errors.Is(err, errSplit) {
		// Under another name on some child (a directory rename left half
		// done into another parent): its files cannot be placed; the
		// failure keeps the previous layout (splitdir.go).
		r.fail(dir, err)
		return nil
	}
	if err != nil {
		return err
	}
	if r.opts.Resume == "" || comparePaths(dir, r.opts.Resume) > 0 {
		if !r.opts.FixLayout {
			r.placeFiles(ctx, dir, lists)
			r.keepPointers(ctx, dir, lists)
			r.dropPointers(ctx, dir, lists)
		}
		if err := ctx.Err(); err != nil {
			return err // the directory may not be finished
		}
		r.count(func(st *RebalanceStats) { st.Dirs++ })
		if r.opts.Checkpoint != nil {
			r.opts.Checkpoint(dir)
		}
		if r.opts.Progress != nil {
			r.mu.Lock()
			st := r.stats
			st.Errors = slices.Clone(st.Errors)
			r.mu.Unlock()
			r.opts.Progress(st)
		}
	}
	for _, name := range subdirs(lists) {
		p := layer.Join(dir, name)
		if r.opts.Resume != "" && comparePaths(p, r.opts.Resume) < 0 && !under(r.opts.Resume, p) {
			continue // the whole subtree comes before the checkpoint
		}
		if err := r.walk(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// comparePaths orders directories as walk visits them: depth first, each
// directory before its subdirectories, siblings by name.
func comparePaths(a, b string) int {
	split := func(p string) []string {
		if p == "/" {
			return nil
		}
		return strings.Split(p[1:], "/")
	}
	return slices.Compare(split(a), split(b))
}

// under reports whether p is inside directory dir.
func under(p, dir string) bool { return dir == "/" || strings.HasPrefix(p, dir+"/") }

// list reads directory dir on every child, making it on children that lack
// it (with the gfid, mode and owner it has elsewhere).
func (r *rebalancer) list(ctx context.Context, dir string) ([][]layer.Entry, error) {
	d := r.d
	lists := make([][]layer.Entry, len(d.children))
	errs := d.parallel(d.all(), func(i int) error {
		var err error
		lists[i], err = layer.ReadDirAll(ctx, d.child(i), dir)
		if !errors.Is(err, syscall.ENOENT) || dir == "/" {
			return err
		}
		if err := d.ensureDir(ctx, i, dir); err != nil {
			return err
		}
		r.count(func(st *RebalanceStats) { st.DirsMade++ })
		return nil // made empty
	})
	if err := firstErr(errs, -1); err != nil {
		return nil, fmt.Errorf("rebalance: list %s: %w", dir, err)
	}
	if d.splits(ctx, dir, lists) {
		return r.list(ctx, dir) // settled: listed again
	}
	return lists, nil
}

// subdirs returns the names of the directories in lists, sorted.
func subdirs(lists [][]layer.Entry) []string {
	var names []string
	for _, list := range lists {
		for _, e := range list {
			if e.Attr.IsDir() && !slices.Contains(names, e.Name) {
				names = append(names, e.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// work is one file to place: its data is on child c, its name hashes to h.
type work struct {
	path string
	c, h int
	attr layer.Attr
}

// placeFiles moves the files of directory dir that are not on their
// hashed child, Workers at a time.
func (r *rebalancer) placeFiles(ctx context.Context, dir string, lists [][]layer.Entry) {
	d := r.d
	var todo []work
	for c, list := range lists {
		if !r.source(c) {
			continue
		}
		for _, e := range list {
			if e.Attr.IsDir() || e.Attr.Linkto != "" || hidden(e.Name) {
				continue
			}
			r.count(func(st *RebalanceStats) { st.Scanned++ })
			p := layer.Join(dir, e.Name)
			if h := d.layout.owner(hashName(e.Name)); h != c {
				todo = append(todo, work{path: p, c: c, h: h, attr: e.Attr})
			}
		}
	}
	ch := make(chan work)
	var wg sync.WaitGroup
	for range min(r.opts.Workers, len(todo)) {
		wg.Go(func() {
			for w := range ch {
				r.place(ctx, w)
			}
		})
	}
	for _, w := range todo {
		if ctx.Err() != nil {
			break
		}
		ch <- w
	}
	close(ch)
	wg.Wait()
}

// hidden reports whether name is one of distribute's temporary names.
func hidden(name string) bool {
	return strings.HasPrefix(name, tmpPrefix) || strings.HasPrefix(name, migPrefix)
}

// place puts one file where its name hashes; a name of a file with
// several names on a child that leaves is gathered (links.go).
func (r *rebalancer) place(ctx context.Context, w work) {
	var err error
	switch {
	case w.attr.Nlink > 1 && w.attr.IsReg() && !r.d.layout.has(w.c):
		r.gather(w)
	case w.attr.Nlink > 1:
		err = r.linkPointer(ctx, w)
	case w.attr.IsReg():
		err = r.migrate(ctx, w)
	default:
		err = r.moveSpecial(ctx, w)
	}
	r.done(ctx, w.path, err)
}

// done counts what placing path ended with.
func (r *rebalancer) done(ctx context.Context, path string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, errBusy):
		r.d.log.Info("rebalance: file skipped", "path", path, "err", err)
		r.count(func(st *RebalanceStats) { st.Skipped++ })
	case ctx.Err() != nil:
	default:
		r.fail(path, err)
	}
}

// errBusy marks a file left for a later run.
var errBusy = errors.New("busy")

// linkPointer handles a file with several names, which all live on its
// child (storage counts the links there): it is not moved, but its name
// gets a pointer on its hashed child. One on a child being removed is
// moved with all its names after the walk (links.go).
func (r *rebalancer) linkPointer(ctx context.Context, w work) error {
	d := r.d
	r.count(func(st *RebalanceStats) { st.Linked++ })
	a, err := d.child(w.h).Lookup(ctx, w.path)
	switch {
	case err == nil && a.Linkto == d.children[w.c].ID:
		// in place already
	case err == nil && a.Linkto == "":
		return fmt.Errorf("name also on %s (%w)", d.children[w.h].ID, syscall.EEXIST)
	case err == nil || errors.Is(err, syscall.ENOENT):
		if err := d.placePointer(ctx, w.h, w.path, loc{cached: w.c, attr: w.attr}, false); err != nil {
			return err
		}
	default:
		return err
	}
	if !d.layout.has(w.c) {
		// Linked while a move copied it: the next run gathers its names.
		return fmt.Errorf("has %d names now and must leave %s: %w", w.attr.Nlink, d.children[w.c].ID, errBusy)
	}
	return nil
}

// moveSpecial moves a symlink, fifo, socket or device (one link): no open
// files, nothing to freeze. It is made again on the hashed child under a
// temporary name with the same gfid, renamed over the name there, and
// removed from its old child.
func (r *rebalancer) moveSpecial(ctx context.Context, w work) error {
	d := r.d
	dir, _ := layer.Split(w.path)
	tmp := layer.Join(dir, migName())
	owner := layer.Owner{Uid: w.attr.Uid, Gid: w.attr.Gid, Gfid: w.attr.Gfid}
	var err error
	if w.attr.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		var target string
		if target, err = d.child(w.c).Readlink(ctx, w.path); err == nil {
			_, err = d.child(w.h).Symlink(ctx, tmp, layer.SymlinkIn{Owner: owner, Target: target})
		}
	} else {
		_, err = d.child(w.h).Mknod(ctx, tmp, layer.MknodIn{Owner: owner, Mode: w.attr.Mode, Rdev: w.attr.Rdev})
	}
	if err != nil {
		return err
	}
	times := layer.SetattrIn{Valid: layer.SetAtime | layer.SetMtime, Atime: w.attr.Atime, Mtime: w.attr.Mtime}
	d.child(w.h).Setattr(ctx, tmp, times) // best effort
	if err := r.switchName(ctx, w, tmp); err != nil {
		d.unlinkPointer(context.WithoutCancel(ctx), w.h, tmp)
		return err
	}
	if err := d.child(w.c).Unlink(ctx, w.path); err != nil && !errors.Is(err, syscall.ENOENT) {
		d.log.Warn("rebalance: old copy left behind", "path", w.path, "child", d.children[w.c].ID, "err", err)
	}
	r.count(func(st *RebalanceStats) { st.Moved++ })
	return nil
}

// switchName renames tmp over w's name on its hashed child, unless the name
// there is data of another inode (which would be lost).
func (r *rebalancer) switchName(ctx context.Context, w work, tmp string) error {
	d := r.d
	a, err := d.child(w.h).Lookup(ctx, w.path)
	switch {
	case errors.Is(err, syscall.ENOENT):
	case err != nil:
		return err
	case a.Linkto == "" && a.Gfid != w.attr.Gfid:
		return fmt.Errorf("name also on %s (%w)", d.children[w.h].ID, syscall.EEXIST)
	}
	return d.child(w.h).Rename(ctx, tmp, w.path, 0)
}

// keepPointers gives the names that a leaving child holds pointers of
// (their data is on another child) a pointer on the child they hash to
// now, unless their data is there: once the child is gone, that is where
// they are looked for.
func (r *rebalancer) keepPointers(ctx context.Context, dir string, lists [][]layer.Entry) {
	d := r.d
	for p, list := range lists {
		if !r.source(p) || d.layout.has(p) {
			continue
		}
		for _, e := range list {
			if e.Attr.Linkto == "" || hidden(e.Name) || ctx.Err() != nil {
				continue
			}
			c, ok := d.byID[e.Attr.Linkto]
			h := d.layout.owner(hashName(e.Name))
			if !ok || c == h || c == p {
				continue
			}
			path := layer.Join(dir, e.Name)
			err := d.placePointer(ctx, h, path, loc{cached: c, attr: e.Attr}, true)
			switch {
			case err == nil:
				r.count(func(st *RebalanceStats) { st.Linked++ })
			case !errors.Is(err, syscall.EEXIST):
				r.fail(path, fmt.Errorf("pointer to %s not made on %s: %w", d.children[c].ID, d.children[h].ID, err))
			}
		}
	}
}

// dropPointers removes the pointer files of directory dir that the layout
// made stale: on a child that is not the name's hashed child, when the
// name is found on its hashed child (moved there, or given a pointer
// there) or the pointer dangles.
func (r *rebalancer) dropPointers(ctx context.Context, dir string, lists [][]layer.Entry) {
	d := r.d
	for p, list := range lists {
		if !r.source(p) {
			continue
		}
		for _, e := range list {
			if e.Attr.Linkto == "" || hidden(e.Name) || ctx.Err() != nil {
				continue
			}
			path := layer.Join(dir, e.Name)
			h := d.layout.owner(hashName(e.Name))
			if h == p {
				continue
			}
			_, err := d.locateAt(ctx, path, h, nil)
			if err != nil && err != errDangling && !r.dangles(ctx, path, e.Attr.Linkto) {
				continue // still how the name is found until its data moves
			}
			if err := d.child(p).Unlink(ctx, path); err != nil && !errors.Is(err, syscall.ENOENT) {
				d.log.Warn("rebalance: stale pointer left", "path", path, "child", d.children[p].ID, "err", err)
				continue
			}
			r.count(func(st *RebalanceStats) { st.Pointers++ })
		}
	}
}

// dangles reports whether a pointer to linkto at path has no data behind it.
func (r *rebalancer) dangles(ctx context.Context, path, linkto string) bool {
	c, ok := r.d.byID[linkto]
	if !ok {
		return true
	}
	a, err := r.d.child(c).Lookup(ctx, path)
	return errors.Is(err, syscall.ENOENT) || err == nil && (a.Linkto != "" || a.IsDir())
}
