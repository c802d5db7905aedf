package heal

import (
	"fmt"
	"strings"
	"sync"
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
// is a right source. The healer takes the biggest (of one size, the one
// reads take, else the newest: sourceOf), makes the
// other copies, and the bricks without the name, sinks (their data is
// compared chunk by chunk, and only what differs written), and clears
// the Dirty marks as it settles (guarded by the ctimes it saw, like every
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
// source and sinks, and reports whether it did: a file is left for a
// later scan until its copies have gone unchanged for Options.Quiet (a
// write of the client may still be on its way to a brick, or another
// client is writing the file).
func (h *Healer) abandoned(si int, path string, p *plan, arbs replicate.Mask) bool {
	if !h.quietNow(p) {
		h.log.Debug("written by a client that went away; compared once quiet", "path", path)
		return false
	}
	data := p.good &^ arbs
	src := sourceOf(path, p.copies, data, arbs)
	if src < 0 {
		return true // only arbiters: nothing to compare
	}
	p.src, p.dirty = src, true
	p.good = replicate.Bit(src) | p.good&arbs
	// Copies without the name are sinks too: the client died making the
	// file (or removing it) on some bricks; the name is kept everywhere.
	p.sinks |= data&^p.good | p.v.Absent
	if others := data&^p.good | p.v.Absent; others != 0 {
		h.log.Info("a client went away with the file written: its copies are made equal to one", "path", path,
			"source", h.sets[si][src].Name, "sinks", h.names(si, uint64(others)))
	}
	return true
}

// sourceOf picks the source of a Dirty file among the data copies in
// data: the biggest, and of several of that size the one a read takes
// (replicate.ReadReplica: every reader with these copies up read it),
// else the newest. The newest alone kept a copy a dying put had emptied,
// zeros where clients had read another copy's content (the simulation,
// replica3x2 seed 164). Not exact: a reader with another copy down, or
// by another name (a rename since), may have read another.
func sourceOf(path string, copies []replicate.Copy, data, arbs replicate.Mask) int {
	src := bySize(copies, data)
	if read := replicate.ReadReplica(data, arbs, path); read >= 0 && src >= 0 && copies[read].Attr.Size == copies[src].Attr.Size {
		return read
	}
	return src
}

// abandonedDir makes every good copy of a Dirty directory a sink of its
// names, once its copies are quiet, and reports whether it did. The
// bricks mark the directories whose names a client changed last when its
// connection ends without a goodbye (brick/abandoned.go): it may have
// died between making, removing or renaming a name on one brick and on
// another, and no change it was told of can be among those (it waits
// for every brick). Its names are healed as a full heal heals them: a
// name some copy has is given to the others (a removal half done is
// undone, a creation half done completed; a rename half done leaves
// both names), and the directory's metadata is the source's.
func (h *Healer) abandonedDir(path string, p *plan) bool {
	if !h.quietNow(p) {
		h.log.Debug("names changed by a client that went away; compared once quiet", "path", path)
		return false
	}
	p.dirty = true
	p.sinks |= p.good
	return true
}

// abandonedSource picks the copy a Dirty file in split-brain is healed
// from: copies with different gfids under the name, nothing blaming
// either (a client died making or replacing the file on some bricks
// while another client's version was on the others). Neither version
// can have been acknowledged over the other to a client that lives: a
// gfid a strict majority of cand share wins, else the biggest copy (the
// newest of those); -1 if cand is empty.
func abandonedSource(copies []replicate.Copy, cand replicate.Mask) int {
	byGfid := map[layer.Gfid]replicate.Mask{}
	for i, c := range copies {
		if cand.Has(i) {
			byGfid[c.Attr.Gfid] |= replicate.Bit(i)
		}
	}
	for _, m := range byGfid {
		if 2*m.Count() > cand.Count() {
			return bySize(copies, m)
		}
	}
	return bySize(copies, cand)
}

// quietLooks remembers, per Dirty file, its copies' change times and
// when the healer first saw them so: quietness is judged on the healer's
// own clock, not by comparing it with the bricks' (a brick whose clock is
// behind would make a file look quiet at once).
type quietLooks struct {
	mu   sync.Mutex
	seen map[layer.Gfid]quietLook
}

type quietLook struct {
	ctimes string
	since  time.Time
}

// maxQuietLooks bounds what quietLooks keeps (files healed or gone
// since are forgotten with the rest when it is reached).
const maxQuietLooks = 10000

// quietNow reports whether the copies of p have not changed for
// Options.Quiet since the healer first saw them as they are.
func (h *Healer) quietNow(p *plan) bool {
	var b strings.Builder
	for i, c := range p.copies {
		if p.v.Present.Has(i) {
			fmt.Fprintf(&b, "%d:%d.%d ", i, c.Attr.Ctime.Sec, c.Attr.Ctime.Nsec)
		}
	}
	g, now := p.copies[max(p.v.Present.First(), 0)].Attr.Gfid, time.Now()
	q := &h.quiet
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.seen == nil || len(q.seen) >= maxQuietLooks {
		q.seen = map[layer.Gfid]quietLook{}
	}
	l, ok := q.seen[g]
	if !ok || l.ctimes != b.String() {
		q.seen[g] = quietLook{b.String(), now}
		return false
	}
	if now.Sub(l.since) < h.quietFor {
		return false
	}
	delete(q.seen, g)
	return true
}
