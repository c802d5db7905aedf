package replicate

import (
	"context"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Files a client went away from while writing them: the bricks of a
// replicated set mark them layer.Dirty (brick.BrickOptions.MarkAbandoned);
// their copies may differ with no mark blaming any, each an equally
// right source, and heal takes one (heal's abandoned.go: the biggest,
// then the newest). A read before heal reads the copy the file's key
// picks; heal keeping another changed what clients had read (the
// simulation, replica3x2 seed 164: a copy a dying put had truncated read
// as zeros after heal, the others' content before it). So the first read
// of such a file pins the copy it reads: that replica blames the other
// data copies, and from then on reads and heal take it. Not always: a
// reader that cannot reach the pinned copy reads and pins another; a pin
// after heal chose its source is undone by that heal; two readers with
// different replicas up pin two copies, which then blame each other
// (reads fail with EIO until heal, once the file is quiet, keeps one).
// Reviews showed each (2026-11-28); the common case, one reader, is
// closed.

// pinAbandoned pins src, the replica a read of the regular file at path
// takes its content from, when the good copies of v carry the Dirty mark:
// src blames every other data replica, down ones too (a copy down, back
// and newer, was taken by heal over the one read: a review), but those it
// blames already. It returns the copies to read from then (src and the
// arbiters, else v's good ones) and false if a pin was needed and failed.
func (r *Replicate) pinAbandoned(ctx context.Context, path string, v Verdict, copies []Copy, src int) (Mask, bool) {
	good := v.Good
	if r.opts.Fragments || src < 0 || !good.Has(src) || r.arbiters.Has(src) || !v.Attr.IsReg() || !dirtyAmong(copies, good) {
		return good, true
	}
	data := r.all &^ r.arbiters &^ Bit(src)
	others := data &^ Mask(copies[src].Attr.Pending)
	if others == 0 {
		return good &^ data, true
	}
	h, ok := r.children[src].Layer.(layer.HealStore)
	err := error(syscall.ENOTSUP)
	if ok {
		err = h.MarkPending(ctx, path, v.Attr.Gfid, uint64(others))
	}
	if err != nil {
		r.log.Warn("a file a client went away from writing not pinned to the copy read: heal may keep another",
			"path", path, "replica", r.children[src].Name, "err", err)
		return good, false
	}
	r.log.Info("a file a client went away from writing: pinned to the copy read, which heal takes",
		"path", path, "replica", r.children[src].Name, "others", r.names(others))
	return good &^ data, true
}

// dirtyAmong reports whether a copy in m carries the Dirty mark.
func dirtyAmong(copies []Copy, m Mask) bool {
	for i, c := range copies {
		if m.Has(i) && c.Err == nil && c.Attr.Pending&layer.Dirty != 0 {
			return true
		}
	}
	return false
}
