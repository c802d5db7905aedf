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

// Range is one range of a layout as Options give it: the hashes from Start
// to the next range's Start-1 (the last range to 2^32-1) belong to the
// child with ID Child. Ranges are sorted by Start and the first starts at 0.
type Range struct {
	Start uint32
	Child string
}

// layout says which child owns which hash in one directory. Every
// directory has the same layout, the volume's (Options.Layout). Callers
// only ask owner, so that per-directory layouts, if they ever come, stay
// inside this file.
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

// layoutFrom converts ranges given by child id; nil gives evenLayout.
func (d *Distribute) layoutFrom(rs []Range) (*layout, error) {
	if rs == nil {
		return evenLayout(len(d.children)), nil
	}
	if len(rs) == 0 || rs[0].Start != 0 {
		return nil, fmt.Errorf("distribute: layout does not start at 0")
	}
	l := &layout{ranges: make([]hashRange, len(rs))}
	for i, r := range rs {
		c, ok := d.byID[r.Child]
		if !ok {
			return nil, fmt.Errorf("distribute: layout names unknown child %q", r.Child)
		}
		end := uint64(1)<<32 - 1
		if i+1 < len(rs) {
			if rs[i+1].Start <= r.Start {
				return nil, fmt.Errorf("distribute: layout ranges overlap at %#x", rs[i+1].Start)
			}
			end = uint64(rs[i+1].Start) - 1
		}
		l.ranges[i] = hashRange{start: r.Start, end: uint32(end), child: c}
	}
	return l, l.check()
}

// has reports whether child c owns some range of l.
func (l *layout) has(c int) bool {
	for _, r := range l.ranges {
		if r.child == c {
			return true
		}
	}
	return false
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
// context and error are there for per-directory layouts, should they come.
func (d *Distribute) layoutOf(ctx context.Context, dir string) (*layout, error) {
	return d.layout, nil
}
