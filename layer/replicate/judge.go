package replicate

import (
	"context"
	"errors"
	"math/bits"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Mask is a set of replicas of one set: bit i is replica i.
type Mask uint64

// Bit returns the mask of replica i alone.
func Bit(i int) Mask { return 1 << uint(i) }

// Has reports whether replica i is in m.
func (m Mask) Has(i int) bool { return m&Bit(i) != 0 }

// Count returns the number of replicas in m.
func (m Mask) Count() int { return bits.OnesCount64(uint64(m)) }

// First returns the lowest replica in m, or -1.
func (m Mask) First() int {
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(uint64(m))
}

// Copy is what one replica answered about an inode.
type Copy struct {
	Attr layer.Attr
	Err  error
}

// IsDown reports whether err means the replica did not answer (as opposed
// to answering with an error about the file).
func IsDown(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ETIMEDOUT) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ESHUTDOWN) || errors.Is(err, context.DeadlineExceeded)
}

func isAbsent(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR)
}

// Verdict is what the copies of an inode say about each other: the
// deterministic core of replicate and of the healer.
type Verdict struct {
	Down    Mask // did not answer
	Present Mask // have the inode
	Absent  Mask // answered that it does not exist
	Failed  Mask // answered with another error
	// Blamed are the replicas some copy's pending mark says are behind.
	Blamed Mask
	// Good are the copies to trust: present, not blamed by anyone, not
	// distrusted by the caller, with the majority's identity. Reads and
	// heal sources come from Good.
	Good Mask
	// Bad are the replicas that need heal: blamed, or missing or
	// different while Good has the inode.
	Bad Mask
	// SplitBrain: the copies blame each other (or disagree on identity)
	// and none can be trusted over the others.
	SplitBrain bool
	// Merge: directory copies that blame each other; each has names
	// the others miss and the healer merges them (no name made is
	// lost, none removed comes back: Gone).
	// Good and Bad then both hold them all.
	Merge bool
	// Attr is the attributes of the first Good copy (Pending cleared).
	Attr layer.Attr
	// Err is the error to return when no copy is good: the common
	// answer of the replicas (ENOENT when they agree it is absent),
	// ENOTCONN when none answered, EIO for a split-brain.
	Err error
}

// Judge decides which copies of an inode are good. distrust holds replicas
// whose answer must not count (blamed on the parent directory, so that
// their view of names in it is stale); arbiters hold no data, so that they
// can never be the only good copy of a regular file's content.
func Judge(copies []Copy, distrust, arbiters Mask) Verdict {
	return JudgeQuorum(copies, distrust, arbiters, nil)
}

// JudgeQuorum is Judge for a set whose changes need a quorum (quorate
// tells which replicas make one; nil: not known). Copies that blame each
// other are then told apart by what the quorum allows: every replica
// that did a change blames those that missed it, so the replicas that
// blame a copy include every one that did the change it missed; if they
// cannot make a quorum, that change was never acknowledged (replicate
// answers EIO when fewer than a quorum did it, and a client that died
// in the middle was told nothing). Such blame does not count when copies
// blame each other and every copy it comes from is itself blamed for a
// change a quorum may have made: that copy is healed from the others, and
// its change, which no client was told was done, is undone. (A client
// that died making or replacing a file on one brick, after the others
// had missed changes of its directory while that brick was away: the
// copies of the directory blamed each other, and a name in it ended in a
// gfid split-brain no heal resolved.)
func JudgeQuorum(copies []Copy, distrust, arbiters Mask, quorate func(Mask) bool) Verdict {
	var v Verdict
	for i, c := range copies {
		switch {
		case c.Err == nil:
			v.Present |= Bit(i)
			v.Blamed |= Mask(c.Attr.Pending) &^ Bit(i)
		case IsDown(c.Err):
			v.Down |= Bit(i)
		case isAbsent(c.Err):
			v.Absent |= Bit(i)
		default:
			v.Failed |= Bit(i)
		}
	}
	answered := (v.Present | v.Absent) &^ distrust
	if answered == 0 {
		answered = v.Present | v.Absent // nobody else to ask
	}
	trusted := v.Present & answered
	if trusted == 0 {
		v.Err = commonError(copies, v)
		v.Bad = v.Present &^ answered
		return v
	}
	good := trusted &^ v.Blamed
	if good == 0 && quorate != nil {
		if blamed, ok := credible(copies, v.Present, quorate); ok && trusted&^blamed != 0 {
			v.Blamed, good = blamed, trusted&^blamed
		}
	}
	if good == 0 {
		// The trusted copies are all blamed; a distrusted copy of the
		// same inode that nothing blames holds every change of it (as
		// below, when some trusted copy is good): its parent's marks
		// are about names. (Heal took the biggest of copies blamed for
		// different changes, a truncation lost: sim replica3x2-full
		// seed 87.)
		good = sameInodeAs(copies, trusted, v.Present&^v.Blamed&^trusted)
	}
	if good == 0 {
		// Every trusted copy is blamed by another: mutual accusation.
		// Directories are merged instead (union of names, less those
		// recorded as removed: Gone), as long as
		// they are the same directory. A copy that another blames
		// without being blamed back by it is behind that one whatever
		// else is true: its names take no part (a name a rename took
		// away while it was down would come back).
		if !sameDirs(copies, trusted) {
			return splitBrain(v)
		}
		merged := undominated(copies, trusted)
		v.Merge = true
		v.Good = merged
		v.Bad = v.Present | v.Absent | v.Failed
		v.Attr = copies[merged.First()].Attr
		v.Attr.Pending = 0
		return v
	}
	// The good copies must agree on identity and type.
	ref := copies[good.First()].Attr
	if sameInodeAs(copies, good, good) != good {
		return splitBrain(v)
	}
	if ref.IsReg() && good&^arbiters == 0 && v.Present&^arbiters != 0 {
		// Only an arbiter vouches for the content, and it holds none:
		// the data copy it trusts is down, or the data copies blame each
		// other.
		if v.Down != 0 {
			v.Bad = v.Present &^ good
			v.Err = syscall.ENOTCONN
			return v
		}
		return splitBrain(v)
	}
	// A distrusted copy (its parent is behind) of the same inode is as
	// good as the others unless the inode itself is blamed.
	good |= sameInodeAs(copies, good, v.Present&^v.Blamed&^good)
	v.Good = good
	v.Bad = (v.Present | v.Absent | v.Failed) &^ good
	pick := good
	if ref.IsReg() && good&^arbiters != 0 {
		pick = good &^ arbiters // an arbiter's size is 0
	}
	v.Attr = copies[pick.First()].Attr
	v.Attr.Pending = 0
	return v
}

// sameInodeAs returns the copies of cand that are the inode every copy
// of m is (one gfid and type), 0 if the copies of m are not one inode.
func sameInodeAs(copies []Copy, m, cand Mask) Mask {
	if m == 0 || cand == 0 {
		return 0
	}
	ref := copies[m.First()].Attr
	same := func(i int) bool {
		a := copies[i].Attr
		return a.Gfid == ref.Gfid && a.Mode&syscall.S_IFMT == ref.Mode&syscall.S_IFMT
	}
	var out Mask
	for i := range copies {
		if m.Has(i) && !same(i) {
			return 0
		}
		if cand.Has(i) && same(i) {
			out |= Bit(i)
		}
	}
	return out
}

// undominated returns the copies of m that no copy of m blames without
// being blamed back by them (m itself if that leaves none).
func undominated(copies []Copy, m Mask) Mask {
	out := m
	for i := range copies {
		for j := range copies {
			if i != j && m.Has(i) && m.Has(j) && blames(copies[j], i) && !blames(copies[i], j) {
				out &^= Bit(i)
			}
		}
	}
	if out == 0 {
		return m
	}
	return out
}

func blames(c Copy, i int) bool { return Mask(c.Attr.Pending).Has(i) }

// credible returns the replicas blamed by the copies in present for a
// change that a quorum may have made (see JudgeQuorum): a copy's blame of
// replica j counts unless the copies blaming j, and every replica that did
// not answer (its marks are not known), make no quorum. ok is false when
// some copy whose blame does not count is not itself blamed by one that
// does: nothing then says which side is behind.
func credible(copies []Copy, present Mask, quorate func(Mask) bool) (blamed Mask, ok bool) {
	all := Mask(1)<<uint(len(copies)) - 1
	var discredited Mask
	for j := range copies {
		var by Mask
		for i := range copies {
			if i != j && present.Has(i) && blames(copies[i], j) {
				by |= Bit(i)
			}
		}
		if by == 0 {
			continue
		}
		if quorate(by | all&^present) {
			blamed |= Bit(j)
		} else {
			discredited |= by
		}
	}
	return blamed, discredited&^blamed == 0
}

// StaleNames are the replicas whose view of the names in a directory
// with this verdict is stale: its bad copies, but for those a merge
// takes the names of.
func (v Verdict) StaleNames() Mask { return v.Bad &^ v.Good }

// sameDirs reports whether the copies in m are all directories with one
// gfid.
func sameDirs(copies []Copy, m Mask) bool {
	ref := copies[m.First()].Attr
	for i := range copies {
		a := copies[i].Attr
		if m.Has(i) && (!a.IsDir() || a.Gfid != ref.Gfid) {
			return false
		}
	}
	return true
}

func splitBrain(v Verdict) Verdict {
	v.SplitBrain = true
	v.Bad = v.Present
	v.Err = syscall.EIO
	return v
}

// commonError is the error to report when no copy is present.
func commonError(copies []Copy, v Verdict) error {
	if v.Absent != 0 {
		return syscall.ENOENT
	}
	if v.Failed != 0 {
		return copies[v.Failed.First()].Err
	}
	return syscall.ENOTCONN
}
