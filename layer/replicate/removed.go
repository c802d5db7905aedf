package replicate

import (
	"context"
	"errors"
	"slices"

	"github.com/mortarfs/mortar/layer"
)

// sourceMissed is a rename's adjuster: a replica that answered ENOENT
// for the source while another, good for the source's directory, renamed
// it has a stale view of that directory (the directory's marks blame
// it), or, where the copies of the directory blame each other (both
// good, as a merge has it), missed the source's creation unless it
// recorded the name and inode as removed. Its refusal is then a stale
// copy's: the rename stands where it was done (EIO if that is too few
// replicas) and the replica is marked for heal. (It stood, ENOENT, for a
// file the volume holds: sim disperse2+1-full seeds 64 and 65, a brick
// that missed the file's create while full; in seed 65 each replica
// up was blamed on one of the two directories, so none was good for the
// rename as a whole.)
func (r *Replicate) sourceMissed(ctx context.Context, oldpath, newpath string) adjuster {
	return func(targets Mask, errs []error, good Mask) (done, judged Mask) {
		ok, absent := okAndAbsent(targets, errs)
		dir, name := layer.Split(oldpath)
		if ok == 0 || absent == 0 {
			return 0, good
		}
		srcGood, _ := r.goodOf(ctx, []string{dir})
		if ok&srcGood == 0 {
			return 0, good
		}
		stale := absent &^ srcGood
		if absent&srcGood != 0 {
			stale |= r.missedCreate(ctx, absent&srcGood, dir, name, ok.First(), newpath)
		}
		if stale == 0 {
			return 0, good
		}
		return 0, (good | ok&srcGood) &^ stale
	}
}

// missedCreate returns the replicas of m that did not record name, with
// the inode replica renamed to newpath, as removed from dir: they lack it
// for having missed its creation.
func (r *Replicate) missedCreate(ctx context.Context, m Mask, dir, name string, renamed int, newpath string) Mask {
	moved, err := r.children[renamed].Layer.Lookup(ctx, newpath)
	if err != nil {
		return 0
	}
	gone := layer.Removal{Name: name, Gfid: moved.Gfid}
	missed := r.parallel(m, func(i int) error {
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
	var stale Mask
	for i, err := range missed {
		if err == errMissed {
			stale |= Bit(i)
		}
	}
	return stale
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

// removedHolders returns the replicas of m holding path (copies) as an
// inode another replica recorded as removed from its directory, whose
// copies blame each other (a merge, which distrusts none): looked up
// alone, the name would be found there, as a listing does not show it
// (sim disperse2+1-full seed 73: a file unlinked while one brick was cut
// off was read back, empty, from that brick).
func (r *Replicate) removedHolders(ctx context.Context, m Mask, path string, copies []Copy) Mask {
	dir, name := layer.Split(path)
	lists := make([][]layer.Entry, len(r.children))
	for i, c := range copies {
		if m.Has(i) && c.Err == nil {
			lists[i] = []layer.Entry{{Name: name, Attr: c.Attr}}
		}
	}
	gone := r.removedOn(ctx, dir, m, lists)
	var held Mask
	for i, c := range copies {
		if m.Has(i) && c.Err == nil && gone[layer.Removal{Name: name, Gfid: c.Attr.Gfid}] {
			held |= Bit(i)
		}
	}
	return held
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
