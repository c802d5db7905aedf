package heal

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// indexPage is how many index entries one HealIndex call asks for.
const indexPage = 1024

// listIndex pages through the whole heal index of replica i of set si.
func (h *Healer) listIndex(ctx context.Context, si, i int) ([]layer.HealEntry, error) {
	var all []layer.HealEntry
	var after layer.Gfid
	for {
		page, err := h.stores[si][i].HealIndex(ctx, after, indexPage)
		if err != nil {
			return all, err
		}
		all = append(all, page...)
		if len(page) < indexPage {
			return all, nil
		}
		after = page[len(page)-1].Gfid
	}
}

// indexed is one inode as the indexes of a set list it.
type indexed struct {
	entry     layer.HealEntry
	reporters replicate.Mask // replicas whose index lists it at entry.Path
}

// collect merges the indexes of the reachable replicas of set si: one
// item per gfid and recorded path.
func (h *Healer) collect(ctx context.Context, si int) []indexed {
	var out []indexed
	at := map[entryKey]int{}
	for i := range h.sets[si] {
		if !h.up(si, i) {
			continue
		}
		entries, err := h.listIndex(ctx, si, i)
		if err != nil {
			h.log.Debug("heal index unreadable", "replica", h.sets[si][i].Name, "err", err)
		}
		for _, e := range entries {
			k := entryKey{si, e.Gfid, e.Path}
			n, ok := at[k]
			if !ok {
				n = len(out)
				at[k] = n
				out = append(out, indexed{entry: e})
			}
			out[n].reporters |= replicate.Bit(i)
			out[n].entry.Pending |= e.Pending
		}
	}
	return out
}

// scan starts healing everything the indexes list that is not being
// healed already, at most Workers at a time; wg tracks the heals.
func (h *Healer) scan(ctx context.Context, wg *sync.WaitGroup) {
	defer func() {
		h.mu.Lock()
		h.lastScan = time.Now()
		h.mu.Unlock()
	}()
	for si := range h.sets {
		if !h.mayHeal(ctx, si) {
			continue
		}
		for _, it := range h.collect(ctx, si) {
			k := entryKey{si, it.entry.Gfid, it.entry.Path}
			h.mu.Lock()
			busy := h.inflight[k]
			h.inflight[k] = true
			h.mu.Unlock()
			if busy {
				continue
			}
			select {
			case h.slots <- struct{}{}:
			case <-ctx.Done():
				h.done(k)
				return
			}
			wg.Go(func() {
				defer func() {
					<-h.slots
					h.done(k)
					if h.kept.Swap(false) && ctx.Err() == nil {
						time.AfterFunc(retryKept, h.Trigger)
					}
				}()
				h.active.Add(1)
				defer h.active.Add(-1)
				err := h.healEntry(ctx, si, it, true)
				if err != nil && !errors.Is(err, ErrSplitBrain) && !errors.Is(err, errNoSource) && !errors.Is(err, errNotQuiet) && ctx.Err() == nil {
					h.log.Warn("heal failed", "replica", h.sets[si][it.reporters.First()].Name,
						"path", it.entry.Path, "gfid", it.entry.Gfid, "err", err)
				}
			})
		}
	}
}

func (h *Healer) done(k entryKey) {
	h.mu.Lock()
	delete(h.inflight, k)
	h.mu.Unlock()
}

// healEntry heals one index entry. An entry whose path no longer leads to
// its gfid on the replicas that list it has moved or gone (see healMoved,
// unless !follow); an entry of an inode that carries no mark any more is
// dropped.
func (h *Healer) healEntry(ctx context.Context, si int, it indexed, follow bool) error {
	e := it.entry
	if e.Path == "" {
		h.log.Debug("index entry without a path: dropped", "gfid", e.Gfid)
		return h.drop(ctx, si, e.Gfid, e.Path, it.reporters)
	}
	copies := h.look(ctx, si, e.Path, it.reporters)
	var here, unmarked replicate.Mask
	for i, c := range copies {
		if c.Err == nil && c.Attr.Gfid == e.Gfid {
			here |= replicate.Bit(i)
			if c.Attr.Pending == 0 {
				unmarked |= replicate.Bit(i)
			}
		}
	}
	if here == 0 {
		if !follow || reachable(copies, it.reporters) == 0 {
			return nil
		}
		return h.healMoved(ctx, si, it)
	}
	var err error
	if here != unmarked {
		err = h.healUp(ctx, &job{set: si, choose: h.policy}, e.Path)
	}
	// Entries left without a mark (a clear cut short) go, unless the
	// inode changed since it was looked at.
	for i := range copies {
		if unmarked.Has(i) {
			cerr := h.stores[si][i].ClearPending(ctx, e.Path, e.Gfid, 0, copies[i].Attr.Ctime)
			err = errors.Join(err, h.logClear(si, i, e.Path, cerr))
		}
	}
	return err
}

// reachable returns the replicas of m whose copy answered.
func reachable(copies []replicate.Copy, m replicate.Mask) replicate.Mask {
	var r replicate.Mask
	for i, c := range copies {
		if m.Has(i) && !replicate.IsDown(c.Err) {
			r |= replicate.Bit(i)
		}
	}
	return r
}

// healMoved handles an entry whose inode is no longer at its recorded path
// on the replicas listing it: the name changes that moved or removed it
// are marks on the parent directory, so the nearest existing ancestor is
// healed; then the inode is looked for under another name in the parent
// (renamed in place) and healed there, or the entry is dropped. An inode
// moved to another directory, itself or with an ancestor, keeps its marks:
// the heal of its new directory finds it if a sink missed the move (see
// apply), the next Full otherwise.
func (h *Healer) healMoved(ctx context.Context, si int, it indexed) error {
	e := it.entry
	dir, _ := layer.Split(e.Path)
	parent := dir
	for dir != "/" && present(h.look(ctx, si, dir, it.reporters)) == 0 {
		dir, _ = layer.Split(dir)
	}
	j := &job{set: si, choose: h.policy}
	if err := h.healUp(ctx, j, dir); err != nil && !errors.Is(err, ErrSplitBrain) {
		return err
	}
	var errs []error
	for i, r := range h.sets[si] {
		if !it.reporters.Has(i) || !h.up(si, i) {
			continue
		}
		moved := ""
		if dir == parent {
			ents, err := layer.ReadDirAll(ctx, r.Layer, dir)
			if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENOENT) {
				ents, err = nil, nil // the directory became a file, or went: the inode is gone from it
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, ent := range ents {
				if ent.Attr.Gfid == e.Gfid {
					moved = layer.Join(dir, ent.Name)
					break
				}
			}
		}
		if moved == "" {
			h.log.Debug("inode gone from its indexed path: entry dropped",
				"replica", r.Name, "path", e.Path, "gfid", e.Gfid)
			errs = append(errs, h.stores[si][i].DropHealEntry(ctx, e.Gfid, e.Path))
			continue
		}
		h.log.Debug("inode renamed since marked", "replica", r.Name, "from", e.Path, "to", moved)
		errs = append(errs, h.healEntry(ctx, si, indexed{
			entry:     layer.HealEntry{Gfid: e.Gfid, Path: moved},
			reporters: replicate.Bit(i),
		}, false))
	}
	return errors.Join(errs...)
}

// present returns the replicas whose copy exists.
func present(copies []replicate.Copy) replicate.Mask {
	var m replicate.Mask
	for i, c := range copies {
		if c.Err == nil {
			m |= replicate.Bit(i)
		}
	}
	return m
}

// drop removes g's index entry on the reachable replicas of m, if it
// still records path (as the healer read it).
func (h *Healer) drop(ctx context.Context, si int, g layer.Gfid, path string, m replicate.Mask) error {
	var errs []error
	for i := range h.sets[si] {
		if m.Has(i) && h.up(si, i) {
			errs = append(errs, h.stores[si][i].DropHealEntry(ctx, g, path))
		}
	}
	return errors.Join(errs...)
}
