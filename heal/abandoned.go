package heal

import (
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// Files a client went away from. The bricks of a replicated set mark a
// file layer.Dirty when a client's connection ends with the file open and
// written (brick.BrickOptions.MarkAbandoned): the client may have died
// between sending a write to one brick and to another, leaving copies
// that differ with no mark blaming any. Every write a client was told had
// succeeded reached every good copy (a copy that missed one is blamed), so
// the copies can differ only in writes nobody was told of, and any of them
// is a right source. The healer takes the biggest (the newest of those,
// as GlusterFS's AFR does), makes the other copies sinks (their data is
// compared chunk by chunk, and only what differs written), and clears the
// Dirty marks as it settles (guarded by the ctimes it saw, like every
// clear: a change meanwhile keeps them for the next scan).

// dirtyAmong reports whether a copy in m carries the Dirty mark.
func dirtyAmong(copies []replicate.Copy, m replicate.Mask) bool {
	for i, c := range copies {
		if m.Has(i) && c.Attr.Pending&layer.Dirty != 0 {
			return true
		}
	}
	return false
}

// abandoned turns the good copies of a Dirty replicated file into one
// source and sinks, and reports whether it did: a file changed on some
// copy less than Options.Quiet ago is left for a later scan (a write of
// the client may still be on its way to a brick, or another client is
// writing the file).
func (h *Healer) abandoned(si int, path string, p *plan, arbs replicate.Mask) bool {
	for i, c := range p.copies {
		if p.v.Present.Has(i) && time.Since(time.Unix(c.Attr.Ctime.Sec, int64(c.Attr.Ctime.Nsec))) < h.quiet {
			h.log.Debug("written by a client that went away; compared once quiet", "path", path)
			return false
		}
	}
	data := p.good &^ arbs
	src := bySize(p.copies, data)
	if src < 0 {
		return true // only arbiters: nothing to compare
	}
	p.src, p.dirty = src, true
	p.good = replicate.Bit(src) | p.good&arbs
	p.sinks |= data &^ p.good
	if others := data &^ p.good; others != 0 {
		h.log.Info("a client went away with the file written: its copies are made equal to one", "path", path,
			"source", h.sets[si][src].Name, "sinks", h.names(si, uint64(others)))
	}
	return true
}
