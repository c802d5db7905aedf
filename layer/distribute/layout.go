package distribute

import (
	"context"
	"fmt"
	"sort"
)

// hashRange is the inclusive range [start, end] of the 32-bit hash space
// that one child owns in a directory.
type hashRange struct {
	start, end uint32
	child      int // index into Distribute.children
}

// layout says which child owns which hash in one directory. Today every
// directory has the same layout, computed from the child list; when
// add-brick and rebalance arrive, a directory's layout will be stored in an
// xattr on each child's copy of the directory (each child its own range,
// plus an epoch), loaded by layoutOf and cached. Callers only ask owner,
// so that change stays inside this file.
type layout struct {
	ranges []hashRange // sorted by start, covering [0, 2^32) without gaps
}

// evenLayout splits the hash space into n equal contiguous ranges, one per
// child in order; the last range absorbs the remainder.
func evenLayout(n int) *layout {
	if n < 1 {
		panic("distribute: layout needs at least one child")
	}
	size := (uint64(1) << 32) / uint64(n)
	l := &layout{ranges: make([]hashRange, n)}
	for i := range n {
		start := uint64(i) * size
		end := start + size - 1
		if i == n-1 {
			end = 1<<32 - 1
		}
		l.ranges[i] = hashRange{start: uint32(start), end: uint32(end), child: i}
	}
	return l
}

// owner returns the child whose range holds h.
func (l *layout) owner(h uint32) int {
	i := sort.Search(len(l.ranges), func(i int) bool { return l.ranges[i].end >= h })
	return l.ranges[i].child
}

// check reports whether l covers the whole hash space exactly once.
func (l *layout) check() error {
	var next uint64
	for _, r := range l.ranges {
		if uint64(r.start) != next || r.end < r.start {
			return fmt.Errorf("distribute: layout hole or overlap at %#x", next)
		}
		next = uint64(r.end) + 1
	}
	if next != 1<<32 {
		return fmt.Errorf("distribute: layout ends at %#x", next)
	}
	return nil
}

// layoutOf returns the layout of directory dir. It cannot fail today; the
// context and error are there for the stored layouts to come.
func (d *Distribute) layoutOf(ctx context.Context, dir string) (*layout, error) {
	return d.layout, nil
}
