package heal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// chooser picks the source of a split-brain among the copies in cand, or
// -1 if it cannot decide.
type chooser func(copies []replicate.Copy, cand replicate.Mask) int

// policyByName returns the favourite-child policy called name (nil for
// none).
func policyByName(name string) (chooser, error) {
	switch name {
	case "", "none":
		return nil, nil
	case "mtime", "latest-mtime":
		return byMtime, nil
	case "size", "bigger-file":
		return bySize, nil
	case "majority":
		return byMajority, nil
	}
	return nil, fmt.Errorf("heal: unknown split-brain policy %q (none, mtime, size, majority)", name)
}

// best returns the copy of cand that compares greatest (the first on ties).
func best(copies []replicate.Copy, cand replicate.Mask, compare func(a, b layer.Attr) int) int {
	pick := -1
	for i := range copies {
		if cand.Has(i) && (pick < 0 || compare(copies[i].Attr, copies[pick].Attr) > 0) {
			pick = i
		}
	}
	return pick
}

func compareTime(a, b layer.Timespec) int {
	return cmp.Or(cmp.Compare(a.Sec, b.Sec), cmp.Compare(a.Nsec, b.Nsec))
}

// byMtime picks the newest modification time.
func byMtime(copies []replicate.Copy, cand replicate.Mask) int {
	return best(copies, cand, func(a, b layer.Attr) int { return compareTime(a.Mtime, b.Mtime) })
}

// bySize picks the biggest copy (the newest of those).
func bySize(copies []replicate.Copy, cand replicate.Mask) int {
	return best(copies, cand, func(a, b layer.Attr) int {
		return cmp.Or(cmp.Compare(a.Size, b.Size), compareTime(a.Mtime, b.Mtime))
	})
}

// byMajority picks a copy whose size and mtime more than half of cand
// share.
func byMajority(copies []replicate.Copy, cand replicate.Mask) int {
	for i := range copies {
		if !cand.Has(i) {
			continue
		}
		agree := 0
		for k := range copies {
			a, b := copies[i].Attr, copies[k].Attr
			if cand.Has(k) && a.Size == b.Size && a.Mtime == b.Mtime {
				agree++
			}
		}
		if 2*agree > cand.Count() {
			return i
		}
	}
	return -1
}

// bySource picks replica src if it is a candidate.
func bySource(src int) chooser {
	return func(_ []replicate.Copy, cand replicate.Mask) int {
		if cand.Has(src) {
			return src
		}
		return -1
	}
}

// SplitBrainEntry is an inode whose copies are in split-brain.
type SplitBrainEntry struct {
	Set    int        `json:"set"`
	Path   string     `json:"path"`
	Gfid   layer.Gfid `json:"gfid"`
	Copies []CopyInfo `json:"copies"`
}

// CopyInfo is one replica's copy of an inode.
type CopyInfo struct {
	Replica string     `json:"replica"`
	Error   string     `json:"error,omitempty"` // the lookup failed (absent, down)
	Gfid    layer.Gfid `json:"gfid"`
	Size    uint64     `json:"size"`
	Mtime   time.Time  `json:"mtime"`
	Pending []string   `json:"pending,omitempty"` // the replicas this copy blames
}

// SplitBrain lists the inodes in split-brain: it judges again every inode
// the indexes list and every split-brain the healer met before (a name
// with different inodes found by a directory heal is in no index).
func (h *Healer) SplitBrain(ctx context.Context) ([]SplitBrainEntry, error) {
	var out []SplitBrainEntry
	for si := range h.sets {
		paths := map[string]bool{}
		for _, it := range h.collect(ctx, si) {
			paths[it.entry.Path] = true
		}
		h.mu.Lock()
		for k := range h.split {
			if k.set == si {
				paths[k.path] = true
			}
		}
		h.mu.Unlock()
		for path := range paths {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if path == "" {
				continue
			}
			e, split := h.judgeSplit(ctx, si, path)
			h.noteSplit(si, path, e.Gfid, split)
			if split {
				out = append(out, e)
			}
		}
	}
	slices.SortFunc(out, func(a, b SplitBrainEntry) int {
		return cmp.Or(cmp.Compare(a.Set, b.Set), cmp.Compare(a.Path, b.Path))
	})
	return out, nil
}

// judgeSplit looks at path in set si and says whether it is in split-brain.
func (h *Healer) judgeSplit(ctx context.Context, si int, path string) (SplitBrainEntry, bool) {
	var distrust replicate.Mask
	if path != "/" {
		dir, _ := layer.Split(path)
		distrust = h.judge(si, h.look(ctx, si, dir, h.all(si)), 0).StaleNames()
	}
	copies := h.look(ctx, si, path, h.all(si))
	v := h.judge(si, copies, distrust)
	e := SplitBrainEntry{Set: si, Path: path}
	if !v.SplitBrain {
		return e, false
	}
	e.Gfid = copies[v.Present.First()].Attr.Gfid
	for i, c := range copies {
		ci := CopyInfo{Replica: h.sets[si][i].Name}
		if c.Err != nil {
			ci.Error = c.Err.Error()
		} else {
			ci.Gfid, ci.Size = c.Attr.Gfid, c.Attr.Size
			ci.Mtime = time.Unix(c.Attr.Mtime.Sec, int64(c.Attr.Mtime.Nsec))
			ci.Pending = h.names(si, c.Attr.Pending&^(1<<uint(i)))
		}
		e.Copies = append(e.Copies, ci)
	}
	return e, true
}

// Resolve resolves split-brains by policy: "latest-mtime" (newest mtime),
// "bigger-file" (biggest) or "source-brick" (the copy on the replica named
// sourceBrick). With a path it heals that path, in the set of sourceBrick
// or else in every set; with path "" it resolves every split-brain of
// those sets. Inodes that are not in split-brain are healed as usual: a
// policy never overrides good copies.
func (h *Healer) Resolve(ctx context.Context, path, policy, sourceBrick string) error {
	sets, src := []int{}, -1
	for si, s := range h.sets {
		for i, r := range s {
			if sourceBrick != "" && r.Name == sourceBrick {
				sets, src = append(sets, si), i
			}
		}
	}
	if sourceBrick != "" && src < 0 {
		return fmt.Errorf("heal: no replica %s", sourceBrick)
	}
	var choose chooser
	switch policy {
	case "latest-mtime":
		choose = byMtime
	case "bigger-file":
		choose = bySize
	case "source-brick":
		if src < 0 {
			return errors.New("heal: source-brick needs a replica name")
		}
		if h.sets[sets[0]][src].Arbiter {
			return fmt.Errorf("heal: %s is an arbiter: it holds no data", sourceBrick)
		}
		choose = bySource(src)
	default:
		return fmt.Errorf("heal: unknown resolution policy %q (latest-mtime, bigger-file, source-brick)", policy)
	}
	if sourceBrick == "" {
		for si := range h.sets {
			sets = append(sets, si)
		}
	}
	targets := map[pathKey]bool{}
	if path != "" {
		if err := layer.CheckPath(path); err != nil {
			return err
		}
		for _, si := range sets {
			targets[pathKey{si, path}] = true
		}
	} else {
		entries, err := h.SplitBrain(ctx)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if slices.Contains(sets, e.Set) {
				targets[pathKey{e.Set, e.Path}] = true
			}
		}
	}
	var errs []error
	for k := range targets {
		errs = append(errs, h.healUp(ctx, &job{set: k.set, choose: choose}, k.path))
	}
	return errors.Join(errs...)
}
