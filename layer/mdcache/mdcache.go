// Package mdcache is a client-side layer that keeps the attributes of
// directories (GlusterFS's md-cache, for directories): the kernel drops
// a directory's attributes after every name made or removed in it and
// asks for them again before the next lookup there (it checks search
// permission), so a loop creating files would pay a lookup of their
// directory per file.
//
// # What it knows
//
// The attributes of every directory a lookup through the layer found,
// for Timeout. Operations through the layer keep them up to date: a name
// made in a known directory (create, mknod, mkdir, symlink, link) sets
// its modification and change times to the new inode's change time (a
// few microseconds later than the brick's own, which the making system
// call set: the brick then gives the inode its owner and gfid, which
// changes its change time; on a distributed volume each brick has its own
// copy of the directory and its own times) and a subdirectory adds a link; a name removed sets them to this client's
// clock (a removal answers no time of the brick's; they never go back)
// and a subdirectory removed takes a link away; setattr stores the
// attributes it answers; a rename or an extended attribute set forgets
// the directory (the next lookup asks). Files are not kept: the kernel's own
// attribute cache and quick-read's lookups serve them.
//
// # How fresh
//
// A directory changed through another client (its mode, owner, times)
// may be seen as it was for at most Timeout: the bound the kernel's
// attribute cache puts on every inode. With cache invalidation
// (layer.Change) such a change is forgotten when the brick tells it. A
// lookup that overlapped an operation of the layer is not kept.
package mdcache

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// DefaultTimeout is how long attributes are kept by default (GlusterFS's
// md-cache-timeout).
const DefaultTimeout = time.Second

// maxDirs bounds the directories kept; past it the oldest go first.
const maxDirs = 65536

// Options tune the layer; zero values take the defaults.
type Options struct {
	Timeout time.Duration
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Layer keeps directories' attributes over its child.
type Layer struct {
	layer.Base
	opts Options

	mu    sync.Mutex
	dirs  map[string]kept
	clock uint64 // counts the starts and ends of changes, and Forgets
	busy  int    // changes through the layer under way
}

// kept is a directory's attributes and when its lookup started.
type kept struct {
	attr layer.Attr
	at   time.Time
}

var (
	_ layer.Layer     = (*Layer)(nil)
	_ layer.Forgetter = (*Layer)(nil)
)

// New returns the layer over child.
func New(child layer.Layer, opts Options) *Layer {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Layer{Base: layer.Base{Child: child}, opts: opts, dirs: map[string]kept{}}
}

// Lookup answers a directory known for less than Timeout from memory.
func (l *Layer) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	now := l.opts.Now()
	l.mu.Lock()
	k, ok := l.dirs[path]
	clock := l.clock
	l.mu.Unlock()
	if ok && now.Sub(k.at) < l.opts.Timeout {
		return k.attr, nil
	}
	a, err := l.Child.Lookup(ctx, path)
	if err == nil && a.IsDir() {
		l.mu.Lock()
		if l.clock == clock && l.busy == 0 {
			l.keep(path, kept{attr: a, at: now})
		}
		l.mu.Unlock()
	}
	return a, err
}

// keep stores k as path's, making room; l.mu is held.
func (l *Layer) keep(path string, k kept) {
	if _, ok := l.dirs[path]; !ok && len(l.dirs) >= maxDirs {
		l.evict(k.at)
	}
	l.dirs[path] = k
}

// evict forgets the directories timed out, or if none, one of the others.
func (l *Layer) evict(now time.Time) {
	for p, k := range l.dirs {
		if now.Sub(k.at) >= l.opts.Timeout {
			delete(l.dirs, p)
		}
	}
	for p := range l.dirs {
		if len(l.dirs) < maxDirs {
			return
		}
		delete(l.dirs, p)
	}
}

// changed counts a change (a lookup under way keeps nothing) and lets
// apply update what is known, under l.mu.
func (l *Layer) changed(apply func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clock++
	apply()
}

// end is changed for the end of a change through the layer that begin
// counted in.
func (l *Layer) end(apply func()) {
	l.changed(func() {
		l.busy--
		apply()
	})
}

// forgetTree forgets path and the directories below it; l.mu is held.
func (l *Layer) forgetTree(path string) {
	if path == "/" {
		clear(l.dirs)
		return
	}
	for p := range l.dirs {
		if p == path || strings.HasPrefix(p, path) && p[len(path)] == '/' {
			delete(l.dirs, p)
		}
	}
}

// made updates the directory of path, in which a name was made whose
// inode a is (a directory when dir).
func (l *Layer) made(path string, a layer.Attr, err error) {
	parent, _ := layer.Split(path)
	l.end(func() {
		k, ok := l.dirs[parent]
		if !ok {
			return
		}
		if err != nil && !errors.Is(err, syscall.EEXIST) {
			delete(l.dirs, parent) // what happened is not known
			return
		}
		if err != nil {
			return // EEXIST: nothing was made
		}
		// A create without O_EXCL may have opened a file that was there:
		// its change time is older, and the times never go back.
		if later(a.Ctime, k.attr.Mtime) {
			k.attr.Mtime, k.attr.Ctime = a.Ctime, a.Ctime
		}
		if a.IsDir() {
			if !countsLinks(k.attr) {
				delete(l.dirs, parent)
				return
			}
			k.attr.Nlink++
		}
		l.dirs[parent] = k
	})
}

// countsLinks reports whether a directory's link count is 2 plus its
// subdirectories (ext4, xfs), so that it can be kept up to date; some
// file systems (btrfs) say 1.
func countsLinks(a layer.Attr) bool { return a.Nlink >= 2 }

// begin counts in a change through the layer about to start: a lookup
// that overlaps it keeps nothing (it may see the directory after the
// change, which made or removed then apply again). Every begin has one
// end.
func (l *Layer) begin() { l.changed(func() { l.busy++ }) }

// later reports whether a is after b.
func later(a, b layer.Timespec) bool {
	return a.Sec > b.Sec || a.Sec == b.Sec && a.Nsec > b.Nsec
}

// gone forgets the directories of paths, and the trees at paths.
func (l *Layer) gone(paths ...string) {
	l.end(func() {
		for _, p := range paths {
			parent, _ := layer.Split(p)
			delete(l.dirs, parent)
			l.forgetTree(p)
		}
	})
}

func (l *Layer) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	l.begin()
	f, a, err := l.Child.Create(ctx, path, in)
	l.made(path, a, err)
	return f, a, err
}

func (l *Layer) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	l.begin()
	a, err := l.Child.Mknod(ctx, path, in)
	l.made(path, a, err)
	return a, err
}

func (l *Layer) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	l.begin()
	a, err := l.Child.Mkdir(ctx, path, in)
	l.made(path, a, err)
	return a, err
}

func (l *Layer) Symlink(ctx context.Context, path string, in layer.SymlinkIn) (layer.Attr, error) {
	l.begin()
	a, err := l.Child.Symlink(ctx, path, in)
	l.made(path, a, err)
	return a, err
}

func (l *Layer) Link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	l.begin()
	a, err := l.Child.Link(ctx, oldpath, newpath)
	l.made(newpath, a, err)
	return a, err
}

func (l *Layer) Unlink(ctx context.Context, path string) error {
	l.begin()
	err := l.Child.Unlink(ctx, path)
	l.removed(path, err, 0)
	return err
}

func (l *Layer) Rmdir(ctx context.Context, path string) error {
	l.begin()
	err := l.Child.Rmdir(ctx, path)
	l.removed(path, err, -1)
	return err
}

// removed updates the directory of path, from which a name was removed
// (a subdirectory when links is -1): its times become this client's
// clock (no later than they were: they never go back), as the removal
// answers none of the brick's. A removal that failed for another reason
// than the name missing forgets the directory. An unlinked name was no
// directory, so nothing was kept below it: rm -rf does not walk every
// directory kept for every file it removes.
func (l *Layer) removed(path string, err error, links int) {
	parent, _ := layer.Split(path)
	now := l.opts.Now()
	t := layer.Timespec{Sec: now.Unix(), Nsec: uint32(now.Nanosecond())}
	l.end(func() {
		if links < 0 {
			l.forgetTree(path)
		} else {
			delete(l.dirs, path)
		}
		k, ok := l.dirs[parent]
		switch {
		case !ok || errors.Is(err, syscall.ENOENT):
		case err != nil:
			delete(l.dirs, parent)
		case links < 0 && (!countsLinks(k.attr) || k.attr.Nlink < 3):
			delete(l.dirs, parent) // its count cannot be followed
		default:
			if later(t, k.attr.Mtime) {
				k.attr.Mtime, k.attr.Ctime = t, t
			}
			k.attr.Nlink = uint32(int64(k.attr.Nlink) + int64(links))
			l.dirs[parent] = k
		}
	})
}

func (l *Layer) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	l.begin()
	defer l.gone(oldpath, newpath)
	return l.Child.Rename(ctx, oldpath, newpath, flags)
}

// Setattr keeps the attributes it answers for a directory.
func (l *Layer) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	l.begin()
	a, err := l.Child.Setattr(ctx, path, in)
	l.end(func() {
		delete(l.dirs, path)
		if err == nil && a.IsDir() {
			l.keep(path, kept{attr: a, at: l.opts.Now()})
		}
	})
	return a, err
}

func (l *Layer) Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	l.begin()
	defer l.end(func() { delete(l.dirs, path) })
	return l.Child.Setxattr(ctx, path, name, value, flags)
}

func (l *Layer) Removexattr(ctx context.Context, path, name string) error {
	l.begin()
	defer l.end(func() { delete(l.dirs, path) })
	return l.Child.Removexattr(ctx, path, name)
}

// Forget takes in a change another client made: the directory of a name
// made or removed there, and the directories at and below the name, are
// forgotten; an inode changed is forgotten if it is a directory.
func (l *Layer) Forget(c layer.Change) {
	l.changed(func() {
		switch {
		case c.All:
			clear(l.dirs)
		case c.Entry:
			parent, _ := layer.Split(c.Path)
			delete(l.dirs, parent)
			l.forgetTree(c.Path)
		default:
			delete(l.dirs, c.Path)
		}
	})
}

// Readdir refreshes what is kept of the subdirectories a listing shows,
// so that a listing and a lookup agree: a directory's times may move
// after the layer updated them for a name made in it (write-behind makes
// a create it held back when it sends the file, later than it answered
// for it).
func (l *Layer) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	now := l.opts.Now()
	l.mu.Lock()
	clock := l.clock
	l.mu.Unlock()
	page, err := l.Child.Readdir(ctx, path, cookie, max)
	if err != nil || len(page.Entries) == 0 {
		return page, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clock != clock || l.busy != 0 {
		return page, err
	}
	for _, e := range page.Entries {
		p := layer.Join(path, e.Name)
		if _, ok := l.dirs[p]; ok && e.Attr.IsDir() {
			l.dirs[p] = kept{attr: e.Attr, at: now}
		}
	}
	return page, err
}

// Sync passes on (layer.Syncer).
func (l *Layer) Sync(ctx context.Context) error { return layer.Sync(ctx, l.Child) }
