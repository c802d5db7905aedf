package heal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// healEntries heals the names of directory path on members, the copies
// that hold the directory. Each name that differs between them (every
// name in a Full crawl) is healed as an inode of its own, distrusting the
// replicas the directory's copies blame. Names the good copies have go
// first, so that a sink can reuse an inode it holds under a stale name
// before that name is removed. made are the sinks on which the directory
// was just created: every name they lack is healed, as if they were
// blamed. It returns the replicas whose names it changed (dirHint.changed).
func (h *Healer) healEntries(ctx context.Context, j *job, path string, p *plan, members, made replicate.Mask) (replicate.Mask, error) {
	si := j.set
	hint := &dirHint{lists: make([]map[string]layer.Entry, len(h.sets[si])), good: p.good}
	for r := range h.sets[si] {
		if !members.Has(r) {
			continue
		}
		ents, err := layer.ReadDirAll(ctx, h.sets[si][r].Layer, path)
		if err != nil {
			return 0, err
		}
		hint.lists[r] = make(map[string]layer.Entry, len(ents))
		for _, e := range ents {
			hint.lists[r][e.Name] = e
		}
	}
	hint.index()
	if p.v.Merge {
		hint.gone = h.removedOn(ctx, si, path, members, hint)
	}
	// Three passes: names of the good copies, then their hard links one
	// at a time (so that the second name of an inode links to the first),
	// then names only sinks have.
	var passes [3][]string
	seen := map[string]bool{}
	if p.dirty {
		var err error
		if seen, err = h.undecided(ctx, si, members, hint); err != nil {
			return 0, err
		}
	}
	for _, l := range hint.lists {
		for name := range l {
			if seen[name] {
				continue
			}
			seen[name] = true
			switch {
			case !j.deep && !j.crawl && hint.agree(name, members):
			case hint.linked(name):
				passes[1] = append(passes[1], name)
			case hint.onGood(name):
				passes[0] = append(passes[0], name)
			default:
				passes[2] = append(passes[2], name)
			}
		}
	}
	var errs []error
	for i, names := range passes {
		slices.Sort(names)
		g := group{h: h, serial: i == 1}
		// The copies the directory's marks blame are distrusted (in a
		// merge, all of them: the union of their names is kept, but a
		// name a copy recorded as removed is judged without the copies
		// that still hold it, so that it goes from them); a
		// name only stale copies have is judged by the others alone
		// (a merge's copies among them), so that it goes.
		distrust := p.v.Blamed | made
		if i == 2 {
			distrust = p.v.StaleNames() | made
		}
		for _, name := range names {
			d := distrust
			if held := hint.removedFrom(name); held != 0 {
				d = held | made // removed on a copy they missed it on
			} else if held := h.unreadableRemoved(ctx, si, name, hint); held != 0 {
				d = held | made
			}
			g.Go(func() error {
				return h.healPath(ctx, j, layer.Join(path, name), d, members, hint)
			})
		}
		errs = append(errs, g.Wait())
	}
	return hint.changed, errors.Join(errs...)
}

// unreadableRemoved returns, on a set whose bricks hold fragments, the
// copies that hold name in a merged directory where another copy recorded
// the name as removed with another inode, when no version they hold is
// held by K bricks under any name (every brick up): no client can have
// been told that version was made there, and it can never be read. The
// name goes, as a recorded removal's does. (A brick left with another
// inode under the name by renames half done brought a removed file back:
// sim disperse2+1-full seed 54.)
func (h *Healer) unreadableRemoved(ctx context.Context, si int, name string, d *dirHint) replicate.Mask {
	if h.data == nil || h.quorate == nil || !d.recordsRemoved(name) || !h.allUp(si) {
		return 0
	}
	var holders replicate.Mask
	for r, l := range d.lists {
		e, ok := l[name]
		if !ok {
			continue
		}
		if !e.Attr.IsReg() {
			return 0
		}
		held, sure := h.holding(ctx, si, e.Attr)
		if !sure || h.quorate(si, held) {
			return 0
		}
		holders |= replicate.Bit(r)
	}
	return holders
}

// recordsRemoved reports whether a copy recorded name as removed (with
// any inode).
func (d *dirHint) recordsRemoved(name string) bool {
	for rm := range d.gone {
		if rm.Name == name {
			return true
		}
	}
	return false
}

// dirHint is what a directory heal knows of the directory's copies.
type dirHint struct {
	mu     sync.Mutex
	lists  []map[string]layer.Entry // per replica; nil for non-members
	byGfid []map[layer.Gfid][]string
	good   replicate.Mask
	// changed: the replicas whose names the heal changed (see
	// plan.unsure).
	changed replicate.Mask
	// gone: in a merge, the names (and gfids) a copy recorded as removed
	// (replicate.Gone).
	gone map[layer.Removal]bool
}

// removedOn reads the removal records of directory path on the members
// of set si (see replicate.Gone). A copy that cannot say records nothing.
func (h *Healer) removedOn(ctx context.Context, si int, path string, members replicate.Mask, d *dirHint) map[layer.Removal]bool {
	recs := make([][]layer.Removal, len(h.sets[si]))
	var wg sync.WaitGroup
	for r := range h.sets[si] {
		if members.Has(r) {
			wg.Go(func() { recs[r], _ = h.stores[si][r].Removed(ctx, path) })
		}
	}
	wg.Wait()
	return replicate.Gone(recs, func(r int, name string) bool {
		_, ok := d.lists[r][name]
		return ok
	})
}

// removedFrom returns the copies that hold name as an inode another copy
// recorded as removed from the directory (0: none).
func (d *dirHint) removedFrom(name string) replicate.Mask {
	if len(d.gone) == 0 {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var m replicate.Mask
	for r, l := range d.lists {
		if e, ok := l[name]; ok && d.gone[layer.Removal{Name: name, Gfid: e.Attr.Gfid}] {
			m |= replicate.Bit(r)
		}
	}
	return m
}

// changedOn records that the heal changed names on the replicas of m:
// removed a stale name, or made, linked or renamed one (d may be nil: a
// heal not started by a directory's).
func (d *dirHint) changedOn(m replicate.Mask) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.changed |= m
	d.mu.Unlock()
}

func (d *dirHint) index() {
	d.byGfid = make([]map[layer.Gfid][]string, len(d.lists))
	for r, l := range d.lists {
		d.byGfid[r] = map[layer.Gfid][]string{}
		for name, e := range l {
			d.byGfid[r][e.Attr.Gfid] = append(d.byGfid[r][e.Attr.Gfid], name)
		}
	}
}

// agree reports whether every member lists name with one gfid and type.
func (d *dirHint) agree(name string, members replicate.Mask) bool {
	var ref *layer.Entry
	for r, l := range d.lists {
		if !members.Has(r) {
			continue
		}
		e, ok := l[name]
		if !ok {
			return false
		}
		if ref == nil {
			ref = &e
		} else if !sameInode(e.Attr, ref.Attr) {
			return false
		}
	}
	return true
}

// onGood reports whether a good copy lists name.
func (d *dirHint) onGood(name string) bool {
	_, g := d.onGoodAs(name, layer.Gfid{})
	return g
}

// onGoodAs reports whether a good copy lists name with gfid g, and
// whether one lists name at all.
func (d *dirHint) onGoodAs(name string, g layer.Gfid) (same, any bool) {
	for r, l := range d.lists {
		if e, ok := l[name]; ok && d.good.Has(r) {
			any = true
			same = same || e.Attr.Gfid == g
		}
	}
	return same, any
}

// listsAs reports whether replica r's copy lists name with gfid g.
func (d *dirHint) listsAs(r int, name string, g layer.Gfid) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.lists[r][name]
	return ok && e.Attr.Gfid == g
}

// linked reports whether a good copy lists name as a non-directory with
// other names.
func (d *dirHint) linked(name string) bool {
	for r, l := range d.lists {
		if e, ok := l[name]; ok && d.good.Has(r) && !e.Attr.IsDir() && e.Attr.Nlink > 1 {
			return true
		}
	}
	return false
}

// other finds another name of inode g in sink s's copy of the directory:
// a hard link (the good copies have that name for g too), or a stale name
// (the good copies do not have it at all: g was renamed).
func (d *dirHint) other(s int, name string, g layer.Gfid) (other string, link bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range d.byGfid[s][g] {
		if n == name {
			continue
		}
		same, any := d.onGoodAs(n, g)
		if same {
			return n, true
		}
		if !any {
			return n, false
		}
	}
	return "", false
}

// renamed records that sink s renamed from to to.
func (d *dirHint) renamed(s int, from, to string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.lists[s][from]
	delete(d.lists[s], from)
	if over, ok := d.lists[s][to]; ok { // a directory a decided move replaced (dirname.go)
		d.byGfid[s][over.Attr.Gfid] = slices.DeleteFunc(d.byGfid[s][over.Attr.Gfid], func(n string) bool { return n == to })
	}
	d.lists[s][to] = e
	names := d.byGfid[s][e.Attr.Gfid]
	if i := slices.Index(names, from); i >= 0 {
		names[i] = to
	}
}

// added records that sink s now has inode a under name.
func (d *dirHint) added(s int, name string, a layer.Attr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.lists[s][name]; !ok {
		d.lists[s][name] = layer.Entry{Name: name, Attr: a}
		d.byGfid[s][a.Gfid] = append(d.byGfid[s][a.Gfid], name)
	}
}

// sameInode reports whether a and b are one inode as far as names go.
func sameInode(a, b layer.Attr) bool {
	return a.Gfid == b.Gfid && a.Mode&syscall.S_IFMT == b.Mode&syscall.S_IFMT
}

// place makes sink s hold the source's inode at path: another inode under
// the name is removed, a missing one created with the source's gfid (or,
// in a directory heal, taken from another name of it on the sink).
// It reports how the sink came to hold it.
func (h *Healer) place(ctx context.Context, si, s int, path string, p *plan, hint *dirHint) (placed, error) {
	c, want := p.copies[s], p.attr()
	l := h.sets[si][s].Layer
	switch {
	case c.Err == nil && sameInode(c.Attr, want):
		return placeHad, nil
	case c.Err == nil:
		h.log.Debug("replacing another inode", "replica", h.sets[si][s].Name, "path", path,
			"gfid", c.Attr.Gfid, "with", want.Gfid)
		// The inode replaced may live on under another name on the
		// good copies (renamed away while the sink was away, and
		// another made under its old name): parked, its fragment or
		// copy is linked there instead of rebuilt (sim disperse2+1
		// seed 24: the sink's fragment was the only other current one).
		if h.park(ctx, si, s, path, p) {
			h.restoreRenamed(ctx, si, path, c.Attr)
			break
		}
		if err := removeAll(ctx, l, path, c.Attr); err != nil {
			return placeHad, err
		}
	case !errors.Is(c.Err, syscall.ENOENT):
		return placeHad, c.Err
	}
	// The copies were looked at a moment ago, each at its own moment: a
	// client may have renamed or removed the name since (on the sink
	// first, then on the good copies). Give the sink the name only if the
	// source still holds the inode there.
	if h.gone(ctx, si, path, p) {
		return placeHad, fmt.Errorf("%s: %w", path, layer.ErrReplaced)
	}
	how := placeMoved
	held, err := false, error(nil)
	switch {
	case hint != nil && h.reuse(ctx, si, s, p.src, path, want, hint):
		h.renameSettled(ctx, si, want)
	case want.IsDir():
		if held, err = h.moveHere(ctx, si, s, p.src, path, want, false); !held && err == nil {
			how, err = h.make(ctx, si, s, path, p, hint)
		}
		if err != nil {
			return placeHad, err
		}
	case h.linkByID(ctx, si, s, path, want):
		h.renameSettled(ctx, si, want)
	case h.data != nil && want.IsReg() && h.namedElsewhere(ctx, l, want):
		// The sink holds the file's fragment under a stale name that
		// the heal of its directory has yet to park (park, removeStale),
		// possibly at this moment: fewer than K other bricks may hold
		// the current write, and a fragment made anew would leave the
		// stripes nothing to be rebuilt from (sim disperse2+1-full seed
		// 58: the file rebuilt from a stale and an empty fragment).
		// Linked by its id at a later pass, once parked; or, if its
		// name here is that of a rename done by too few replicas, the
		// rename is undone (undoRenameTo).
		if h.undoRenameTo(ctx, si, s, path, want) {
			return placeHad, fmt.Errorf("%s: %w", path, errRenameUndone)
		}
		return placeHad, fmt.Errorf("%s: %w", path, errNamedElsewhere)
	case h.data != nil && want.IsReg() && h.linkByID(ctx, si, s, path, want):
		// Parked since linkByID looked, by the heal of its stale name
		// running beside this one (a fragment made anew instead would
		// leave the parked one to the orphan sweep).
	case hint == nil && want.IsReg() && want.Nlink > 1:
		// A hard-linked file the sink lacks, healed on its own (from the
		// index): its directory's heal makes it, one name linked to the
		// other, where created alone it would be a second inode. Heal
		// that first (healUp does, for errNoParent), then look again.
		return placeHad, errNoParent
	default:
		if how, err = h.make(ctx, si, s, path, p, hint); err != nil {
			return placeHad, err
		}
	}
	if hint != nil {
		_, name := layer.Split(path)
		hint.added(s, name, want)
	}
	return how, nil
}

// make creates the source's inode at path on sink s, which lacks it.
func (h *Healer) make(ctx context.Context, si, s int, path string, p *plan, hint *dirHint) (placed, error) {
	want, l := p.attr(), h.sets[si][s].Layer
	if hint != nil && want.IsReg() {
		h.renameSettledIfNamed(ctx, l, si, want)
	}
	err := h.create(ctx, si, s, path, p)
	if errors.Is(err, syscall.EEXIST) {
		// Made meanwhile (by a client): fine if it is that inode.
		if a, lerr := l.Lookup(ctx, path); lerr == nil && sameInode(a, want) {
			return placeHad, nil
		}
	}
	if errors.Is(err, syscall.ENOENT) {
		return placeHad, errNoParent
	}
	return placeMade, err
}

// placed is how a sink came to hold an inode.
type placed int

const (
	placeHad   placed = iota // it had it already (or got it meanwhile)
	placeMade                // created: a new inode, a directory without names
	placeMoved               // another name of it renamed or linked
)

// linkByID gives sink s the non-directory inode want at path by linking it
// from its id (layer.IDPath), if the sink holds it: a hard link made while
// the sink was away (want has several names), or a file renamed into
// another directory meanwhile whose old name a heal parked already. An
// inode of one name that the sink still holds under another, stale name
// is not linked: until that name's directory is healed, a client's
// create or truncation that finds the stale name on the sink would reach
// the live inode through it (a create is made on every copy, and the
// sink's copy of the name is only seen to be another file afterwards).
// The content is healed afterwards as for any sink. It reports whether
// it did.
func (h *Healer) linkByID(ctx context.Context, si, s int, path string, want layer.Attr) bool {
	if want.IsDir() {
		return false
	}
	l := h.sets[si][s].Layer
	id := layer.IDPath(want.Gfid)
	if had, err := l.Lookup(ctx, id); err != nil || had.Nlink > 0 && want.Nlink <= 1 {
		return false
	}
	a, err := l.Link(ctx, id, path)
	if err != nil {
		return false
	}
	if !sameInode(a, want) || a.Linkto != want.Linkto {
		// Another kind of inode under that id (a pointer where the
		// source has data): made anew instead.
		l.Unlink(ctx, path)
		return false
	}
	h.log.Debug("linked by id", "replica", h.sets[si][s].Name, "path", path, "gfid", want.Gfid)
	return true
}

// namedElsewhere reports whether the brick of l holds the inode want
// (by its id) under some name of its own: want, with one name on the
// source, has it under a stale one (see linkByID).
func (h *Healer) namedElsewhere(ctx context.Context, l layer.Layer, want layer.Attr) bool {
	had, err := l.Lookup(ctx, layer.IDPath(want.Gfid))
	return err == nil && sameInode(had, want) && had.Nlink > 0 && want.Nlink <= 1
}

// reuse gives sink s the inode at path by linking or renaming another name
// of it in the same directory; false if there is none or that failed.
func (h *Healer) reuse(ctx context.Context, si, s, src int, path string, want layer.Attr, hint *dirHint) bool {
	dir, name := layer.Split(path)
	other, link := hint.other(s, name, want.Gfid)
	if other == "" {
		return false
	}
	if want.IsDir() {
		// A directory's other name is stale (see dirname.go), unless the
		// source lists it too: a second directory of the gfid, made by
		// an earlier heal, that the sink gets as well.
		if hint.listsAs(src, other, want.Gfid) {
			return false
		}
		link = false
	}
	l := h.sets[si][s].Layer
	from := layer.Join(dir, other)
	var err error
	if link {
		_, err = l.Link(ctx, from, path)
	} else if err = l.Rename(ctx, from, path, layer.RenameNoReplace); err == nil {
		hint.renamed(s, other, name)
	}
	h.log.Debug("reusing another name", "replica", h.sets[si][s].Name, "from", from, "to", path,
		"link", link, "err", err)
	return err == nil
}

// create makes the source's inode at path on sink s, with its gfid, type,
// mode and owner; a regular file is empty.
func (h *Healer) create(ctx context.Context, si, s int, path string, p *plan) error {
	a := p.attr()
	own := layer.Owner{Uid: a.Uid, Gid: a.Gid, Gfid: a.Gfid}
	l := h.sets[si][s].Layer
	var err error
	switch a.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		_, err = l.Mkdir(ctx, path, layer.MkdirIn{Owner: own, Mode: a.Mode & 07777})
	case syscall.S_IFLNK:
		target, rerr := h.sets[si][p.src].Layer.Readlink(ctx, path)
		if rerr != nil {
			return rerr
		}
		_, err = l.Symlink(ctx, path, layer.SymlinkIn{Owner: own, Target: target})
	default: // files (and distribute pointers), fifos, devices, sockets
		_, err = l.Mknod(ctx, path, layer.MknodIn{Owner: own, Mode: a.Mode, Rdev: a.Rdev, Linkto: a.Linkto})
	}
	return err
}

// gone reports whether the source copy no longer holds p's inode at path.
func (h *Healer) gone(ctx context.Context, si int, path string, p *plan) bool {
	a, err := h.sets[si][p.src].Layer.Lookup(ctx, path)
	return errors.Is(err, syscall.ENOENT) || err == nil && !sameInode(a, p.attr())
}

// unmake removes from sink s the inode want it has just made at path,
// whose source went away before its content could be copied (a client
// removed or renamed it meanwhile): the name is on no good copy, and
// nothing may blame the sink for it any more (the directory's heal may
// have found it on no copy and cleared the directory's marks before the
// sink got it).
func (h *Healer) unmake(ctx context.Context, si, s int, path string, want layer.Attr) {
	l := h.sets[si][s].Layer
	a, err := l.Lookup(ctx, path)
	if err != nil || !sameInode(a, want) {
		return
	}
	if err = removeAll(ctx, l, path, a); err != nil {
		h.log.Warn("source gone while healing: the name made could not be removed again", "replica", h.sets[si][s].Name, "path", path, "err", err)
		return
	}
	h.log.Debug("source gone while healing: the name made is removed again", "replica", h.sets[si][s].Name, "path", path)
}

// removeAll removes the inode at path (a, as looked up) from l, with its
// subtree for a directory. What is gone already is fine.
func removeAll(ctx context.Context, l layer.Layer, path string, a layer.Attr) error {
	var err error
	if a.IsDir() {
		ents, rerr := layer.ReadDirAll(ctx, l, path)
		if rerr != nil && !errors.Is(rerr, syscall.ENOENT) {
			return rerr
		}
		for _, e := range ents {
			if err := removeAll(ctx, l, layer.Join(path, e.Name), e.Attr); err != nil {
				return err
			}
		}
		err = l.Rmdir(ctx, path)
	} else {
		err = l.Unlink(ctx, path)
	}
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return err
}

// group runs functions on free heal slots, or inline when there is none
// (so that nested heals never wait for a slot), and collects their errors.
type group struct {
	h      *Healer
	serial bool // run everything inline, in order
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
}

func (g *group) Go(f func() error) {
	if g.serial {
		g.add(f())
		return
	}
	select {
	case g.h.slots <- struct{}{}:
		g.wg.Go(func() {
			defer func() { <-g.h.slots }()
			g.add(f())
		})
	default:
		g.add(f())
	}
}

func (g *group) add(err error) {
	if err != nil {
		g.mu.Lock()
		g.errs = append(g.errs, err)
		g.mu.Unlock()
	}
}

// Wait waits for every function and returns their errors joined.
func (g *group) Wait() error {
	g.wg.Wait()
	return errors.Join(g.errs...)
}
