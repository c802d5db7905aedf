package layer

import "context"

// Lock leases let a client serve the POSIX byte-range locks of a file it
// alone locks without a round trip per lock (SQLite takes six per
// commit). The brick grants a lease with a lock taken through one open
// file when every POSIX lock of the inode is held through that file and
// none is awaited; from then on the client keeps that file's locks
// itself. Before the brick runs any other POSIX lock request on the inode
// (another file's Setlk, Getlk or Flush) it recalls the lease: the client
// hands back the locks it holds (ReturnLease) and the request runs on the
// brick's table as without leases. flocks and DomainInternal locks are
// never leased.

// LockLeaser is a brick File that can lease its inode's POSIX locks (the
// locks layer's Files).
type LockLeaser interface {
	// SetlkLease takes or releases a POSIX lock without waiting, as Setlk
	// does, for a client able to hold a lease (holder). It returns the id
	// of the lease now held through this File, or 0 for none.
	SetlkLease(ctx context.Context, owner uint64, lk Lock, holder LeaseHolder) (lease uint64, err error)
	// ReturnLease ends the lease: the holder's locks through this File
	// become held, owned by the owners given (already made unique by the
	// server). keep says the holder has no locks of its own to report
	// (it did not know of the lease): the brick's table stays. A lease
	// that has already ended is no error.
	ReturnLease(ctx context.Context, lease uint64, held []HeldLock, keep bool) error
}

// LeaseHolder is the client a lease was granted to, as the brick reaches
// it.
type LeaseHolder interface {
	// Recall asks the client to return the lease; it must not wait.
	Recall(lease uint64)
	// Revoke cuts the client off (it did not return a recalled lease in
	// time): the brick drops its locks as for any client that went away.
	Revoke()
}

// HeldLock is a lock and its owner, as a client returning a lease
// reports them.
type HeldLock struct {
	Owner uint64
	Lock  Lock
}

// Leasable reports whether lk is a lock leases cover: an application's
// POSIX byte-range lock.
func Leasable(lk Lock) bool { return lk.Domain == DomainPosix && !lk.Flock }
