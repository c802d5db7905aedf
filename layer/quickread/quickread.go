// Package quickread is a client-side layer that serves small files from
// their lookups (GlusterFS's quick-read): reading a small file costs one
// round trip, the lookup, instead of three (lookup, open, read).
//
// # What it does
//
// Lookup asks the child for the content of a regular file of at most
// MaxFileSize bytes along with its attributes (layer.DataLooker; a child
// that cannot give it is simply looked up) and keeps what comes, by path,
// for Timeout. An Open of that path for reading only (no O_TRUNC,
// O_DIRECT, O_SYNC or O_DSYNC) within Timeout of the lookup takes the
// entry — an entry serves one open — and returns a file in memory: reads
// are served from the content, Getattr answers the lookup's attributes,
// Flush and Release cost nothing. Any other operation on that file
// (Write, Setattr, Fallocate, Fsync, Getlk, Setlk) first opens the file
// through the child, once, and from then on everything goes there, reads
// included: after a lock, reads must see other clients' writes.
//
// # How fresh the content is
//
// Content served by an open, and by the reads of that open, is at most
// Timeout old: the same bound as the kernel's attribute cache
// (performance.attr-timeout) puts on sizes and times. A change made
// through another client (another mount) may be missed for that long;
// once an open file's content is older than Timeout its reads go to the
// child.
//
// A file made in one go in a directory whose names the client leases is
// the exception: its content and attributes serve without the timeout
// while the client owns the name (owned.go).
//
// Changes made through this layer are never missed: every operation that
// changes a name (create, mknod, mkdir, symlink, link, unlink, rmdir,
// rename, set/remove xattr, an open for writing or truncating) forgets the
// entries of the names it touches, before and after it runs, and a lookup
// that ran while anything changed keeps no content. A change to an inode's
// content or attributes (a write, truncate, fallocate, setattr or link,
// by path or through an open file) makes every entry and open file of that inode
// stale; where the layer does not know the inode (a file opened for
// writing by path), every entry and open file is.
//
// A lock taken through the layer (Getlk or Setlk of the applications'
// domain) turns quick-read off for good: closing any descriptor of a file
// must release the process's POSIX locks on it, and only the child's
// files can do that. Open files served from memory then open the child's
// file at Flush.
//
// An open file served from memory opens the child's file by path when it
// needs it, and behind it, in the background, once it has stayed open
// half the timeout (AnchorAfter): a file held open long (tail -f of a log
// being rotated) then reads on from its inode past the timeout, whatever
// becomes of its name. An unlink or rename through the layer of its name
// first opens it too, so that the file still reaches its inode afterwards
// (as POSIX has it: reads of an unlinked open file go on). Only if another
// client renamed or removed the name before either, the file is stale
// (ESTALE) once it needs the child — the limit of path-based opens that
// reopening after a reconnect has too.
//
// Not handled: the attributes an open of another name of a hard-linked
// file answers may miss a link count or ctime change made through this
// layer, for at most Timeout; and on a mount whose graph was rebuilt (an
// option or brick changed), a write through a file opened before the
// rebuild is not seen by the new graph's entries, for at most Timeout.
//
// The layer goes on top of distribute. It must not go under the crypt
// layer (it would keep ciphertext): volumes with encryption on do not get
// it. On dispersed ones the content comes for files of at most one chunk
// (disperse's LookupData).
package quickread

import (
	"bytes"
	"context"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// Defaults and limits of Options.
const (
	DefaultMaxFileSize = 64 << 10
	FileSizeLimit      = 1 << 20 // bricks give no more
	DefaultTimeout     = time.Second
	DefaultMaxEntries  = 1024
	DefaultMaxBytes    = 64 << 20
)

// Options tune the layer; zero values take the defaults.
type Options struct {
	// MaxFileSize is the size of the largest file whose content lookups
	// bring (at most FileSizeLimit).
	MaxFileSize int
	// Timeout is how long after its lookup the content may serve an open,
	// and the reads of that open.
	Timeout time.Duration
	// MaxEntries and MaxBytes bound the content kept; the oldest goes
	// first.
	MaxEntries int
	MaxBytes   int
	// AnchorAfter is how long a file served from memory stays open before
	// the child's file is opened behind it (0: Timeout/2; negative:
	// never), so that a file held open long reads on from its inode past
	// the timeout even if the name changed meanwhile.
	AnchorAfter time.Duration
	// Now is the clock (tests set it).
	Now func() time.Time
}

func (o *Options) setDefaults() {
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = DefaultMaxFileSize
	}
	o.MaxFileSize = min(o.MaxFileSize, FileSizeLimit)
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.AnchorAfter == 0 {
		o.AnchorAfter = o.Timeout / 2
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Layer serves small files from their lookups.
type Layer struct {
	layer.Base
	opts  Options
	cache *cache
	mem   inMemory    // open files served from memory
	locks atomic.Bool // a lock was taken through the layer
}

var _ layer.Layer = (*Layer)(nil)

// New stacks the layer on child.
func New(child layer.Layer, opts Options) *Layer {
	opts.setDefaults()
	l := &Layer{Base: layer.Base{Child: child}, opts: opts}
	l.cache = newCache(opts, l.MadeName)
	return l
}

// Lookup looks path up, with the content of a small file, and keeps the
// content for the open that may follow.
func (l *Layer) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	if e := l.cache.ownedEntry(path); e != nil {
		return e.attr, nil
	}
	clock, start := l.cache.begin(), l.opts.Now()
	a, data, err := layer.LookupData(ctx, l.Child, path, l.opts.MaxFileSize)
	if err != nil || !a.IsReg() || uint64(len(data)) != a.Size {
		data = nil
	}
	l.cache.put(&entry{path: path, attr: a, data: data, clock: clock, at: start}, l.opts.Now())
	return a, err
}

// fromMemory reports whether an open with flags may be served from the
// content of a lookup.
func fromMemory(flags uint32) bool {
	const others = syscall.O_ACCMODE | syscall.O_TRUNC | syscall.O_DIRECT | syscall.O_SYNC | syscall.O_DSYNC
	return flags&others == syscall.O_RDONLY
}

// changes reports whether an open with flags may change the file.
func changes(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
}

// Open serves a read-only open from the content of a lookup if it has
// one, and otherwise opens the child's file.
func (l *Layer) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	if fromMemory(flags) && !l.locks.Load() {
		e := l.cache.ownedEntry(path) // serves every open while owned
		if e == nil {
			e = l.cache.take(path, l.opts.Now())
		}
		if e != nil {
			f := &file{l: l, path: path, flags: flags, mem: e, gfid: e.attr.Gfid, memGfid: e.attr.Gfid}
			l.mem.add(f)
			f.anchorSoon()
			return f, nil
		}
	}
	var f layer.File
	var err error
	if changes(flags) {
		err = l.changing(func() error {
			f, err = l.Child.Open(ctx, path, flags)
			return err
		}, path)
		if flags&syscall.O_TRUNC != 0 {
			l.cache.changedInode(layer.Gfid{}, l.opts.Now()) // which inode: not known
		}
	} else {
		f, err = l.Child.Open(ctx, path, flags)
	}
	if err != nil {
		return nil, err
	}
	return &file{l: l, path: path, flags: flags, real: f}, nil
}

func (l *Layer) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	var f layer.File
	var a layer.Attr
	err := l.changing(func() error {
		var err error
		f, a, err = l.Child.Create(ctx, path, in)
		return err
	}, path)
	if err != nil {
		return nil, a, err
	}
	if in.Flags&syscall.O_TRUNC != 0 {
		l.cache.changedInode(a.Gfid, l.opts.Now()) // an existing file truncated
	}
	l.own(path, in, a)
	return &file{l: l, path: path, flags: in.Flags, real: f, gfid: a.Gfid}, a, nil
}

// own keeps the content of a file made in one go with all of it, in a
// directory whose names the client leases (owned.go).
func (l *Layer) own(path string, in layer.CreateIn, a layer.Attr) {
	clock := l.cache.begin()
	if in.Data == nil || !a.IsReg() || a.Size != uint64(len(in.Data)) || len(in.Data) > l.opts.MaxFileSize {
		return
	}
	if l.MadeName(path) {
		l.cache.own(&entry{path: path, attr: a, data: bytes.Clone(in.Data), clock: clock, at: l.opts.Now()})
	}
}

// changing runs fn, which changes the names paths, forgetting their
// entries before and after: a lookup that ran meanwhile keeps nothing.
func (l *Layer) changing(fn func() error, paths ...string) error {
	l.cache.dropPaths(paths...)
	defer l.cache.dropPaths(paths...)
	return fn()
}

// changedInode notes a change to the inode whose attributes a is, or to
// any inode if the operation failed (what it changed is not known).
func (l *Layer) changedInode(a layer.Attr, err error) {
	if err != nil {
		a.Gfid = layer.Gfid{}
	}
	l.cache.changedInode(a.Gfid, l.opts.Now())
}

func (l *Layer) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	var a layer.Attr
	err := l.changing(func() error {
		var err error
		a, err = l.Child.Setattr(ctx, path, in)
		return err
	}, path)
	l.changedInode(a, err)
	return a, err
}

func (l *Layer) Link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	var a layer.Attr
	err := l.changing(func() error {
		var err error
		a, err = l.Child.Link(ctx, oldpath, newpath)
		return err
	}, oldpath, newpath)
	l.changedInode(a, err) // its link count
	return a, err
}

// attrChange runs an operation that makes the name path and answers its
// attributes.
func (l *Layer) attrChange(path string, fn func() (layer.Attr, error)) (layer.Attr, error) {
	var a layer.Attr
	err := l.changing(func() error {
		var err error
		a, err = fn()
		return err
	}, path)
	return a, err
}

func (l *Layer) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	return l.attrChange(path, func() (layer.Attr, error) { return l.Child.Mknod(ctx, path, in) })
}

func (l *Layer) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	return l.attrChange(path, func() (layer.Attr, error) { return l.Child.Mkdir(ctx, path, in) })
}

func (l *Layer) Symlink(ctx context.Context, path string, in layer.SymlinkIn) (layer.Attr, error) {
	return l.attrChange(path, func() (layer.Attr, error) { return l.Child.Symlink(ctx, path, in) })
}

// Unlink first opens the child's file of the files open from memory at
// path (see pin).
func (l *Layer) Unlink(ctx context.Context, path string) error {
	return l.changing(func() error {
		l.pin(ctx, path)
		return l.Child.Unlink(ctx, path)
	}, path)
}

func (l *Layer) Rmdir(ctx context.Context, path string) error {
	return l.changing(func() error { return l.Child.Rmdir(ctx, path) }, path)
}

// Rename forgets the entries of both names and of the names below them
// (a directory moves its whole tree), and first opens the child's file of
// the files open from memory there (see pin).
func (l *Layer) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	l.cache.dropTrees(oldpath, newpath)
	defer l.cache.dropTrees(oldpath, newpath)
	l.pin(ctx, oldpath, newpath)
	return l.Child.Rename(ctx, oldpath, newpath, flags)
}

func (l *Layer) Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	return l.changing(func() error { return l.Child.Setxattr(ctx, path, name, value, flags) }, path)
}

func (l *Layer) Removexattr(ctx context.Context, path, name string) error {
	return l.changing(func() error { return l.Child.Removexattr(ctx, path, name) }, path)
}

var _ layer.NameLeaser = (*Layer)(nil)

// OwnsName passes the question on (layer.NameLeaser): a file made in one
// go reaches the bricks as it is, and is new to the cache.
func (l *Layer) OwnsName(path string) (layer.Attr, bool) {
	if nl, ok := l.Child.(layer.NameLeaser); ok {
		return nl.OwnsName(path)
	}
	return layer.Attr{}, false
}

// MadeName passes the question on (layer.NameLeaser).
func (l *Layer) MadeName(path string) bool {
	nl, ok := l.Child.(layer.NameLeaser)
	return ok && nl.MadeName(path)
}
