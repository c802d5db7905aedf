package distribute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Child is one distribute subvolume: usually a brick (through the network
// client), or a replicate/disperse set.
type Child struct {
	// ID names the child in pointer files; it must be unique, non-empty
	// and stable for the life of the volume.
	ID    string
	Layer layer.Layer
}

// Options tunes a Distribute.
type Options struct {
	// Logger receives heals, rollbacks and inconsistencies found; nil
	// discards them.
	Logger *slog.Logger
	// Layout places names on the children (by child id); nil cuts the
	// hash space into equal ranges in child order. A child may own no
	// range (just added, or being removed).
	Layout []Range
	// Previous, set while a rebalance moves files to where Layout puts
	// them, is the layout they are moving from: a name not found where
	// Layout puts it is looked for where Previous put it (see the
	// package documentation, "Changing the layout").
	Previous []Range
}

// Distribute spreads a namespace over its children by hashing names. It
// implements layer.Layer; every method may be called concurrently.
type Distribute struct {
	children []Child
	byID     map[string]int
	layout   *layout
	prev     *layout // nil unless a rebalance is under way
	log      *slog.Logger
}

var _ layer.Layer = (*Distribute)(nil)

// New returns a distribute layer over children (at least one). The order of
// children is part of the volume's layout: keep it stable.
func New(children []Child, opts Options) (*Distribute, error) {
	if len(children) == 0 {
		return nil, errors.New("distribute: no children")
	}
	d := &Distribute{
		children: append([]Child(nil), children...),
		byID:     make(map[string]int, len(children)),
		log:      opts.Logger,
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	for i, c := range children {
		if c.ID == "" || c.Layer == nil {
			return nil, fmt.Errorf("distribute: child %d: empty id or nil layer", i)
		}
		if _, dup := d.byID[c.ID]; dup {
			return nil, fmt.Errorf("distribute: duplicate child id %q", c.ID)
		}
		d.byID[c.ID] = i
	}
	var err error
	if d.layout, err = d.layoutFrom(opts.Layout); err != nil {
		return nil, err
	}
	if opts.Previous != nil {
		if d.prev, err = d.layoutFrom(opts.Previous); err != nil {
			return nil, fmt.Errorf("previous layout: %w", err)
		}
	}
	return d, nil
}

func (d *Distribute) child(i int) layer.Layer { return d.children[i].Layer }

// hashedChild returns the child that owns path's name in its parent's
// layout. The root belongs to child 0.
func (d *Distribute) hashedChild(ctx context.Context, path string) (int, error) {
	if path == "/" {
		return 0, nil
	}
	dir, name := layer.Split(path)
	l, err := d.layoutOf(ctx, dir)
	if err != nil {
		return 0, err
	}
	return l.owner(hashName(name)), nil
}

// prevHashed returns the child that owned path's name in the previous
// layout, and whether there is one (a rebalance is under way).
func (d *Distribute) prevHashed(path string) (int, bool) {
	if d.prev == nil || path == "/" {
		return 0, false
	}
	_, name := layer.Split(path)
	return d.prev.owner(hashName(name)), true
}

// loc is where a name lives.
type loc struct {
	hashed int        // child owning the name's hash
	cached int        // child holding the inode (== hashed unless ptr)
	ptr    bool       // hashed holds a pointer file to cached
	prev   bool       // found where the previous layout put it (hashed is that child)
	attr   layer.Attr // the inode's attributes, Linkto cleared
}

// errDangling marks a pointer file whose target is missing. It wraps
// ENOENT: for everyone but the creators the name does not exist.
var errDangling = fmt.Errorf("distribute: dangling pointer: %w", syscall.ENOENT)

// locate finds path: one lookup on its hashed child, plus one on the
// pointer's target if the hashed child holds a pointer. A pointer whose
// target is missing, unknown, or itself a pointer or a directory yields
// errDangling (with l.hashed set). A missing name costs exactly one lookup,
// except while a rebalance is under way: then a name missing on its hashed
// child is looked for where the previous layout put it (l.prev), and, if
// not there either, once more on its hashed child, which the rebalance may
// have moved it to in between.
func (d *Distribute) locate(ctx context.Context, path string) (loc, error) {
	return d.locateFirst(ctx, path, nil)
}

// firstLook makes locate's first lookup, on the hashed child h, in place of
// its Lookup (LookupData asks for a small file's content with it).
type firstLook func(h int) (layer.Attr, error)

// locateFirst is locate; first, if not nil, makes the first lookup.
func (d *Distribute) locateFirst(ctx context.Context, path string, first firstLook) (loc, error) {
	l, err := d.locateHashed(ctx, path, first)
	if errors.Is(err, syscall.ENOTCONN) {
		// The hashed child is down. A directory exists on every child:
		// another one can answer for it (the root's child 0 being down
		// must not hide the files of the others). A file there stays
		// unreachable: ENOTCONN, never ENOENT.
		if dl, ok := d.dirElsewhere(ctx, path, l.hashed); ok {
			return dl, nil
		}
	}
	return l, err
}

// dirElsewhere looks path up on the children other than skip, in order,
// and returns the first answer that is a directory.
func (d *Distribute) dirElsewhere(ctx context.Context, path string, skip int) (loc, bool) {
	for i := range d.children {
		if i == skip {
			continue
		}
		a, err := d.child(i).Lookup(ctx, path)
		if err == nil && a.IsDir() {
			return loc{hashed: skip, cached: i, attr: a}, true
		}
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return loc{}, false // not a directory, or not there: a file on the child that is down
		}
	}
	return loc{}, false
}

// locateHashed is locate without the fallback for directories.
func (d *Distribute) locateHashed(ctx context.Context, path string, first firstLook) (loc, error) {
	h, err := d.hashedChild(ctx, path)
	if err != nil {
		return loc{}, err
	}
	l, err := d.locateAt(ctx, path, h, first)
	ph, ok := d.prevHashed(path)
	if !ok || ph == h || !errors.Is(err, syscall.ENOENT) {
		return l, err
	}
	pl, perr := d.locateAt(ctx, path, ph, nil)
	switch {
	case perr == nil:
		pl.prev = true
		return pl, nil
	case errors.Is(perr, syscall.ENOENT):
		return d.locateAt(ctx, path, h, nil)
	}
	// Not reachable where the previous layout put it: the name may be
	// there, and the hashed child's ENOENT would be a wrong answer (the
	// simulation, replica3x2-grow seed 13).
	return pl, perr
}

// locateAt is locate with h as the name's hashed child; first, if not
// nil, makes the first lookup there.
func (d *Distribute) locateAt(ctx context.Context, path string, h int, first firstLook) (loc, error) {
	if first == nil {
		first = func(h int) (layer.Attr, error) { return d.child(h).Lookup(ctx, path) }
	}
	a, err := first(h)
	for try := 0; ; try++ {
		if err != nil {
			return loc{hashed: h, cached: h}, err
		}
		if a.Linkto == "" {
			return loc{hashed: h, cached: h, attr: a}, nil
		}
		l, err := d.follow(ctx, path, h, a)
		if err != errDangling || try == maxFollow {
			return l, err
		}
		// A rename may have replaced the pointer and removed the data it
		// named between the two lookups: if the pointer changed, follow
		// the new one (each change is a rename done meanwhile; on a
		// loaded machine several can land between a lookup's two round
		// trips: with three tries, a lookup of a name renamed over in a
		// loop failed, TestRenameNeverHidesTarget in one of six passes of
		// the suite beside other runs, 2026-11-29).
		b, berr := d.child(h).Lookup(ctx, path)
		if berr == nil && b.Linkto == a.Linkto && b.Gfid == a.Gfid {
			return l, errDangling
		}
		a, err = b, berr
	}
}

// maxFollow bounds the pointers a lookup follows when each one it
// follows has changed under it (locateAt).
const maxFollow = 8

// follow resolves the pointer a found at path on child h.
func (d *Distribute) follow(ctx context.Context, path string, h int, a layer.Attr) (loc, error) {
	l := loc{hashed: h, cached: -1, ptr: true}
	c, ok := d.byID[a.Linkto]
	if !ok || c == h {
		d.log.Warn("pointer names an unknown child", "path", path, "child", d.children[h].ID, "linkto", a.Linkto)
		return l, errDangling
	}
	b, err := d.child(c).Lookup(ctx, path)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return l, errDangling
	case err != nil:
		return l, err
	case b.Linkto != "" || b.IsDir():
		d.log.Warn("pointer target is not a data file", "path", path, "linkto", a.Linkto)
		return l, errDangling
	}
	l.cached, l.attr = c, b
	return l, nil
}

// find is locate for operations other than Lookup: on ENOENT it checks
// whether an ancestor of path is a non-directory living on another child,
// and says ENOTDIR then, as a single file system would. This costs
// lookups only on the error path.
func (d *Distribute) find(ctx context.Context, path string) (loc, error) {
	l, err := d.locate(ctx, path)
	if err != nil && err != errDangling {
		err = d.refine(ctx, path, err)
	}
	return l, err
}

// refine turns ENOENT for path into ENOTDIR if the nearest existing
// ancestor of path is not a directory. A child answers ENOENT for a path
// under a file that lives on another child, since it has no such file.
func (d *Distribute) refine(ctx context.Context, path string, err error) error {
	if !errors.Is(err, syscall.ENOENT) {
		return err
	}
	for dir, _ := layer.Split(path); dir != "/"; dir, _ = layer.Split(dir) {
		l, lerr := d.locate(ctx, dir)
		switch {
		case lerr == nil && !l.attr.IsDir():
			return syscall.ENOTDIR
		case lerr == nil:
			return err
		case !errors.Is(lerr, syscall.ENOENT):
			return err
		}
	}
	return err
}

// parentDir checks that path's parent is an existing directory.
func (d *Distribute) parentDir(ctx context.Context, path string) error {
	dir, _ := layer.Split(path)
	if dir == "/" {
		return nil
	}
	l, err := d.find(ctx, dir)
	if err == nil && !l.attr.IsDir() {
		return syscall.ENOTDIR
	}
	return err
}

// removeStalePointer unlinks a dangling pointer at path on child i. Pointer
// files hold no data, so losing a race here costs at most a name that a
// concurrent rename was placing (see the package doc on locking).
func (d *Distribute) removeStalePointer(ctx context.Context, i int, path string) {
	a, err := d.child(i).Lookup(ctx, path)
	if err != nil || a.Linkto == "" {
		return
	}
	if err := d.child(i).Unlink(ctx, path); err != nil && !errors.Is(err, syscall.ENOENT) {
		d.log.Warn("removing stale pointer", "path", path, "child", d.children[i].ID, "err", err)
		return
	}
	d.log.Info("removed stale pointer", "path", path, "child", d.children[i].ID)
}

// parallel runs fn for every index in idx concurrently and returns the
// errors, indexed like d.children (nil for indices not in idx).
func (d *Distribute) parallel(idx []int, fn func(i int) error) []error {
	errs := make([]error, len(d.children))
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	return errs
}

// all returns the indices of every child; others every child but skip.
func (d *Distribute) all() []int { return d.others(-1) }

func (d *Distribute) others(skip int) []int {
	idx := make([]int, 0, len(d.children))
	for i := range d.children {
		if i != skip {
			idx = append(idx, i)
		}
	}
	return idx
}

// firstErr returns errs[prefer] if set, else the first non-nil error.
func firstErr(errs []error, prefer int) error {
	if prefer >= 0 && prefer < len(errs) && errs[prefer] != nil {
		return errs[prefer]
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *Distribute) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	l, err := d.locate(ctx, path)
	if err != nil {
		return l.attr, err
	}
	return d.dirTimes(ctx, path, l), nil
}

// onFound runs op on path where find finds it. A file found through a
// pointer or where the previous layout put it, or anywhere while a
// rebalance is under way, may be moved before op reaches it (op fails
// with ENOENT, or EREMOTE as the pointer it has become): it is found
// again, up to maxReopen times.
func (d *Distribute) onFound(ctx context.Context, path string, op func(l loc) error) error {
	for try := 0; ; try++ {
		l, err := d.find(ctx, path)
		if err != nil {
			return err
		}
		err = op(l)
		// Moved meanwhile: found through a pointer or the previous
		// layout, or while a rebalance is under way (a migration that
		// starts over takes its half-made name away from the new place).
		if try < maxReopen && (errors.Is(err, syscall.EREMOTE) || (l.prev || l.ptr || d.prev != nil) && errors.Is(err, syscall.ENOENT)) {
			continue
		}
		return err
	}
}

func (d *Distribute) Readlink(ctx context.Context, path string) (string, error) {
	var target string
	err := d.onFound(ctx, path, func(l loc) error {
		var err error
		target, err = d.child(l.cached).Readlink(ctx, path)
		return err
	})
	return target, err
}

// Open opens the name on its hashed child in one round trip: a file lives
// there unless a pointer does, and storage refuses to open a pointer
// (EREMOTE); only then is the pointer followed. While a rebalance is under
// way, a name missing on its hashed child is looked for where it was.
func (d *Distribute) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	h, err := d.hashedChild(ctx, path)
	if err != nil {
		return nil, err
	}
	f, err := d.child(h).Open(ctx, path, flags)
	if errors.Is(err, syscall.EREMOTE) || d.prev != nil && errors.Is(err, syscall.ENOENT) {
		f, err = d.openFound(ctx, path, flags)
	}
	if err != nil {
		return nil, err
	}
	return d.newHandle(f, path, flags, layer.Gfid{}), nil
}

// openFound opens path where find finds it: a pointer's target, or where
// the previous layout put it.
func (d *Distribute) openFound(ctx context.Context, path string, flags uint32) (layer.File, error) {
	var f layer.File
	err := d.onFound(ctx, path, func(l loc) error {
		var err error
		f, err = d.child(l.cached).Open(ctx, path, flags)
		return err
	})
	return f, err
}

// Setattr changes the name on its hashed child in one round trip: a file
// lives there unless a pointer does (storage refuses a pointer with
// EREMOTE, and only then is it followed); a directory, found there, is then
// changed on every other child too.
func (d *Distribute) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	h, err := d.hashedChild(ctx, path)
	if err != nil {
		return layer.Attr{}, err
	}
	attr, err := d.child(h).Setattr(ctx, path, in)
	switch {
	case errors.Is(err, syscall.EREMOTE) || d.prev != nil && errors.Is(err, syscall.ENOENT):
		var found loc
		err := d.onFound(ctx, path, func(l loc) error {
			var err error
			found = l
			attr, err = d.child(l.cached).Setattr(ctx, path, in)
			return err
		})
		if err != nil || !attr.IsDir() {
			return attr, err
		}
		h = found.hashed // a directory its hashed child lacks (before fix-layout)
	case err != nil || !attr.IsDir():
		return attr, err
	}
	err = d.dirUpdate(ctx, path, h, func(i int, first bool) error {
		if first {
			return nil // done above
		}
		_, err := d.child(i).Setattr(ctx, path, in)
		return err
	})
	return attr, err
}

// reserved reports whether name is one of mortar's own xattrs, which
// callers may not see or change (the rebalance's commands to the bricks
// among them: they go to the children directly).
func reserved(name string) bool { return strings.HasPrefix(name, "trusted.mortar.") }

func (d *Distribute) Getxattr(ctx context.Context, path, name string) ([]byte, error) {
	if reserved(name) {
		return nil, syscall.EOPNOTSUPP
	}
	var v []byte
	err := d.onFound(ctx, path, func(l loc) error {
		var err error
		v, err = d.child(l.cached).Getxattr(ctx, path, name)
		return err
	})
	return v, err
}

func (d *Distribute) Listxattr(ctx context.Context, path string) ([]string, error) {
	var names []string
	err := d.onFound(ctx, path, func(l loc) error {
		var err error
		names, err = d.child(l.cached).Listxattr(ctx, path)
		return err
	})
	return names, err
}

// Setxattr on a directory runs on its hashed child first, with the
// caller's flags (so XATTR_CREATE/XATTR_REPLACE are decided there), then
// on every other child with flags 0 so that they converge.
func (d *Distribute) Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	if reserved(name) {
		return syscall.EOPNOTSUPP
	}
	var dir *loc
	err := d.onFound(ctx, path, func(l loc) error {
		if l.attr.IsDir() {
			dir = &l
			return nil
		}
		return d.child(l.cached).Setxattr(ctx, path, name, value, flags)
	})
	if err != nil || dir == nil {
		return err
	}
	return d.dirUpdate(ctx, path, dir.hashed, func(i int, first bool) error {
		f := flags
		if !first {
			f = 0
		}
		return d.child(i).Setxattr(ctx, path, name, value, f)
	})
}

// Removexattr on a directory: the hashed child decides ENODATA; the others
// may already lack the attribute.
func (d *Distribute) Removexattr(ctx context.Context, path, name string) error {
	if reserved(name) {
		return syscall.EOPNOTSUPP
	}
	var dir *loc
	err := d.onFound(ctx, path, func(l loc) error {
		if l.attr.IsDir() {
			dir = &l
			return nil
		}
		return d.child(l.cached).Removexattr(ctx, path, name)
	})
	if err != nil || dir == nil {
		return err
	}
	return d.dirUpdate(ctx, path, dir.hashed, func(i int, first bool) error {
		err := d.child(i).Removexattr(ctx, path, name)
		if !first && errors.Is(err, syscall.ENODATA) {
			return nil
		}
		return err
	})
}

// Statfs sums every child's counts, expressed in the smallest fragment
// size among them. Every child is asked about "/" whatever path is: the
// numbers are per file system, and path may be a file that lives on one
// child only. One child failing fails the call: a silently smaller volume
// would mislead df and space checks.
func (d *Distribute) Statfs(ctx context.Context, path string) (layer.Statfs, error) {
	res := make([]layer.Statfs, len(d.children))
	errs := d.parallel(d.all(), func(i int) error {
		var err error
		res[i], err = d.child(i).Statfs(ctx, "/")
		return err
	})
	if err := firstErr(errs, -1); err != nil {
		return layer.Statfs{}, err
	}
	out := res[0]
	for _, s := range res[1:] {
		out.Frsize = minNonZero(out.Frsize, s.Frsize)
		out.Bsize = minNonZero(out.Bsize, s.Bsize)
		out.NameLen = minNonZero(out.NameLen, s.NameLen)
	}
	out.Blocks, out.Bfree, out.Bavail, out.Files, out.Ffree = 0, 0, 0, 0, 0
	for _, s := range res {
		scale := func(n uint64) uint64 {
			if s.Frsize == 0 || out.Frsize == 0 {
				return n
			}
			return n * uint64(s.Frsize) / uint64(out.Frsize)
		}
		out.Blocks += scale(s.Blocks)
		out.Bfree += scale(s.Bfree)
		out.Bavail += scale(s.Bavail)
		out.Files += s.Files
		out.Ffree += s.Ffree
	}
	return out, nil
}

func minNonZero(a, b uint32) uint32 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}
