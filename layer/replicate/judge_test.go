package replicate

import (
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

func TestJudge(t *testing.T) {
	g1, g2 := layer.Gfid{1}, layer.Gfid{2}
	file := func(g layer.Gfid, pending Mask, size uint64) Copy {
		return Copy{Attr: layer.Attr{Gfid: g, Mode: syscall.S_IFREG | 0o644, Size: size, Pending: uint64(pending)}}
	}
	dir := func(g layer.Gfid, pending Mask) Copy {
		return Copy{Attr: layer.Attr{Gfid: g, Mode: syscall.S_IFDIR | 0o755, Pending: uint64(pending)}}
	}
	gone := Copy{Err: syscall.ENOENT}
	down := Copy{Err: syscall.ENOTCONN}
	for _, tc := range []struct {
		name           string
		copies         []Copy
		distrust, arbs Mask
		good, bad      Mask
		split, merge   bool
		err            error
		size           uint64
	}{
		{name: "all agree", copies: []Copy{file(g1, 0, 5), file(g1, 0, 5), file(g1, 0, 5)}, good: 7, size: 5},
		{name: "one down", copies: []Copy{file(g1, 0, 5), down, file(g1, 0, 5)}, good: 5, size: 5},
		{name: "one blamed", copies: []Copy{file(g1, 4, 9), file(g1, 4, 9), file(g1, 0, 5)}, good: 3, bad: 4, size: 9},
		{name: "blamed copy answers first", copies: []Copy{file(g1, 0, 5), file(g1, 1, 9), file(g1, 1, 9)}, good: 6, bad: 1, size: 9},
		{name: "missing on one", copies: []Copy{file(g1, 0, 5), gone, file(g1, 0, 5)}, good: 5, bad: 2, size: 5},
		{name: "all absent", copies: []Copy{gone, gone, down}, err: syscall.ENOENT},
		{name: "none answer", copies: []Copy{down, down, down}, err: syscall.ENOTCONN},
		{name: "mutual blame", copies: []Copy{file(g1, 2, 5), file(g1, 1, 6), down}, split: true, bad: 3, err: syscall.EIO},
		{name: "gfid differs, both good", copies: []Copy{file(g1, 0, 5), file(g2, 0, 5)}, split: true, bad: 3, err: syscall.EIO},
		{name: "gfid differs, one blamed", copies: []Copy{file(g1, 2, 5), file(g2, 0, 5)}, good: 1, bad: 2, size: 5},
		{name: "deleted while away: stale copy distrusted", copies: []Copy{file(g1, 0, 5), gone, gone}, distrust: 1, bad: 1, err: syscall.ENOENT},
		{name: "stale name with another gfid, parent distrusts it", copies: []Copy{file(g1, 0, 5), file(g2, 0, 7), file(g1, 0, 5)}, distrust: 2, good: 5, bad: 2, size: 5},
		{name: "distrusted but same inode", copies: []Copy{file(g1, 0, 5), file(g1, 0, 5), file(g1, 0, 5)}, distrust: 1, good: 7, size: 5},
		{name: "arbiter alone vouches for data", copies: []Copy{file(g1, 2, 5), file(g1, 1, 5), file(g1, 2, 0)}, arbs: 4, split: true, bad: 7, err: syscall.EIO},
		{name: "arbiter vouches, trusted data copy down", copies: []Copy{file(g1, 0, 5), down, file(g1, 1, 0)}, arbs: 4, bad: 1, err: syscall.ENOTCONN},
		{name: "arbiter size ignored", copies: []Copy{file(g1, 0, 0), file(g1, 0, 5), file(g1, 0, 5)}, arbs: 1, good: 7, size: 5},
		{name: "dirs blaming each other merge", copies: []Copy{dir(g1, 2), dir(g1, 1), down}, good: 3, bad: 3, merge: true},
		// Found by the simulation: 0 missed a rename (1 and 2 blame it,
		// it blames only 2), 1 and 2 missed each other's changes. 0's
		// names must not come back in the merge.
		{name: "dirs merge without the copy both others are ahead of", copies: []Copy{dir(g1, 4), dir(g1, 5), dir(g1, 3)}, good: 6, bad: 7, merge: true},
		{name: "unblamed dir wins", copies: []Copy{dir(g1, 2), dir(g1, 1), dir(g1, 0)}, good: 4, bad: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.copies, tc.distrust, tc.arbs)
			if v.Good != tc.good || v.Bad != tc.bad || v.SplitBrain != tc.split || v.Merge != tc.merge {
				t.Fatalf("good %b bad %b split %v merge %v; want good %b bad %b split %v merge %v",
					v.Good, v.Bad, v.SplitBrain, v.Merge, tc.good, tc.bad, tc.split, tc.merge)
			}
			if v.Err != tc.err {
				t.Fatalf("err %v, want %v", v.Err, tc.err)
			}
			if v.Err == nil && (v.Attr.Size != tc.size || v.Attr.Pending != 0) {
				t.Fatalf("attr size %d pending %d, want size %d pending 0", v.Attr.Size, v.Attr.Pending, tc.size)
			}
		})
	}
}

// Copies that blame each other, judged by a set whose changes need a
// majority: a blame only copies that cannot make a quorum hold comes from
// a change no client was told was done, and the copies it blames win if
// they blame its holders (found by the simulation: a client died making a
// file on one brick of three, the two others went on without it, and the
// directory's copies blamed each other).
func TestJudgeQuorum(t *testing.T) {
	g1, g2 := layer.Gfid{1}, layer.Gfid{2}
	dir := func(pending Mask) Copy {
		return Copy{Attr: layer.Attr{Gfid: g1, Mode: syscall.S_IFDIR | 0o755, Pending: uint64(pending)}}
	}
	file := func(g layer.Gfid, pending Mask) Copy {
		return Copy{Attr: layer.Attr{Gfid: g, Mode: syscall.S_IFREG | 0o644, Size: 5, Pending: uint64(pending)}}
	}
	down := Copy{Err: syscall.ENOTCONN}
	majority := func(m Mask) bool { return Quorate(QuorumAuto, 0, 3, m) }
	anyOne := func(m Mask) bool { return Quorate(QuorumNone, 0, 3, m) }
	for _, tc := range []struct {
		name         string
		copies       []Copy
		quorate      func(Mask) bool
		distrust     Mask
		good, bad    Mask
		split, merge bool
	}{
		{name: "one copy's blame of two: the two win", copies: []Copy{dir(2), dir(5), dir(2)}, quorate: majority, good: 5, bad: 2},
		{name: "and a file's copies alike", copies: []Copy{file(g1, 2), file(g1, 5), file(g1, 2)}, quorate: majority, good: 5, bad: 2},
		{name: "blamed copy with another gfid", copies: []Copy{file(g1, 2), file(g2, 5), file(g1, 2)}, quorate: majority, good: 5, bad: 2},
		{name: "without a quorum rule: merged", copies: []Copy{dir(2), dir(5), dir(2)}, good: 7, bad: 7, merge: true},
		{name: "any one replica is a quorum: merged", copies: []Copy{dir(2), dir(5), dir(2)}, quorate: anyOne, good: 7, bad: 7, merge: true},
		{name: "a copy down may have done it: merged", copies: []Copy{dir(2), dir(1), down}, quorate: majority, good: 3, bad: 3, merge: true},
		// 0 and 1 did a change 2 missed; 1 and 2 one that 0 missed; 2
		// alone one that 1 missed: only 1 has everything a quorum did.
		{name: "only the minority's blame is dropped", copies: []Copy{dir(4), dir(5), dir(3)}, quorate: majority, good: 2, bad: 5},
		{name: "a cycle of blames no quorum made: merged", copies: []Copy{dir(2), dir(4), dir(1)}, quorate: majority, good: 7, bad: 7, merge: true},
		{name: "file copies in such a cycle: split", copies: []Copy{file(g1, 2), file(g1, 4), file(g1, 1)}, quorate: majority, bad: 7, split: true},
		{name: "an unblamed copy wins, as ever", copies: []Copy{file(g1, 2), file(g1, 1), file(g1, 0)}, quorate: majority, good: 4, bad: 3},
		// 0 did two changes, one of which 1 missed and the other 2;
		// nothing blames 0, whose parent is behind (names): its copy
		// of the file holds both (sim replica3x2-full seed 87 healed
		// from the biggest of 1 and 2, losing a truncation).
		{name: "a distrusted copy nothing blames, the others blamed", copies: []Copy{file(g1, 6), file(g1, 4), file(g1, 2)}, distrust: 1, quorate: majority, good: 1, bad: 6},
		{name: "not if it is another inode", copies: []Copy{file(g2, 6), file(g1, 4), file(g1, 2)}, distrust: 1, quorate: majority, bad: 7, split: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeQuorum(tc.copies, tc.distrust, 0, tc.quorate)
			if v.Good != tc.good || v.Bad != tc.bad || v.SplitBrain != tc.split || v.Merge != tc.merge {
				t.Fatalf("good %b bad %b split %v merge %v; want good %b bad %b split %v merge %v",
					v.Good, v.Bad, v.SplitBrain, v.Merge, tc.good, tc.bad, tc.split, tc.merge)
			}
		})
	}
}
