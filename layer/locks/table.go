package locks

import (
	"math"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// inode is the lock table of one inode. Everything in it is guarded by
// Layer.mu.
type inode struct {
	refs     int     // open Files
	posix    []*lock // byte-range locks, any order
	flocks   []*lock // whole-file locks, at most one per owner
	internal []*lock // byte-range locks of layer.DomainInternal
	// internalWaits counts the Setlk calls waiting for internal locks,
	// posixWaits those waiting for POSIX locks.
	internalWaits, posixWaits int
	// lease is the lease of the POSIX locks, if one is held (lease.go);
	// contended is when one was last recalled.
	lease     *lease
	contended time.Time
	// changed is closed (and replaced) whenever locks are released or
	// weakened, to wake the waiters.
	changed chan struct{}
}

// lock is one held lock.
type lock struct {
	owner      uint64
	typ        uint32
	start, end uint64 // inclusive; end math.MaxUint64 is "to EOF"
	pid        uint32
	file       *file // taken through this File
	isFlock    bool
	domain     uint8
}

func (k *lock) lock() layer.Lock {
	return layer.Lock{Type: k.typ, Start: k.start, End: k.end, Pid: k.pid, Flock: k.isFlock, Domain: k.domain}
}

// ranges returns the list of byte-range locks of lk's domain.
func (ino *inode) ranges(lk layer.Lock) *[]*lock {
	if lk.Domain == layer.DomainInternal {
		return &ino.internal
	}
	return &ino.posix
}

// conflict returns the first lock of another owner that conflicts with lk.
func (ino *inode) conflict(owner uint64, lk layer.Lock) *lock {
	list := *ino.ranges(lk)
	if lk.Flock {
		list = ino.flocks
	}
	for _, k := range list {
		if k.owner == owner || !overlap(k.start, k.end, lk.Start, lk.End) {
			continue
		}
		if k.typ == syscall.F_WRLCK || lk.Type == syscall.F_WRLCK {
			return k
		}
	}
	return nil
}

func overlap(s1, e1, s2, e2 uint64) bool { return s1 <= e2 && s2 <= e1 }

// touch reports whether two ranges overlap or are adjacent.
func touch(s1, e1, s2, e2 uint64) bool {
	switch {
	case e1 < s2:
		return s2-e1 == 1
	case e2 < s1:
		return s1-e2 == 1
	}
	return true
}

// set makes owner's locks over lk's range be lk (F_UNLCK removes them),
// taken through f. It wakes waiters when it releases anything.
func (ino *inode) set(owner uint64, lk layer.Lock, f *file) {
	if lk.Flock {
		ino.setFlock(owner, lk, f)
		return
	}
	s, e := lk.Start, lk.End
	list := ino.ranges(lk)
	out := (*list)[:0:0]
	released := false
	for _, k := range *list {
		if k.owner != owner || !overlap(k.start, k.end, s, e) {
			out = append(out, k)
			continue
		}
		// Keep the parts of k outside [s, e].
		if k.start < s {
			left := *k
			left.end = s - 1
			out = append(out, &left)
		}
		if k.end > e {
			right := *k
			right.start = e + 1
			out = append(out, &right)
		}
		if lk.Type == syscall.F_UNLCK || k.typ == syscall.F_WRLCK {
			released = true
		}
	}
	if lk.Type != syscall.F_UNLCK {
		out = merge(out, &lock{owner: owner, typ: lk.Type, start: s, end: e, pid: lk.Pid, file: f, domain: lk.Domain})
	}
	*list = out
	if released {
		ino.wake()
	}
}

// merge adds n to list, absorbing the locks of the same owner, type and
// File that overlap or touch it.
func merge(list []*lock, n *lock) []*lock {
	out := list[:0]
	for _, k := range list {
		if k.owner == n.owner && k.typ == n.typ && k.file == n.file &&
			touch(k.start, k.end, n.start, n.end) {
			n.start, n.end = min(n.start, k.start), max(n.end, k.end)
			continue
		}
		out = append(out, k)
	}
	return append(out, n)
}

// setFlock converts, takes or drops owner's flock.
func (ino *inode) setFlock(owner uint64, lk layer.Lock, f *file) {
	for i, k := range ino.flocks {
		if k.owner != owner {
			continue
		}
		if lk.Type == syscall.F_UNLCK {
			ino.flocks = append(ino.flocks[:i], ino.flocks[i+1:]...)
			ino.wake()
			return
		}
		if k.typ == syscall.F_WRLCK && lk.Type == syscall.F_RDLCK {
			defer ino.wake()
		}
		k.typ, k.pid, k.file = lk.Type, lk.Pid, f
		return
	}
	if lk.Type != syscall.F_UNLCK {
		ino.flocks = append(ino.flocks, &lock{owner: owner, typ: lk.Type,
			start: 0, end: math.MaxUint64, pid: lk.Pid, file: f, isFlock: true})
	}
}

// dropOwner removes owner's POSIX locks.
func (ino *inode) dropOwner(owner uint64) {
	ino.drop(func(k *lock) bool { return k.owner == owner }, false)
}

// dropFile removes every lock taken through f, of every domain.
func (ino *inode) dropFile(f *file) {
	ino.drop(func(k *lock) bool { return k.file == f }, true)
}

// drop removes the POSIX locks match selects and, with all, the flocks
// and internal locks too.
func (ino *inode) drop(match func(*lock) bool, all bool) {
	n := len(ino.posix) + len(ino.flocks) + len(ino.internal)
	ino.posix = filter(ino.posix, match)
	if all {
		ino.flocks = filter(ino.flocks, match)
		ino.internal = filter(ino.internal, match)
	}
	if len(ino.posix)+len(ino.flocks)+len(ino.internal) != n {
		ino.wake()
	}
}

func filter(list []*lock, drop func(*lock) bool) []*lock {
	out := list[:0]
	for _, k := range list {
		if !drop(k) {
			out = append(out, k)
		}
	}
	clear(list[len(out):])
	return out
}

// wake wakes every waiter of the inode.
func (ino *inode) wake() {
	close(ino.changed)
	ino.changed = make(chan struct{})
}
