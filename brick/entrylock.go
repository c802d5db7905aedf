package brick

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// entryLocks are the directories of one brick whose names a healer holds
// still (layer.EntryLocker): operations of other connections on names in
// such a directory wait until it is let go, the holder's connection ends,
// or entryWaitMax passes. The wait is for progress, not safety: an
// operation that goes ahead after entryWaitMax (or slipped in as the lock
// was taken) changes the directory's ctime, and the healer's ClearPending
// then keeps the marks.
type entryLocks struct {
	n    atomic.Int32 // directories held: 0 is the fast path
	mu   sync.Mutex
	held map[string]*entryLock
	// lease is the connection holding the brick's heal lease (nil:
	// none): one at a time, until it lets go or ends. A healer holds it
	// all the time, so it is kept out of held and n: it holds no names
	// still, and operations pass it by.
	lease atomic.Pointer[conn]
}

// takeLease makes owner the holder of the heal lease, or keeps it;
// EAGAIN if another connection holds it.
func (e *entryLocks) takeLease(owner *conn) error {
	if e.lease.CompareAndSwap(nil, owner) || e.lease.Load() == owner {
		return nil
	}
	return syscall.EAGAIN
}

type entryLock struct {
	owner *conn
	free  chan struct{} // closed when let go
}

// entryWaitMax bounds how long an operation waits for a held directory:
// a healer holds one for the time it takes to heal the names that changed
// since its last pass, milliseconds.
const entryWaitMax = 2 * time.Second

// lock makes owner the holder of dir; EAGAIN if another connection is.
func (e *entryLocks) lock(dir string, owner *conn) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l := e.held[dir]; l != nil {
		if l.owner == owner {
			return nil
		}
		return syscall.EAGAIN
	}
	if e.held == nil {
		e.held = map[string]*entryLock{}
	}
	e.held[dir] = &entryLock{owner: owner, free: make(chan struct{})}
	e.n.Add(1)
	return nil
}

// unlock lets dir go if owner holds it.
func (e *entryLocks) unlock(dir string, owner *conn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l := e.held[dir]; l != nil && l.owner == owner {
		e.drop(dir, l)
	}
}

// release lets go the heal lease and every directory owner holds (its
// connection ended).
func (e *entryLocks) release(owner *conn) {
	e.lease.CompareAndSwap(owner, nil)
	if e.n.Load() == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for dir, l := range e.held {
		if l.owner == owner {
			e.drop(dir, l)
		}
	}
}

func (e *entryLocks) drop(dir string, l *entryLock) {
	delete(e.held, dir)
	close(l.free)
	e.n.Add(-1)
}

// wait returns once no other connection than c holds dir, after
// entryWaitMax at most, or when ctx is done.
func (e *entryLocks) wait(ctx context.Context, c *conn, dir string) error {
	if e.n.Load() == 0 {
		return nil
	}
	e.mu.Lock()
	l := e.held[dir]
	e.mu.Unlock()
	if l == nil || l.owner == c {
		return nil
	}
	t := time.NewTimer(entryWaitMax)
	defer t.Stop()
	select {
	case <-l.free:
		return e.wait(ctx, c, dir) // another holder may have come
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// entryDirs returns the directories whose names request r changes (none
// for other operations).
func entryDirs(r *wire.Request) []string {
	names := namesChanged(r)
	dirs := make([]string, len(names))
	for i, p := range names {
		dirs[i], _ = layer.Split(p)
	}
	return dirs
}

// namesChanged returns the names r makes, removes or moves, nil for an
// operation that changes no names: the one list of those operations, for
// entry holds (their directories) and change notices (notify.go).
func namesChanged(r *wire.Request) []string {
	switch r.Op {
	case wire.OpCreate, wire.OpMake, wire.OpMknod, wire.OpMkdir, wire.OpSymlink, wire.OpUnlink, wire.OpUnlinkData, wire.OpRmdir:
		return []string{r.Path}
	case wire.OpLink:
		return []string{r.Path2}
	case wire.OpRename:
		return []string{r.Path, r.Path2}
	}
	return nil
}

// waitEntries waits until the directories r changes are not held by
// another connection (see entryLocks).
func (c *conn) waitEntries(ctx context.Context, r *wire.Request) error {
	if c.entries == nil || c.entries.n.Load() == 0 {
		return nil
	}
	for _, dir := range entryDirs(r) {
		if err := c.entries.wait(ctx, c, dir); err != nil {
			return err
		}
	}
	return nil
}

// entrylk takes or lets go of a directory, or of the brick's heal
// lease, for a healer.
func (c *conn) entrylk(r *wire.Request) error {
	if c.entries == nil {
		return syscall.ENOTSUP
	}
	switch r.Flags {
	case wire.EntrylkLock:
		return c.entries.lock(r.Path, c)
	case wire.EntrylkUnlock:
		c.entries.unlock(r.Path, c)
		return nil
	case wire.EntrylkLease:
		return c.entries.takeLease(c)
	case wire.EntrylkUnlease:
		c.entries.lease.CompareAndSwap(c, nil)
		return nil
	}
	return syscall.EINVAL
}
