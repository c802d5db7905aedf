package quickread

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// file is an open file of the layer: served from the content of a lookup
// (mem) until something needs the child's file, or the child's file from
// the start (real).
type file struct {
	l     *Layer
	path  string
	flags uint32
	// memGfid is the inode of the content served from memory (zero for a
	// file opened on the child): fixed at open, read without f.mu, which
	// child holds across network calls.
	memGfid layer.Gfid

	mu   sync.Mutex
	mem  *entry     // the content served, nil once real is open
	real layer.File // the child's file, once open
	gfid layer.Gfid // the inode, zero while not known
	// anchor is the child's file, opened in the background once a file
	// served from memory has stayed open half the timeout: when its
	// content times out, reads go to the inode it was opened on even if
	// another client renamed or removed the name meanwhile (a file held
	// open long, as tail -f holds a log being rotated).
	anchor layer.File
	timer  *time.Timer
}

// anchorSoon arms the background open of a file served from memory.
func (f *file) anchorSoon() {
	if f.l.opts.AnchorAfter < 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.timer = time.AfterFunc(f.l.opts.AnchorAfter, f.anchorNow)
}

// anchorNow opens the child's file by path, if the name still holds the
// inode served, and keeps it for when the content times out.
func (f *file) anchorNow() {
	f.mu.Lock()
	path, flags, mem := f.path, f.flags, f.mem
	f.mu.Unlock()
	if mem == nil {
		return
	}
	ctx := context.Background()
	r, err := f.l.Child.Open(ctx, path, flags)
	if err != nil {
		return
	}
	if a, err := r.Getattr(ctx); err != nil || a.Gfid != mem.attr.Gfid {
		r.Release(ctx)
		return
	}
	f.mu.Lock()
	keep := f.mem != nil && f.real == nil && f.anchor == nil
	if keep {
		f.anchor = r
	}
	f.mu.Unlock()
	if !keep {
		r.Release(ctx)
	}
}

var _ layer.File = (*file)(nil)

// memory returns the entry to serve from, or nil when the file is (or
// must now be) the child's: its content timed out, or the inode changed.
func (f *file) memory() *entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mem == nil || !f.l.cache.fresh(f.mem, f.l.opts.Now()) {
		return nil
	}
	return f.mem
}

// child returns the child's file, opening it the first time. A file
// served from memory is opened by path; if the name has since gone or
// holds another inode, the open file is stale.
func (f *file) child(ctx context.Context) (layer.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.real != nil {
		return f.real, nil
	}
	if f.mem == nil {
		return nil, syscall.EBADF // released
	}
	if f.anchor != nil {
		f.real, f.anchor, f.mem = f.anchor, nil, nil
		f.l.mem.remove(f)
		return f.real, nil
	}
	r, err := f.l.Child.Open(ctx, f.path, f.flags)
	if errors.Is(err, syscall.ENOENT) {
		err = syscall.ESTALE
	}
	if err != nil {
		return nil, err
	}
	a, err := r.Getattr(ctx)
	if err == nil && a.Gfid != f.mem.attr.Gfid {
		err = syscall.ESTALE
	}
	if err != nil {
		r.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	f.real, f.mem = r, nil
	f.l.mem.remove(f)
	return r, nil
}

func (f *file) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if e := f.memory(); e != nil {
		if off < 0 {
			return 0, syscall.EINVAL
		}
		if off >= int64(len(e.data)) {
			return 0, nil
		}
		return copy(p, e.data[off:]), nil
	}
	r, err := f.child(ctx)
	if err != nil {
		return 0, err
	}
	return r.Read(ctx, p, off)
}

func (f *file) Getattr(ctx context.Context) (layer.Attr, error) {
	if e := f.memory(); e != nil {
		return e.attr, nil
	}
	r, err := f.child(ctx)
	if err != nil {
		return layer.Attr{}, err
	}
	a, err := r.Getattr(ctx)
	if err == nil {
		f.learn(a.Gfid)
	}
	return a, err
}

// learn notes the inode of a file opened by path.
func (f *file) learn(g layer.Gfid) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gfid.IsZero() {
		f.gfid = g
	}
}

// changed notes a change made through the file to its inode (or to any
// inode, while the file's is not known).
func (f *file) changed() {
	f.mu.Lock()
	g := f.gfid
	f.mu.Unlock()
	f.l.cache.changedInode(g, f.l.opts.Now())
}

func (f *file) Write(ctx context.Context, p []byte, off int64) (int, error) {
	r, err := f.child(ctx)
	if err != nil {
		return 0, err
	}
	defer f.changed()
	return r.Write(ctx, p, off)
}

func (f *file) Setattr(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	r, err := f.child(ctx)
	if err != nil {
		return layer.Attr{}, err
	}
	a, err := r.Setattr(ctx, in)
	if err == nil {
		f.learn(a.Gfid)
	}
	f.changed()
	return a, err
}

func (f *file) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	r, err := f.child(ctx)
	if err != nil {
		return err
	}
	defer f.changed()
	return r.Fallocate(ctx, mode, off, length)
}

func (f *file) Fsync(ctx context.Context, datasync bool) error {
	r, err := f.child(ctx)
	if err != nil {
		return err
	}
	return r.Fsync(ctx, datasync)
}

// Flush of a file served from memory drops no lock unless locks are in
// use: none was taken through it. Once they are, closing it must drop the
// process's locks on the inode, which takes the child's file.
func (f *file) Flush(ctx context.Context, owner uint64) error {
	f.mu.Lock()
	r := f.real
	f.mu.Unlock()
	if r == nil && !f.l.locks.Load() {
		return nil
	}
	r, err := f.child(ctx)
	if err != nil {
		return err
	}
	return r.Flush(ctx, owner)
}

// usesLocks notes a lock of the applications' domain taken through the
// layer: from then on every open goes to the child.
func (f *file) usesLocks(lk layer.Lock) {
	if lk.Domain == layer.DomainPosix {
		f.l.locks.Store(true)
	}
}

func (f *file) Getlk(ctx context.Context, owner uint64, lk layer.Lock) (layer.Lock, error) {
	f.usesLocks(lk)
	r, err := f.child(ctx)
	if err != nil {
		return layer.Lock{}, err
	}
	return r.Getlk(ctx, owner, lk)
}

func (f *file) Setlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool) error {
	f.usesLocks(lk)
	r, err := f.child(ctx)
	if err != nil {
		return err
	}
	return r.Setlk(ctx, owner, lk, wait)
}

func (f *file) Release(ctx context.Context) error {
	f.mu.Lock()
	r, anchor := f.real, f.anchor
	f.real, f.mem, f.anchor = nil, nil, nil
	if f.timer != nil {
		f.timer.Stop()
	}
	f.mu.Unlock()
	f.l.mem.remove(f)
	if anchor != nil {
		anchor.Release(ctx) //nolint:errcheck // never used: nothing to report
	}
	if r == nil {
		return nil
	}
	return r.Release(ctx)
}
