package replicate

import (
	"context"
	"errors"
	"slices"

	"github.com/mortarfs/mortar/layer"
)

// sourceMissed is a rename's adjuster: a replica that answered ENOENT
// for the source while another renamed it, in a directory whose copies
// blame each other (both good, as a merge has it), missed the source's
// creation unless it recorded the name and inode as removed. Its refusal
// is then a stale copy's: the rename stands where it was done (EIO if
// that is too few replicas) and the replica is marked for heal. (It
// stood, ENOENT, for a file the volume holds: sim disperse2+1-full seed
// 64, a brick that missed the file's create while full.)
func (r *Replicate) sourceMissed(ctx context.Context, oldpath, newpath string) adjuster {
	return func(targets Mask, errs []error, good Mask) (done, stale Mask) {
		ok, absent := okAndAbsent(targets, errs)
		if ok == 0 || absent&good == 0 {
			return 0, 0
		}
		moved, err := r.children[ok.First()].Layer.Lookup(ctx, newpath)
		if err != nil {
			return 0, 0
		}
		dir, name := layer.Split(oldpath)
		gone := layer.Removal{Name: name, Gfid: moved.Gfid}
		missed := r.parallel(absent&good, func(i int) error {
			h, ok := r.children[i].Layer.(layer.HealStore)
			if !ok {
				return nil
			}
			recs, err := h.Removed(ctx, dir)
			if err == nil && !slices.Contains(recs, gone) {
				return errMissed
			}
			return nil
		})
		for i, err := range missed {
			if err == errMissed {
				stale |= Bit(i)
			}
		}
		return 0, stale
	}
}

// errMissed marks the replicas sourceMissed finds stale.
var errMissed = errors.New("missed the creation")

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
