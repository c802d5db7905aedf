package heal

import (
	"context"
	"errors"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// refusedHere returns the replicas distrusted for name path: those whose
// copy there is an inode a refused rename put there (its record,
// layer.RenameRecord with Refused, names path's last element as the new
// name's: the directory may have been renamed since), when another
// replica holds the name otherwise (another inode, or none), and none of
// the others holds that inode there (then the rename was done there
// since, by a retry or another client: the record is stale). The client
// was told the rename was not done, so the name is judged by the replicas
// that refused it alone, whatever the marks of its directory say about
// other names: trusted for those, the copy of a replica that did the
// rename gave the others the renamed inode under the name, over the file
// they held there, which was lost (sim replica3x2-dirs seed 62). Healed
// so, the sink's renamed inode is parked, and the heal of its old name's
// directory links it back there (linkByID, or restoreRenamed once every
// replica holds it parked). Otherwise distrust is returned as it is. One
// look at the record per replica, only when the copies differ.
func (h *Healer) refusedHere(ctx context.Context, si int, path string, copies []replicate.Copy, distrust replicate.Mask) replicate.Mask {
	if !namesDiffer(copies) {
		return distrust
	}
	_, name := layer.Split(path)
	var doers, others replicate.Mask
	for i, c := range copies {
		switch {
		case errors.Is(c.Err, syscall.ENOENT):
			others |= replicate.Bit(i)
		case c.Err != nil:
		case h.refusedTo(ctx, si, i, path, c.Attr, name):
			doers |= replicate.Bit(i)
		default:
			others |= replicate.Bit(i)
		}
	}
	for i, c := range copies {
		if doers.Has(i) && heldAlike(copies, others, c.Attr) {
			doers &^= replicate.Bit(i) // done there since: the record is stale (a review)
		}
	}
	if doers == 0 || others == 0 {
		return distrust
	}
	h.log.Debug("a name a refused rename made judged without its copy", "path", path, "replicas", h.names(si, uint64(doers)))
	return doers
}

// refusedTo reports whether inode a, at path on replica i of set si,
// carries the record of a refused rename whose new name ends in name.
// Read by path, not by id: heal may have made the inode's old name anew
// on that replica meanwhile (a second inode of the gfid, until the new
// name goes).
func (h *Healer) refusedTo(ctx context.Context, si, i int, path string, a layer.Attr, name string) bool {
	if a.IsDir() || a.Gfid.IsZero() {
		return false
	}
	b, err := h.sets[si][i].Layer.Getxattr(ctx, path, layer.XattrRenamed)
	if err != nil {
		return false
	}
	r, ok := layer.ParseRenameRecord(b)
	if !ok || !r.Refused {
		return false
	}
	_, to := layer.Split(r.To)
	return to == name
}

// namesDiffer reports whether the copies that answered hold the name
// differently: another inode, or some none.
func namesDiffer(copies []replicate.Copy) bool {
	var ref *layer.Attr
	absent := false
	for i, c := range copies {
		switch {
		case errors.Is(c.Err, syscall.ENOENT):
			absent = true
		case c.Err != nil:
		case ref == nil:
			ref = &copies[i].Attr
		case !sameInode(*ref, c.Attr):
			return true
		}
	}
	return ref != nil && absent
}

// heldAlike reports whether a copy of m is inode a.
func heldAlike(copies []replicate.Copy, m replicate.Mask, a layer.Attr) bool {
	for i, c := range copies {
		if m.Has(i) && c.Err == nil && sameInode(c.Attr, a) {
			return true
		}
	}
	return false
}
