package heal

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// job is one heal request: its set, how split-brains are resolved, and
// whether every name is visited (Full) or only names that differ.
type job struct {
	set    int
	choose chooser // nil: leave split-brains
	deep   bool
	// crawl: every name is visited, not only the names that differ, but
	// only what the marks blame is healed (see apply).
	crawl bool
	// names: the names of a directory a client went away from (marked
	// layer.Dirty by its bricks) are healed: every name that differs,
	// as a full heal does, not only what marks explain (abandoned.go).
	names bool
}

// plan is what healing one inode will do, decided from its copies.
type plan struct {
	copies []replicate.Copy
	v      replicate.Verdict
	src    int            // the copy names and metadata come from
	data   int            // the copy data comes from (-1: none)
	good   replicate.Mask // the copies healed from
	sinks  replicate.Mask // the copies to heal
	forced bool           // a split-brain resolved by policy
	// cycle: the fragments of one file blame each other in a cycle (each
	// missed a change others made): none is a source, every one is
	// checked stripe by stripe against the version K bricks share
	// (verify), with the size K copies agree on, and the marks go.
	cycle  bool
	remove replicate.Mask // copies to delete: the inode is gone on the trusted ones
	lack   replicate.Mask // with remove: the trusted copies, which lack it
	// partial: some sinks cannot be healed now (no copy of the data is
	// reachable); the heal then ends with errNoSource.
	partial bool
	// verify: a copy carries the layer.Dirty mark (a client may have died
	// while writing), or the heal is a full one: the DataHealer checks the
	// fragments agree.
	verify bool
	// changed: settle kept marks because a copy changed since it was
	// looked at.
	changed bool
	// dirty: the copies of a replicated file or directory a client went
	// away from were compared (abandoned, abandonedDir); settle clears
	// their Dirty marks.
	dirty bool
	// marked: the blame premark added on each good copy (by replica).
	marked []uint64
	// unsure: sinks of a directory whose names the heal changed; the
	// good copies keep blaming them (see apply).
	unsure replicate.Mask
}

// attr is the source's attributes.
func (p *plan) attr() layer.Attr { return p.copies[p.src].Attr }

// healPath heals the inode at path of set j.set. distrust are the replicas
// the parent blames; only replicas in within are asked; hint, from a
// directory heal, lets a sink reuse an inode it has under another name.
func (h *Healer) healPath(ctx context.Context, j *job, path string, distrust, within replicate.Mask, hint *dirHint) error {
	unlock, err := h.locks.lock(ctx, j.set, path)
	if err != nil {
		return err
	}
	defer unlock()
	p, err := h.healOnce(ctx, j, path, distrust, within, hint, 0)
	if err != nil || p == nil || !p.changed || !p.copies[p.src].Attr.IsDir() {
		return err
	}
	// Clients changed the directory's names while it was healed: a
	// directory written to all the time changes between every look and
	// ClearPending, and would never be done. Heal it again with its names
	// held still on the bricks (layer.EntryLocker). The sinks names were
	// removed from stay blamed through these passes: a create that raced
	// with the removal reaches the good copies only after the hold.
	return h.healHeld(ctx, j, path, distrust, within, hint, p.unsure)
}

// errHeldElsewhere is what a held heal returns when another healer holds
// the directory: nothing was healed, and the caller (a parent directory's
// heal) must keep its marks for a later pass.
var errHeldElsewhere = errors.New("heal: another healer holds the directory's names")

// heldPasses bounds the heals of a held directory: an operation that was
// under way as the hold began may still change it once.
const heldPasses = 3

// healHeld heals directory path while the bricks hold its names still.
// Another healer holding it leaves the marks for a later pass
// (errHeldElsewhere).
func (h *Healer) healHeld(ctx context.Context, j *job, path string, distrust, within replicate.Mask, hint *dirHint, unsure replicate.Mask) error {
	release, ok := h.holdEntries(ctx, j.set, path, within)
	if !ok {
		return fmt.Errorf("%s: %w", path, errHeldElsewhere)
	}
	defer release()
	for range heldPasses {
		p, err := h.healOnce(ctx, j, path, distrust, within, hint, unsure)
		if err != nil || p == nil || !p.changed {
			return err
		}
		unsure |= p.unsure
	}
	h.log.Debug("directory still changing while held", "path", path)
	return nil
}

// healOnce looks at the copies of path, judges them and heals them, and
// returns the plan it followed (nil: none). unsure are sinks that stay
// blamed whatever this pass finds (see plan.unsure).
func (h *Healer) healOnce(ctx context.Context, j *job, path string, distrust, within replicate.Mask, hint *dirHint, unsure replicate.Mask) (*plan, error) {
	copies := h.look(ctx, j.set, path, within)
	h.looked.Add(1)
	p, err := h.plan(ctx, j, path, copies, ownMarks(copies, h.refusedHere(ctx, j.set, path, copies, distrust)))
	if p != nil {
		p.unsure = unsure
	}
	if err != nil || p == nil {
		if err == nil {
			h.noteSplit(j.set, path, layer.Gfid{}, false)
		}
		return nil, err
	}
	if p.remove != 0 {
		hint.changedOn(p.remove)
		return nil, h.removeStale(ctx, j.set, path, p)
	}
	if moved, err := h.gather(ctx, j.set, path, p, hint); err != nil {
		return nil, err
	} else if moved != 0 {
		// Judged again with the moved copies and their own marks.
		hint.changedOn(moved)
		jj := *j
		jj.crawl = jj.crawl || !j.deep
		return h.healOnce(ctx, &jj, path, distrust&^moved, within, hint, unsure)
	}
	if err := h.apply(ctx, j, path, p, hint); err != nil {
		return nil, err
	}
	if p.forced {
		h.log.Info("split-brain resolved", "path", path, "source", h.sets[j.set][p.src].Name)
	}
	h.noteSplit(j.set, path, layer.Gfid{}, false)
	return p, nil
}

// ownMarks drops from distrust (the replicas whose view of the parent's
// names its heal blames) those whose copy of path is the directory a
// trusted copy is: the name is right there, and what the directory holds
// is judged by its own marks, which record what each copy missed in it.
// Distrusted, a copy the parent's heal had just moved there from its
// stale name (relocate) lost the names made in it under that name, which
// a quorum had acknowledged (sim replica3x2-dirs seed 62: a file written
// in a directory whose rename a dying client left on one replica).
func ownMarks(copies []replicate.Copy, distrust replicate.Mask) replicate.Mask {
	if distrust == 0 {
		return 0
	}
	t := -1
	for i, c := range copies {
		if !distrust.Has(i) && c.Err == nil && c.Attr.IsDir() {
			t = i
			break
		}
	}
	if t < 0 {
		return distrust
	}
	for i, c := range copies {
		if distrust.Has(i) && c.Err == nil && sameInode(c.Attr, copies[t].Attr) {
			distrust &^= replicate.Bit(i)
		}
	}
	return distrust
}

// holdEntries asks every replica of set si in within to hold the names
// of directory path still, in replica order, and returns what lets them
// go. A replica that cannot hold names (not a brick over the network, or
// an older one) is healed without; false if another healer holds them.
func (h *Healer) holdEntries(ctx context.Context, si int, path string, within replicate.Mask) (release func(), ok bool) {
	var held []layer.EntryLocker
	release = func() {
		for _, l := range held {
			l.UnlockEntries(context.WithoutCancel(ctx), path) //nolint:errcheck // a closed connection lets go too
		}
	}
	for r, rep := range h.sets[si] {
		l, can := rep.Layer.(layer.EntryLocker)
		if !within.Has(r) || !can || !h.up(si, r) {
			continue
		}
		err := l.LockEntries(ctx, path)
		if errors.Is(err, syscall.EAGAIN) {
			release()
			return nil, false
		}
		if err == nil {
			held = append(held, l)
		}
	}
	return release, true
}

// plan judges the copies of path and decides the heal; nil means there is
// nothing to do (or nothing that can be done now).
func (h *Healer) plan(ctx context.Context, j *job, path string, copies []replicate.Copy, distrust replicate.Mask) (*plan, error) {
	arbs := h.arbs[j.set]
	p := &plan{copies: copies, v: h.judge(j.set, copies, distrust), data: -1}
	v := p.v
	switch {
	case v.SplitBrain:
		src := -1
		if j.choose != nil {
			src = j.choose(copies, candidates(copies, v.Present, arbs))
		}
		// A client that went away with the file, or the names of its
		// directory (j.names), half changed: neither version can have
		// been acknowledged over the other (abandoned.go).
		if src < 0 && h.data == nil && (dirtyAmong(copies, v.Present) || j.names) {
			if !h.quietNow(p) {
				if !dirtyAmong(copies, v.Present) {
					// Only the directory's mark brings a later scan
					// back: it must stay.
					return nil, fmt.Errorf("%s: %w", path, errNotQuiet)
				}
				return nil, nil // a later scan looks again
			}
			src = abandonedSource(copies, trusted(copies, v.Present, distrust, arbs))
			p.dirty = src >= 0
		}
		good := replicate.Bit(src)
		if src < 0 && j.choose == nil && h.data != nil {
			good = h.readable(ctx, j.set, copies, v.Present)
			src = good.First()
			if good != 0 && good == v.Present {
				// One inode on every brick, its fragments blaming each
				// other in a cycle: see cycle.
				src, p.cycle = h.agreedSize(j.set, copies, good), true
			}
		}
		if src < 0 {
			g := copies[v.Present.First()].Attr.Gfid
			h.noteSplit(j.set, path, g, true)
			h.log.Debug("split-brain left alone", "path", path)
			return nil, fmt.Errorf("%s: %w", path, ErrSplitBrain)
		}
		p.src, p.good, p.forced = src, good, true
		p.sinks = (v.Present | v.Absent | v.Failed) &^ p.good
		if p.cycle {
			// Checked first, marks and all: a brick without the file
			// gets it once the others agree (settling a sink's heal
			// would drop the marks of copies not yet checked).
			p.sinks = 0
		}
	case v.Good == 0:
		if errors.Is(v.Err, syscall.ENOENT) && v.Bad != 0 {
			p.remove = v.Bad // only distrusted copies still have it
			p.lack = v.Absent &^ distrust
			return p, nil
		}
		if v.Err == nil || errors.Is(v.Err, syscall.ENOENT) || v.Present|v.Absent|v.Failed == 0 {
			return nil, nil // gone everywhere, or nobody answers
		}
		return nil, fmt.Errorf("%s: %w", path, v.Err)
	default:
		p.good, p.sinks = v.Good, v.Bad
		if !j.deep && !j.names {
			// Only what the marks explain: a copy nobody blames that
			// differs may be a client's operation still under way.
			// Full heals every difference.
			p.sinks &= v.Blamed | distrust
		}
		p.src = v.Good.First()
		if a := copies[p.src].Attr; a.IsReg() && v.Good&^arbs != 0 {
			p.src = (v.Good &^ arbs).First()
		}
		if j.deep && p.sinks == 0 && h.data == nil && copies[p.src].Attr.IsReg() { // disperse: Dirty marks and verify
			h.sizesDiffer(j.set, path, p, arbs)
		}
		if h.data == nil && copies[p.src].Attr.IsReg() && dirtyAmong(copies, p.good) && !h.abandoned(j.set, path, p, arbs) {
			return nil, nil // not quiet yet: a later scan looks again
		}
		if copies[p.src].Attr.IsDir() && dirtyAmong(copies, p.good) && !h.abandonedDir(path, p) {
			return nil, nil
		}
	}
	if a := p.attr(); a.IsReg() && a.Linkto == "" {
		p.data = (p.good &^ arbs).First()
		if p.data < 0 && p.sinks&^arbs != 0 {
			// No copy of the data is reachable: only arbiters can be
			// given the names and metadata now.
			p.sinks &= arbs
			p.partial = true
		}
	}
	if a := p.attr(); h.data != nil && a.IsReg() && a.Linkto == "" {
		// A full heal checks every file's data on every brick (a scrub).
		p.verify = j.deep || p.cycle
		for i, c := range copies {
			if p.good.Has(i) && c.Attr.Pending&layer.Dirty != 0 {
				p.verify = true
			}
		}
	}
	if a := p.attr(); p.sinks == 0 && !p.verify && !((j.deep || j.crawl) && a.IsDir()) {
		if p.partial {
			return nil, fmt.Errorf("%s: %w", path, errNoSource)
		}
		return nil, nil
	}
	return p, nil
}

// sizesDiffer is a full heal's look at a regular file whose copies no
// mark blames: a client that died in the middle of a write (or a brick
// written behind the volume's back) can leave copies of different sizes
// with nothing to say which is right. A strict majority of the data
// copies sharing one size is the source, and the others become sinks;
// without one the copies are left alone and the difference logged. (Equal
// sizes with different contents are not seen: that needs reading every
// copy.)
func (h *Healer) sizesDiffer(si int, path string, p *plan, arbs replicate.Mask) {
	bySize := map[uint64]replicate.Mask{}
	data := p.good &^ arbs
	for i, c := range p.copies {
		if data.Has(i) {
			bySize[c.Attr.Size] |= replicate.Bit(i)
		}
	}
	if len(bySize) < 2 {
		return
	}
	for _, m := range bySize {
		if 2*m.Count() > data.Count() {
			h.log.Info("copies of different sizes with no mark: healed from the copies that agree", "path", path,
				"source", h.names(si, uint64(m)), "sinks", h.names(si, uint64(data&^m)))
			p.good, p.sinks, p.src = m|(p.good&arbs), data&^m, m.First()
			return
		}
	}
	h.log.Warn("copies of different sizes with no mark and no majority: left alone", "path", path, "copies", h.names(si, uint64(data)))
}

// readable returns, for a set whose bricks hold fragments (Options.Data),
// the present copies of the version of a regular file under path that
// heal keeps when the copies are of different inodes with nothing to
// tell them apart (0: none, the split-brain stays):
//   - the one version enough bricks hold under the name to be read (a
//     quorum: K of a disperse set's bricks): no other version under the
//     name can be read, so none can hold what a client was told it wrote
//     (a client died making or replacing the file on fewer bricks than
//     that; sim disperse2+1-full seed 52);
//   - with every brick of the set up, else, the one version K bricks hold
//     by its id under any name (a rename half done moved it on some
//     bricks: the others hold it under its old name or parked; seed 64);
//   - with every brick up and no version K bricks hold, none can ever be
//     read: an empty one if there is one, else none (creates that each
//     reached too few bricks: seeds 54, 60). Of several, the one most
//     copies share, else the newest.
func (h *Healer) readable(ctx context.Context, si int, copies []replicate.Copy, present replicate.Mask) replicate.Mask {
	if h.quorate == nil || !sameRegular(copies, present) {
		return 0
	}
	byGfid := map[layer.Gfid]replicate.Mask{}
	for i, c := range copies {
		if present.Has(i) {
			byGfid[c.Attr.Gfid] |= replicate.Bit(i)
		}
	}
	if m := h.onlyQuorate(si, byGfid, func(m replicate.Mask) replicate.Mask { return m }); m != 0 || !h.allUp(si) {
		return m
	}
	sure := true
	if m := h.onlyQuorate(si, byGfid, func(m replicate.Mask) replicate.Mask {
		held, ok := h.holding(ctx, si, copies[m.First()].Attr)
		sure = sure && ok
		return held
	}); m != 0 || !sure {
		return m
	}
	var empty replicate.Mask
	for i, c := range copies {
		if present.Has(i) && c.Attr.Size == 0 {
			empty |= replicate.Bit(i)
		}
	}
	if src := abandonedSource(copies, empty); src >= 0 {
		return byGfid[copies[src].Attr.Gfid]
	}
	return 0
}

// onlyQuorate returns the copies of the one version (of byGfid) whose
// holders make a quorum, 0 if none or several do.
func (h *Healer) onlyQuorate(si int, byGfid map[layer.Gfid]replicate.Mask, holders func(replicate.Mask) replicate.Mask) replicate.Mask {
	var found replicate.Mask
	for _, m := range byGfid {
		if !h.quorate(si, holders(m)) {
			continue
		}
		if found != 0 {
			return 0
		}
		found = m
	}
	return found
}

// holding returns the replicas of set si that hold inode a by its id,
// under any name or none (layer.IDPath); ok is false if one could not
// say.
func (h *Healer) holding(ctx context.Context, si int, a layer.Attr) (m replicate.Mask, ok bool) {
	ok = true
	for i, c := range h.look(ctx, si, layer.IDPath(a.Gfid), h.all(si)) {
		switch {
		case c.Err == nil && sameInode(a, c.Attr):
			m |= replicate.Bit(i)
		case c.Err != nil && !errors.Is(c.Err, syscall.ENOENT):
			ok = false
		}
	}
	return m, ok
}

// allUp reports whether every replica of set si is up.
func (h *Healer) allUp(si int) bool {
	for i := range h.sets[si] {
		if !h.up(si, i) {
			return false
		}
	}
	return true
}

// agreedSize returns a copy of m whose size enough copies of m share to
// make a quorum, -1 if none.
func (h *Healer) agreedSize(si int, copies []replicate.Copy, m replicate.Mask) int {
	bySize := map[uint64]replicate.Mask{}
	for i, c := range copies {
		if m.Has(i) {
			bySize[c.Attr.Size] |= replicate.Bit(i)
		}
	}
	for _, same := range bySize {
		if h.quorate(si, same) {
			return same.First()
		}
	}
	return -1
}

// sameRegular reports whether the copies in m are all regular files.
func sameRegular(copies []replicate.Copy, m replicate.Mask) bool {
	for i, c := range copies {
		if m.Has(i) && !c.Attr.IsReg() {
			return false
		}
	}
	return m != 0
}

// trusted is candidates among the copies not distrusted (their directory
// blames them, or recorded the removal of the inode they hold), if a data
// copy is among them: a version a copy kept by missing its removal must
// not come back (and an arbiter holds no data to heal from).
func trusted(copies []replicate.Copy, present, distrust, arbs replicate.Mask) replicate.Mask {
	if present&^distrust&^arbs != 0 {
		return candidates(copies, present&^distrust, arbs)
	}
	return candidates(copies, present, arbs)
}

// candidates returns the copies a policy may choose from: those present,
// without arbiters for a regular file that has another copy.
func candidates(copies []replicate.Copy, present, arbs replicate.Mask) replicate.Mask {
	for i, c := range copies {
		if present.Has(i) && c.Attr.IsReg() && present&^arbs != 0 {
			return present &^ arbs
		}
	}
	return present
}

// apply heals the sinks of p from its source and settles the marks.
func (h *Healer) apply(ctx context.Context, j *job, path string, p *plan, hint *dirHint) error {
	si := j.set
	if err := h.premark(ctx, si, path, p); err != nil {
		return err
	}
	var errs []error
	members := p.good // copies holding the source's inode
	var made, moved replicate.Mask
	for s := range h.sets[si] {
		if !p.sinks.Has(s) || p.good.Has(s) {
			continue
		}
		how, err := h.place(ctx, si, s, path, p, hint)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s on %s: %w", path, h.sets[si][s].Name, err))
			continue
		}
		members |= replicate.Bit(s)
		switch how {
		case placeMade:
			made |= replicate.Bit(s)
		case placeMoved:
			moved |= replicate.Bit(s)
		}
	}
	hint.changedOn(made | moved)
	src := p.attr()
	if src.IsReg() && moved != 0 {
		h.keepNewerMoved(ctx, si, path, p, moved)
	}
	if src.IsDir() {
		// A directory just made on a sink lacks every name, not only
		// those the marks explain: its names are healed as if it were
		// blamed (a directory moved while the sink was away is copied
		// whole, marks or not). A directory a sink had under another
		// name was renamed while it was away: the index entries of what
		// was marked under it before name its old path and are lost
		// (healMoved cannot follow them), so its whole subtree is
		// visited for marks.
		jj := j
		if moved != 0 && !j.deep && !j.crawl {
			c := *j
			c.crawl = true
			jj = &c
		}
		if p.dirty && !jj.names {
			c := *jj
			c.names = true
			jj = &c
		}
		removed, err := h.healEntries(ctx, jj, path, p, members, made)
		if err != nil && made != 0 && h.gone(ctx, si, path, p) {
			for s := range h.sets[si] {
				if made.Has(s) {
					h.unmake(ctx, si, s, path, src)
				}
			}
		}
		if err != nil {
			// The names are not all right: no mark may be cleared.
			return errors.Join(append(errs, err)...)
		}
		p.unsure |= removed & p.sinks
	}
	var healed replicate.Mask
	for s := range h.sets[si] {
		if !p.sinks.Has(s) || !members.Has(s) {
			continue
		}
		if s != p.src {
			if err := h.healContent(ctx, si, s, path, p); err != nil {
				if made.Has(s) && h.gone(ctx, si, path, p) {
					h.unmake(ctx, si, s, path, src)
				}
				if errors.Is(err, syscall.ESTALE) { // errChanged, or the DataHealer's own
					h.log.Debug("changed while healing; marks kept", "replica", h.sets[si][s].Name, "path", path)
					h.kept.Store(true)
					continue
				}
				errs = append(errs, fmt.Errorf("%s on %s: %w", path, h.sets[si][s].Name, err))
				continue
			}
		}
		healed |= replicate.Bit(s)
	}
	if p.unsure != 0 {
		// A client's operation on a name can reach a sink before the
		// names were held (or the copies looked at) and the good copies
		// only once they are let go: a create, which the heal then
		// removes from the sink as stale, or a removal or rename, whose
		// name the heal gives back to the sink. Nothing marks it (every
		// replica did it), so the sink stays blamed until a later pass
		// changes no name on it.
		h.log.Debug("names changed on sinks; looked at again", "path", path, "sinks", h.names(si, uint64(p.unsure)))
		h.kept.Store(true)
	}
	if healed != 0 {
		h.healed.Add(1)
		h.log.Debug("healed", "path", path, "sinks", h.names(si, uint64(healed)))
	}
	if len(errs) > 0 {
		h.failed.Add(1)
	}
	errs = append(errs, h.settle(ctx, si, path, p, healed&^p.unsure))
	if p.verify && errors.Join(errs...) == nil {
		errs = append(errs, h.verify(ctx, si, path, p))
	}
	if p.partial {
		errs = append(errs, fmt.Errorf("%s: %w", path, errNoSource))
	}
	return errors.Join(errs...)
}

// premark makes every good copy blame the sinks it does not blame yet
// (and, merging, the replicas down), before any sink is written: a heal
// cut short then stays recorded. The copy's ctime is looked at again
// afterwards, before anything is read from it, for the final
// ClearPending.
func (h *Healer) premark(ctx context.Context, si int, path string, p *plan) error {
	sinks := p.sinks
	if p.v.Merge || p.dirty {
		// The union of names made here is new to a replica down too: it
		// is blamed for it, or once back, its copy (blamed by none) would
		// be taken as good beside the merged ones, the names it lacks
		// never given to it (a review, 2026-11-28). So is what the heal
		// of copies a client went away from settles: back with its own
		// Dirty mark, the replica would otherwise settle them again, its
		// way (the decider of a directory's name: heal/dirname.go; a
		// review, 2026-11-29).
		sinks |= p.v.Down
	}
	if p.dirty {
		sinks &^= p.good // a Dirty directory's copies: the mark stays until settle
	}
	for c := range h.sets[si] {
		if !p.good.Has(c) {
			continue
		}
		a := &p.copies[c].Attr
		missing := uint64(sinks) &^ a.Pending &^ (1 << uint(c))
		if missing == 0 {
			continue
		}
		if err := h.stores[si][c].MarkPending(ctx, path, a.Gfid, missing); err != nil {
			return fmt.Errorf("%s: mark on %s: %w", path, h.sets[si][c].Name, err)
		}
		if p.marked == nil {
			p.marked = make([]uint64, len(h.sets[si]))
		}
		p.marked[c] = missing
		fresh, err := h.sets[si][c].Layer.Lookup(ctx, path)
		if err != nil {
			return err
		}
		if fresh.Gfid != a.Gfid {
			return fmt.Errorf("%s changed on %s while healing: %w", path, h.sets[si][c].Name, syscall.ESTALE)
		}
		*a = fresh
	}
	return nil
}

// settle moves the marks after a heal: a healed sink takes over the good
// copies' blame of replicas still behind, then the good copies (and, for
// a resolved split-brain or merged directories, the healed sinks
// themselves) stop blaming the healed sinks. A copy that changed since it
// was looked at (ESTALE) keeps its marks for the next scan.
func (h *Healer) settle(ctx context.Context, si int, path string, p *plan, healed replicate.Mask) error {
	if healed == 0 {
		return nil
	}
	var behind uint64
	for c := range h.sets[si] {
		if p.good.Has(c) {
			behind |= p.copies[c].Attr.Pending
		}
	}
	behind &^= uint64(healed | p.good)
	g := p.attr().Gfid
	var errs []error
	for s := range h.sets[si] {
		if healed.Has(s) && !p.good.Has(s) && behind != 0 {
			errs = append(errs, h.stores[si][s].MarkPending(ctx, path, g, behind))
		}
	}
	// A healed sink now holds the source's inode: what it blamed the
	// others for was undone by the heal, so it stops blaming the copies
	// it now equals (looked up again: the heal changed its ctime).
	// Without this, two sinks that blamed each other (each missed what
	// the other did while the good copies saw both) would be healed
	// again at every scan.
	equal := uint64(healed | p.good)
	for c := range h.sets[si] {
		a := p.copies[c].Attr
		if p.copies[c].Err != nil || a.Gfid != g {
			continue
		}
		if healed.Has(c) {
			var err error
			if a, err = h.sets[si][c].Layer.Lookup(ctx, path); err != nil || a.Gfid != g {
				continue
			}
		}
		drop := equal
		if healed.Has(c) || p.dirty {
			drop |= layer.Dirty // its data was rebuilt from the good copies, or is theirs
		}
		if mask := a.Pending & drop &^ (1 << uint(c)); mask != 0 {
			err := h.stores[si][c].ClearPending(ctx, path, g, mask, a.Ctime)
			p.changed = p.changed || changedMeanwhile(err)
			errs = append(errs, h.logClear(si, c, path, err))
		}
	}
	return errors.Join(errs...)
}

// changedMeanwhile reports whether a ClearPending failed because the copy
// changed (or went) since the healer looked.
func changedMeanwhile(err error) bool {
	return errors.Is(err, syscall.ESTALE) || errors.Is(err, syscall.ENOENT)
}

// verify has the DataHealer check that the fragments of a file some
// client marked Dirty agree, then clears the mark on the copies that still
// are as it looked at them.
func (h *Healer) verify(ctx context.Context, si int, path string, p *plan) error {
	n, err := h.data.HealData(ctx, si, path, p.attr().Gfid, p.good, 0, p.attr().Size)
	h.bytes.Add(n)
	if errors.Is(err, ErrBusy) {
		h.log.Debug("being written: checked later", "path", path)
		return nil
	}
	if err != nil {
		return err
	}
	g := p.attr().Gfid
	mask := uint64(layer.Dirty)
	if p.cycle {
		mask |= uint64(p.good) // each was checked against the others
	}
	var errs []error
	for c := range h.sets[si] {
		if !p.good.Has(c) {
			continue
		}
		a, err := h.sets[si][c].Layer.Lookup(ctx, path)
		if err != nil || a.Gfid != g || a.Pending&mask == 0 {
			continue
		}
		err = h.stores[si][c].ClearPending(ctx, path, g, a.Pending&mask, a.Ctime)
		errs = append(errs, h.logClear(si, c, path, err))
	}
	return errors.Join(errs...)
}

// logClear swallows the ClearPending errors that only mean "not now".
func (h *Healer) logClear(si, c int, path string, err error) error {
	if changedMeanwhile(err) {
		h.log.Debug("changed while healing; marks kept", "replica", h.sets[si][c].Name, "path", path)
		h.kept.Store(true)
		return nil
	}
	return err
}

// keepNewerMoved takes out of p's sinks those of moved (given the
// source's inode under path by a rename or link of their own copy of it)
// whose copy blames the source: it holds changes the source's copy
// missed (a write acknowledged by a quorum the source's replica was not
// in). Healed from the source, they lost it: the source's replica had
// done alone a rename its copy of the directory made heal take as done
// (heal TestRenameByOneKeepsTheOthersNewerContent). The blame premark
// gave the source's copies against them is taken back, and a later pass
// heals the inode by its own marks (the source's copy from theirs).
func (h *Healer) keepNewerMoved(ctx context.Context, si int, path string, p *plan, moved replicate.Mask) {
	want := p.attr()
	var newer replicate.Mask
	for s := range h.sets[si] {
		if !moved.Has(s) {
			continue
		}
		a, err := h.sets[si][s].Layer.Lookup(ctx, path)
		if err == nil && sameInode(a, want) && replicate.Mask(a.Pending).Has(p.src) {
			newer |= replicate.Bit(s)
		}
	}
	if newer == 0 {
		return
	}
	for c := range h.sets[si] {
		if back := uint64(newer) & p.markedOn(c); back != 0 {
			a := p.copies[c].Attr
			if err := h.stores[si][c].ClearPending(ctx, path, a.Gfid, back, a.Ctime); err != nil {
				h.log.Debug("premark not taken back", "replica", h.sets[si][c].Name, "path", path, "err", err)
			}
		}
	}
	p.sinks &^= newer
	h.kept.Store(true)
	h.log.Debug("sinks hold newer copies of the inode they were given: healed from them later", "path", path, "sinks", h.names(si, uint64(newer)))
}

// markedOn is the blame premark added on copy c.
func (p *plan) markedOn(c int) uint64 {
	if p.marked == nil {
		return 0
	}
	return p.marked[c]
}
