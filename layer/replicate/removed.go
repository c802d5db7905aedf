package replicate

import (
	"context"

	"github.com/mortarfs/mortar/layer"
)

// removedOn reads the removal records of directory path on the copies of
// m, which listed it as lists say (see Gone). A copy that cannot say
// records nothing.
func (r *Replicate) removedOn(ctx context.Context, path string, m Mask, lists [][]layer.Entry) map[layer.Removal]bool {
	recs := make([][]layer.Removal, len(r.children))
	r.parallel(m, func(i int) error {
		if h, ok := r.children[i].Layer.(layer.HealStore); ok {
			recs[i], _ = h.Removed(ctx, path)
		}
		return nil
	})
	has := make([]map[string]bool, len(lists))
	return Gone(recs, func(i int, name string) bool {
		if has[i] == nil {
			has[i] = make(map[string]bool, len(lists[i]))
			for _, e := range lists[i] {
				has[i][e.Name] = true
			}
		}
		return has[i][name]
	})
}

// Gone says which names of a directory whose copies blame each other
// (Verdict.Merge) were removed, not made: recs[i] are copy i's removal
// records (layer.HealStore.Removed), holds(i, name) whether it holds the
// name now. A name and gfid a copy recorded as removed and does not hold
// was removed there while the copies that hold it missed it; merged back,
// it would come back from the dead.
func Gone(recs [][]layer.Removal, holds func(i int, name string) bool) map[layer.Removal]bool {
	gone := map[layer.Removal]bool{}
	for i, rs := range recs {
		for _, rm := range rs {
			if !holds(i, rm.Name) {
				gone[rm] = true
			}
		}
	}
	return gone
}
