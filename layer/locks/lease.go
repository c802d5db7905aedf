package locks

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// A lease (layer.LockLeaser) is held through one File of an inode. While
// it is, the POSIX locks the table shows for that File may be stale: the
// client keeps the true ones and hands them back with the lease.

// Timing of leases; variables for tests.
var (
	// RecallTimeout is how long a recalled lease may take to come back
	// before its holder is cut off.
	RecallTimeout = 10 * time.Second
	// Quiet is how long after a recall no lease is granted on the inode:
	// two files locking in turn would otherwise pass a lease back and
	// forth, each lock costing a recall.
	Quiet = time.Second
)

var leaseIDs atomic.Uint64

// lease is the lease of an inode's POSIX locks, held through file.
type lease struct {
	id       uint64
	file     *file
	holder   layer.LeaseHolder
	recalled bool
	done     chan struct{} // closed when the lease ends
	// closed are owners that closed a descriptor of the inode while the
	// lease was out: the holder's locks of theirs do not come back.
	closed map[uint64]bool
}

// endLease ends the inode's lease, if any. The end of a recalled lease
// starts the Quiet time: the waiters it held up go first.
func (ino *inode) endLease() {
	if le := ino.lease; le != nil {
		if le.recalled {
			ino.contended = time.Now()
		}
		close(le.done)
		ino.lease = nil
	}
}

// yield makes sure no lease stands in the way of a POSIX lock request
// through f: a lease held through another File is recalled and waited
// for; one held through f itself ends if own is set (a lock request
// through the leased File comes from a client that does not know of the
// lease: it asked for it and gave up waiting for the answer). l.mu is
// held on entry and on return.
func (l *Layer) yield(ctx context.Context, f *file, own bool) error {
	for {
		le := f.ino.lease
		if le == nil {
			return nil
		}
		if le.file == f {
			if own {
				f.ino.endLease()
			}
			return nil
		}
		if !le.recalled {
			le.recalled = true
			f.ino.contended = time.Now()
			le.holder.Recall(le.id)
		}
		l.mu.Unlock()
		err := awaitLease(ctx, le)
		l.mu.Lock()
		if err == errRevoked && f.ino.lease == le {
			// The holder is cut off: its locks through the file go as
			// they would with its connection.
			f.ino.posix = filter(f.ino.posix, func(k *lock) bool { return k.file == le.file })
			f.ino.endLease()
			f.ino.wake()
		} else if err != nil && err != errRevoked {
			return err
		}
	}
}

// errRevoked says a recalled lease did not come back in time.
var errRevoked = errors.New("lease revoked")

// awaitLease waits for a recalled lease to end; a holder that does not
// return it within RecallTimeout is revoked (errRevoked).
func awaitLease(ctx context.Context, le *lease) error {
	t := time.NewTimer(RecallTimeout)
	defer t.Stop()
	select {
	case <-le.done:
		return nil
	case <-ctx.Done():
		return syscall.EINTR
	case <-t.C:
		le.holder.Revoke()
		return errRevoked
	}
}

// SetlkLease takes or releases a lock without waiting (layer.LockLeaser)
// and grants holder the inode's lease when it may.
func (f *file) SetlkLease(ctx context.Context, owner uint64, lk layer.Lock, holder layer.LeaseHolder) (uint64, error) {
	lk, err := normalize(lk)
	if err != nil {
		return 0, err
	}
	if !layer.Leasable(lk) {
		return 0, f.Setlk(ctx, owner, lk, false)
	}
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.yield(ctx, f, true); err != nil {
		return 0, err
	}
	if lk.Type != syscall.F_UNLCK && f.ino.conflict(owner, lk) != nil {
		return 0, syscall.EAGAIN
	}
	f.ino.set(owner, lk, f)
	if !f.ino.leasableTo(f, owner, lk) {
		return 0, nil
	}
	f.ino.lease = &lease{id: leaseIDs.Add(1), file: f, holder: holder, done: make(chan struct{})}
	return f.ino.lease.id, nil
}

// leasableTo reports whether the inode's lease may go to f with owner's
// lock lk, just set: the client starts its table with that lock alone, so
// it must be the inode's only POSIX lock (or none is left, for an
// unlock); nobody may wait for one, and no lease was recalled lately.
func (ino *inode) leasableTo(f *file, owner uint64, lk layer.Lock) bool {
	if ino.posixWaits > 0 || time.Since(ino.contended) < Quiet {
		return false
	}
	switch len(ino.posix) {
	case 0:
		return true
	case 1:
		k := ino.posix[0]
		return k.file == f && k.owner == owner && k.typ == lk.Type && k.start == lk.Start && k.end == lk.End
	}
	return false
}

// ReturnLease ends the lease held through f: the locks the holder reports
// replace those the table shows for f (layer.LockLeaser).
func (f *file) ReturnLease(ctx context.Context, id uint64, held []layer.HeldLock, keep bool) error {
	l := f.l
	l.mu.Lock()
	defer l.mu.Unlock()
	le := f.ino.lease
	if le == nil || le.id != id || le.file != f {
		return nil
	}
	if !keep {
		f.ino.posix = filter(f.ino.posix, func(k *lock) bool { return k.file == f })
		for _, h := range held {
			lk, err := normalize(h.Lock)
			if err != nil || !layer.Leasable(lk) || lk.Type == syscall.F_UNLCK || le.closed[h.Owner] {
				continue
			}
			f.ino.set(h.Owner, lk, f)
		}
		f.ino.wake()
	}
	f.ino.endLease()
	return nil
}

// closedDuring records that owner closed a descriptor of the inode while
// its lease is out (a Flush whose recall was interrupted): the holder's
// locks of that owner are dropped when the lease comes back. l.mu is held.
func (ino *inode) closedDuring(owner uint64) {
	if le := ino.lease; le != nil {
		if le.closed == nil {
			le.closed = map[uint64]bool{}
		}
		le.closed[owner] = true
	}
}

// Local is the table of POSIX locks a client keeps for one open file
// while it holds the file's lease (layer/protocol). It is not safe for
// concurrent use.
type Local struct{ ino inode }

// NewLocal returns an empty table.
func NewLocal() *Local { return &Local{ino: inode{changed: make(chan struct{})}} }

// Conflict returns the first lock of another owner that conflicts with
// lk, if any.
func (t *Local) Conflict(owner uint64, lk layer.Lock) (layer.Lock, bool) {
	lk = openEnd(lk)
	if c := t.ino.conflict(owner, lk); c != nil {
		return c.lock(), true
	}
	return layer.Lock{}, false
}

// Set makes owner's locks over lk's range be lk (F_UNLCK removes them).
func (t *Local) Set(owner uint64, lk layer.Lock) { t.ino.set(owner, openEnd(lk), nil) }

// DropOwner removes owner's locks (close(2) of one of its descriptors).
func (t *Local) DropOwner(owner uint64) { t.ino.dropOwner(owner) }

// Len is the number of locks held.
func (t *Local) Len() int { return len(t.ino.posix) }

// Held lists the locks and their owners.
func (t *Local) Held() []layer.HeldLock {
	out := make([]layer.HeldLock, 0, len(t.ino.posix))
	for _, k := range t.ino.posix {
		out = append(out, layer.HeldLock{Owner: k.owner, Lock: k.lock()})
	}
	return out
}

// openEnd turns a byte-range lock's open end (End < Start) into
// math.MaxUint64, as the brick's table stores it.
func openEnd(lk layer.Lock) layer.Lock {
	if lk.End < lk.Start {
		lk.End = math.MaxUint64
	}
	return lk
}
