package volume

import (
	"fmt"
	"slices"
	"sort"
)

// Layout says which distribute child (replica or disperse set, named by
// the ID of its first brick) owns which part of the 32-bit name-hash
// space: the name of a file lives on the child whose range holds the
// name's hash. Ranges are sorted by Start, the first starts at 0, and each
// runs to the next one's Start-1 (the last to 2^32-1).
//
// A spec without a layout uses EvenLayout over its sets. Adding a set
// (With) or removing one (Without) changes the layout so that as few names
// as possible change owner; the rebalance then moves the files whose
// owner changed, while clients resolve names with both the new layout and
// the previous one (Spec.Previous).
type Layout struct {
	Ranges []Range `json:"ranges"`
}

// Range is the part of the hash space from Start to the next range's Start.
type Range struct {
	Start uint32 `json:"start"`
	Child string `json:"child"`
}

const hashSpace = uint64(1) << 32

// EvenLayout cuts the hash space into len(ids) equal contiguous ranges in
// order, the last one absorbing the remainder: the placement of every
// volume made before layouts were stored.
func EvenLayout(ids []string) Layout {
	if len(ids) == 0 {
		return Layout{}
	}
	size := hashSpace / uint64(len(ids))
	l := Layout{Ranges: make([]Range, len(ids))}
	for i, id := range ids {
		l.Ranges[i] = Range{Start: uint32(uint64(i) * size), Child: id}
	}
	return l
}

// end returns the last hash of range i.
func (l Layout) end(i int) uint64 {
	if i == len(l.Ranges)-1 {
		return hashSpace - 1
	}
	return uint64(l.Ranges[i+1].Start) - 1
}

// Owner returns the child owning hash h ("" for an empty layout).
func (l Layout) Owner(h uint32) string {
	i := sort.Search(len(l.Ranges), func(i int) bool { return l.Ranges[i].Start > h }) - 1
	if i < 0 {
		return ""
	}
	return l.Ranges[i].Child
}

// Children returns the children that own a range, in order of their first
// range.
func (l Layout) Children() []string {
	var out []string
	for _, r := range l.Ranges {
		if !slices.Contains(out, r.Child) {
			out = append(out, r.Child)
		}
	}
	return out
}

// Share returns the fraction of the hash space child owns.
func (l Layout) Share(child string) float64 {
	var n uint64
	for i, r := range l.Ranges {
		if r.Child == child {
			n += l.end(i) - uint64(r.Start) + 1
		}
	}
	return float64(n) / float64(hashSpace)
}

// Validate checks that l covers the hash space exactly once, with ranges
// of known children (every id in known; nil accepts any non-empty id).
func (l Layout) Validate(known []string) error {
	if len(l.Ranges) == 0 {
		return fmt.Errorf("layout has no ranges")
	}
	if l.Ranges[0].Start != 0 {
		return fmt.Errorf("layout does not start at 0 (hole before %#x)", l.Ranges[0].Start)
	}
	for i, r := range l.Ranges {
		if r.Child == "" {
			return fmt.Errorf("layout range at %#x has no child", r.Start)
		}
		if known != nil && !slices.Contains(known, r.Child) {
			return fmt.Errorf("layout range at %#x names unknown child %q", r.Start, r.Child)
		}
		if i > 0 && r.Start <= l.Ranges[i-1].Start {
			return fmt.Errorf("layout ranges overlap or are out of order at %#x", r.Start)
		}
	}
	return nil
}

// merged returns l with adjacent ranges of one child joined.
func (l Layout) merged() Layout {
	var out []Range
	for _, r := range l.Ranges {
		if n := len(out); n > 0 && out[n-1].Child == r.Child {
			continue
		}
		out = append(out, r)
	}
	return Layout{Ranges: out}
}

// With returns l with child id added: every range of the n children gives
// the new child its last 1/(n+1), so that only that share of the names
// moves, all of it to the new child, and the children stay as balanced as
// they were. Adding a child l has already returns l.
func (l Layout) With(id string) Layout {
	if len(l.Ranges) == 0 {
		return EvenLayout([]string{id})
	}
	n := uint64(len(l.Children()))
	if slices.Contains(l.Children(), id) {
		return l
	}
	var out []Range
	for i, r := range l.Ranges {
		length := l.end(i) - uint64(r.Start) + 1
		give := length / (n + 1)
		out = append(out, r)
		if give > 0 {
			out = append(out, Range{Start: uint32(l.end(i) + 1 - give), Child: id})
		}
	}
	return Layout{Ranges: out}.merged()
}

// Without returns l with child id removed: each of its ranges is split
// evenly, in order, among the remaining children (in the order of
// Children), so that only id's names move and they spread over all the
// others. Removing the last child, or one l does not have, returns l.
func (l Layout) Without(id string) Layout {
	var rest []string
	for _, c := range l.Children() {
		if c != id {
			rest = append(rest, c)
		}
	}
	if len(rest) == 0 || len(rest) == len(l.Children()) {
		return l
	}
	var out []Range
	for i, r := range l.Ranges {
		if r.Child != id {
			out = append(out, r)
			continue
		}
		start, length := uint64(r.Start), l.end(i)-uint64(r.Start)+1
		part := length / uint64(len(rest))
		for k, c := range rest {
			s := start + uint64(k)*part
			if part == 0 && k > 0 {
				break // a range shorter than the children: the first takes it
			}
			out = append(out, Range{Start: uint32(s), Child: c})
		}
	}
	return Layout{Ranges: out}.merged()
}
