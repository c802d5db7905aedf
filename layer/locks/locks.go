// Package locks is the layer that implements POSIX byte-range locks and
// flock at the brick, above the storage. It wraps every File opened through
// it; the lock table of an inode is keyed by its gfid, so every File of the
// inode (through any name or hard link) shares it.
//
// POSIX locks belong to an owner (a plain uint64: the network server makes
// owners unique per client connection). A new lock of an owner replaces
// that owner's locks on the range: locks merge, split, upgrade and
// downgrade as fcntl(2) locks do. flock locks are a separate namespace:
// whole-file, one per owner, converted in place.
//
// Locks of layer.DomainInternal (layers ordering their own work between
// clients, such as disperse's stripe writes) are byte-range locks in a table
// of their own: they never conflict with applications' locks, Flush does
// not drop them, and their waits are not checked for deadlock (their takers
// acquire in one global order). Getlk of an internal lock that finds no
// conflict reports in Pid how many requests wait for internal locks of the
// inode: a holder polls it to let go when others wait.
//
// A client that alone locks an inode may hold its POSIX locks under a
// lease (layer.LockLeaser, lease.go) and serve them without asking; any
// other POSIX lock request on the inode recalls the lease first.
//
// Flush(owner) drops the owner's POSIX locks on the inode, as close(2)
// does; Release drops every lock taken through the File. A waiting Setlk
// is woken whenever locks on its inode are released, and ends with EINTR
// when its context is done. A POSIX wait that would close a cycle of
// owners waiting for each other fails with EDEADLK.
package locks

import (
	"context"
	"fmt"
	"math"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Layer adds locks to the Files of its child.
type Layer struct {
	layer.Base

	mu     sync.Mutex
	inodes map[layer.Gfid]*inode
	// waits says what each blocked POSIX owner waits for.
	waits map[uint64]waiting
}

// New returns the locks layer over child.
func New(child layer.Layer) layer.Layer {
	return &Layer{
		Base:   layer.Base{Child: child},
		inodes: map[layer.Gfid]*inode{},
		waits:  map[uint64]waiting{},
	}
}

// Create creates the file in the child and wraps its File.
func (l *Layer) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	f, attr, err := l.Child.Create(ctx, path, in)
	if err != nil {
		return nil, attr, err
	}
	wf, err := l.wrap(ctx, f, attr.Gfid)
	if err != nil {
		return nil, layer.Attr{}, err
	}
	return wf, attr, nil
}

// Open opens the file in the child and wraps its File.
func (l *Layer) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	f, err := l.Child.Open(ctx, path, flags)
	if err != nil {
		return nil, err
	}
	return l.wrap(ctx, f, layer.Gfid{})
}

// wrap attaches f to the lock table of its inode (gfid, or asked of f).
func (l *Layer) wrap(ctx context.Context, f layer.File, gfid layer.Gfid) (layer.File, error) {
	if gfid.IsZero() {
		attr, err := f.Getattr(ctx)
		if err == nil && attr.Gfid.IsZero() {
			err = fmt.Errorf("locks: child returned a file without gfid: %w", syscall.EIO)
		}
		if err != nil {
			f.Release(ctx)
			return nil, err
		}
		gfid = attr.Gfid
	}
	l.mu.Lock()
	ino := l.inodes[gfid]
	if ino == nil {
		ino = &inode{changed: make(chan struct{})}
		l.inodes[gfid] = ino
	}
	ino.refs++
	l.mu.Unlock()
	return &file{File: f, l: l, gfid: gfid, ino: ino}, nil
}

// file is a File of the child with locks.
type file struct {
	layer.File
	l    *Layer
	gfid layer.Gfid
	ino  *inode
}

// WriteGap passes a write around a gap on (layer.GapWriter).
func (f *file) WriteGap(ctx context.Context, p []byte, off int64, gap layer.Gap) (int, error) {
	return layer.WriteGap(ctx, f.File, p, off, gap)
}

// ReadUndo passes a read of the undo copy on (layer.UndoReader).
func (f *file) ReadUndo(ctx context.Context, p []byte, off int64) (int, error) {
	return layer.ReadUndo(ctx, f.File, p, off)
}

// normalize checks lk and turns its open end into math.MaxUint64.
func normalize(lk layer.Lock) (layer.Lock, error) {
	switch lk.Type {
	case syscall.F_RDLCK, syscall.F_WRLCK, syscall.F_UNLCK:
	default:
		return lk, syscall.EINVAL
	}
	if lk.Domain > layer.DomainInternal || lk.Domain == layer.DomainInternal && lk.Flock {
		return lk, syscall.EINVAL
	}
	if lk.Flock {
		lk.Start, lk.End = 0, math.MaxUint64
	}
	return openEnd(lk), nil
}

// Getlk returns the first lock of another owner that conflicts with lk, or
// lk with type F_UNLCK.
func (f *file) Getlk(ctx context.Context, owner uint64, lk layer.Lock) (layer.Lock, error) {
	lk, err := normalize(lk)
	if err != nil {
		return layer.Lock{}, err
	}
	if lk.Type == syscall.F_UNLCK {
		return lk, nil
	}
	f.l.mu.Lock()
	defer f.l.mu.Unlock()
	if layer.Leasable(lk) {
		if err := f.l.yield(ctx, f, true); err != nil {
			return layer.Lock{}, err
		}
	}
	if c := f.ino.conflict(owner, lk); c != nil {
		return c.lock(), nil
	}
	lk.Type = syscall.F_UNLCK
	if lk.Domain == layer.DomainInternal {
		lk.Pid = uint32(f.ino.internalWaits) // contention, for a holder
	}
	return lk, nil
}

// Setlk takes, changes or releases a lock. Without wait a conflict is
// EAGAIN; with wait it blocks until the lock is granted (EINTR when ctx is
// done, EDEADLK when waiting would deadlock).
func (f *file) Setlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool) error {
	lk, err := normalize(lk)
	if err != nil {
		return err
	}
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if layer.Leasable(lk) {
			if err := l.yield(ctx, f, true); err != nil {
				return err
			}
		}
		if lk.Type == syscall.F_UNLCK {
			f.ino.set(owner, lk, f)
			return nil
		}
		c := f.ino.conflict(owner, lk)
		if c == nil {
			f.ino.set(owner, lk, f)
			return nil
		}
		if !wait {
			return syscall.EAGAIN
		}
		if !lk.Flock && lk.Domain == layer.DomainPosix {
			if l.wouldDeadlock(owner, c.owner) {
				return syscall.EDEADLK
			}
			l.waits[owner] = waiting{f.ino, lk}
		}
		changed := f.ino.changed
		waits := &f.ino.posixWaits
		if lk.Domain == layer.DomainInternal {
			waits = &f.ino.internalWaits
		}
		*waits++
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
		l.mu.Lock()
		*waits--
		delete(l.waits, owner)
		if ctx.Err() != nil {
			return syscall.EINTR
		}
	}
}

// waiting is the lock a blocked owner waits for.
type waiting struct {
	ino *inode
	lk  layer.Lock
}

// wouldDeadlock reports whether owner waiting for holder closes a cycle:
// holder waits, directly or through others, for owner. Each step follows
// the lock the waiter is blocked by now, so stale waits do not count.
func (l *Layer) wouldDeadlock(owner, holder uint64) bool {
	o := holder
	for i := 0; i <= len(l.waits); i++ {
		w, ok := l.waits[o]
		if !ok {
			return false
		}
		c := w.ino.conflict(o, w.lk)
		if c == nil {
			return false
		}
		if c.owner == owner {
			return true
		}
		o = c.owner
	}
	return false
}

// Flush drops owner's POSIX locks on the inode and flushes the child.
// A lease held through another File is recalled first: the owner may
// hold locks through it too. If the wait for it is interrupted, the
// owner's locks are dropped from what it brings back.
func (f *file) Flush(ctx context.Context, owner uint64) error {
	f.l.mu.Lock()
	if err := f.l.yield(ctx, f, false); err != nil {
		f.ino.closedDuring(owner)
	}
	f.ino.dropOwner(owner)
	f.l.mu.Unlock()
	return f.File.Flush(ctx, owner)
}

// Release drops every lock taken through f and releases the child's File.
func (f *file) Release(ctx context.Context) error {
	l := f.l
	l.mu.Lock()
	if f.ino.lease != nil && f.ino.lease.file == f {
		f.ino.endLease()
	}
	f.ino.dropFile(f)
	f.ino.refs--
	if f.ino.refs == 0 {
		delete(l.inodes, f.gfid)
	}
	l.mu.Unlock()
	return f.File.Release(ctx)
}

// UnlinkData passes layer.DataUnlinker through to the child.
func (l *Layer) UnlinkData(ctx context.Context, path string) error {
	return layer.UnlinkData(ctx, l.Child, path)
}

// RenameSource passes layer.SourceRenamer through to the child.
func (l *Layer) RenameSource(ctx context.Context, oldpath, newpath string, flags uint32, src layer.Gfid) error {
	return layer.RenameSource(ctx, l.Child, oldpath, newpath, flags, src)
}
