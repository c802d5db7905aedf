package heal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// Stale names: a name only replicas with a stale view of its directory
// still hold is removed from them, its inode parked by its id while
// another replica holds it (for the heal of its other name to link), or
// kept when it is the inode's last name anywhere.

// park removes the stale name path of a non-directory from sink s but
// keeps its inode by its id (layer.IDPath) when another copy p does not
// remove still holds that inode (under another name: it was renamed, or a
// link removed), so that the heal of its other name links it there
// instead of copying it. It reports whether it did.
func (h *Healer) park(ctx context.Context, si, s int, path string, p *plan) bool {
	a := p.copies[s].Attr
	if a.IsDir() {
		return false
	}
	held := false
	for c := range h.sets[si] {
		if c == s || p.remove.Has(c) || p.copies[c].Err != nil && !errors.Is(p.copies[c].Err, syscall.ENOENT) {
			continue
		}
		if b, err := h.sets[si][c].Layer.Lookup(ctx, layer.IDPath(a.Gfid)); err == nil && sameInode(a, b) {
			held = true
			break
		}
	}
	if !held {
		return false
	}
	err := h.sets[si][s].Layer.Rename(ctx, path, layer.IDPath(a.Gfid), 0)
	h.log.Debug("parking a stale name's inode", "replica", h.sets[si][s].Name, "path", path, "err", err)
	return err == nil
}

// removeStale deletes path from the copies of p.remove: the trusted
// replicas say it no longer exists, only replicas with a stale view of the
// parent still have it.
func (h *Healer) removeStale(ctx context.Context, si int, path string, p *plan) error {
	if a := p.copies[p.remove.First()].Attr; !a.IsDir() {
		mu := &h.lastName[a.Gfid[0]%byte(len(h.lastName))]
		mu.Lock()
		defer mu.Unlock()
		if h.keepLastName(ctx, si, path, p) {
			h.kept.Store(true)
			return fmt.Errorf("%s: %w", path, errLastName)
		}
	}
	var errs []error
	for s := range h.sets[si] {
		if p.remove.Has(s) {
			h.log.Debug("removing stale copy", "replica", h.sets[si][s].Name, "path", path)
			if h.park(ctx, si, s, path, p) {
				continue
			}
			errs = append(errs, removeAll(ctx, h.sets[si][s].Layer, path, p.copies[s].Attr))
		}
	}
	if err := errors.Join(errs...); err != nil {
		h.failed.Add(1)
		return err
	}
	h.healed.Add(1)
	return nil
}

// errLastName: a stale name was kept, being its inode's last (see
// keepLastName); a later pass heals it from the copies it was linked on.
var errLastName = errors.New("the last name of an inode kept")

// keepLastName keeps the stale name path of a non-directory on the sinks
// p.remove when it is the last name its inode has anywhere: no other
// replica holds the inode under a name, a trusted data replica holds it
// parked (a heal of its other name took that away, trusting this one),
// no replica that recorded the name as removed dropped the inode, and no
// quorum recorded it (a client's unlink, never undone). That is a rename
// across two directories done on too few replicas (EIO), judged done in
// one directory and undone in the other, whose copies blamed each other
// (docs/REPLICATION.md, "Simulation"): the rename is then undone here
// too. The name is linked back on the trusted replicas that hold the
// inode parked; a later pass gives it to the others. It reports whether
// it kept the name. The caller holds h.lastName for the inode.
func (h *Healer) keepLastName(ctx context.Context, si int, path string, p *plan) bool {
	a := p.copies[p.remove.First()].Attr
	if a.Gfid.IsZero() {
		return false
	}
	var parked, absent replicate.Mask
	for c, rep := range h.sets[si] {
		if p.remove.Has(c) {
			if !sameInode(p.copies[c].Attr, a) || p.copies[c].Attr.Nlink > 1 {
				return false // not the inode's last name there
			}
			continue
		}
		if !h.up(si, c) {
			return false
		}
		b, err := rep.Layer.Lookup(ctx, layer.IDPath(a.Gfid))
		switch {
		case errors.Is(err, syscall.ENOENT):
			absent |= replicate.Bit(c)
		case err != nil || !sameInode(a, b) || b.Linkto != a.Linkto || b.Nlink > 0:
			return false // not known, or named there
		default:
			parked |= replicate.Bit(c)
		}
	}
	to := parked & p.lack
	if a.IsReg() {
		if to&^h.arbs[si] == 0 {
			return false // an arbiter holds no data: it cannot be the only copy
		}
	}
	if to == 0 || h.removalStands(ctx, si, absent|parked, absent, path, a.Gfid) {
		return false
	}
	kept := false
	for c := range h.sets[si] {
		if !to.Has(c) {
			continue
		}
		_, err := h.sets[si][c].Layer.Link(ctx, layer.IDPath(a.Gfid), path)
		if err != nil {
			h.log.Warn("linking a kept name", "replica", h.sets[si][c].Name, "path", path, "err", err)
		}
		kept = kept || err == nil
	}
	if kept {
		h.log.Info("kept the last name of an inode", "path", path, "gfid", a.Gfid)
	}
	return kept
}

// removalStands reports whether the removal of name path, inode g, was
// a client's that must stand: a replica of dropped (they lack the inode)
// recorded it, or the replicas of m that recorded it make a quorum (it
// was acknowledged). A record that cannot be read counts as one.
func (h *Healer) removalStands(ctx context.Context, si int, m, dropped replicate.Mask, path string, g layer.Gfid) bool {
	dir, name := layer.Split(path)
	var rec replicate.Mask
	for c := range h.sets[si] {
		if !m.Has(c) {
			continue
		}
		recs, err := h.stores[si][c].Removed(ctx, dir)
		if err != nil && !errors.Is(err, syscall.ENOTSUP) || slices.Contains(recs, layer.Removal{Name: name, Gfid: g}) {
			rec |= replicate.Bit(c)
		}
	}
	if rec&dropped != 0 {
		return true
	}
	if h.quorate != nil {
		return h.quorate(si, rec)
	}
	return rec.Count()*2 > len(h.sets[si])
}
