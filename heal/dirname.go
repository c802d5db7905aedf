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

// A directory has one name. A rename of one that some replicas did and
// others did not, with nothing blaming anybody (the client went away
// between them, and the bricks marked the directories it changed Dirty),
// leaves its copies listing it under two names, or in two directories.
// Given to every copy as other names are, it would be a second
// directory of one gfid on each. Replicate renames a directory on the
// first replica up (the decider) before it sends the rename to the
// others (layer/replicate/rename.go): the decider's name is the one the
// rename reached. So the heal of a Dirty directory gives the others the
// decider's name for such a directory, moving their copy there (reuse,
// moveHere), and does not give them the other names (undecided).

// undecided settles, in the heal of Dirty directory path, the names of
// directories its copies (the members of set si) list under other names,
// or not at all: each copy of such a directory is moved now to where its
// decider (the first good copy holding it) holds it, here or in another
// directory, and the names it had are returned, not to be given to the
// other copies. Left to the heal of the decider's name, the move could
// wait for ever: that heal looks at nothing while the directory itself
// is Dirty and not quiet yet (a review: the copies kept both names,
// their marks cleared); left to the other directory's, its Dirty mark
// can be gone (a client renamed it before the brick marked it).
func (h *Healer) undecided(ctx context.Context, si int, members replicate.Mask, hint *dirHint) (map[string]bool, error) {
	skip := map[string]bool{}
	for g, names := range hint.dirNames(members) {
		if names.agree(members) {
			continue
		}
		if err := h.followDeciderOf(ctx, si, g, names, members, hint, skip); err != nil {
			return nil, err
		}
	}
	return skip, nil
}

// followDeciderOf moves the copies of directory g that list it under
// another name than its decider (names: its name in each copy of the
// directory being healed) to where the decider holds it, adding the
// names moved to skip. It holds g's inode lock: the heals of two
// directories g is named in, at once, picked deciders that differ and
// moved copies each its own way, leaving them under two names and none
// (heal TestDecidersDifferPerDirectory, about once in 300 runs). Under
// the lock the second finds the copies where the first put them: the
// decider's place is read live (moveTo).
func (h *Healer) followDeciderOf(ctx context.Context, si int, g layer.Gfid, names dirNames, members replicate.Mask, hint *dirHint, skip map[string]bool) error {
	defer h.lockInode(g)()
	d, keep := h.decider(ctx, si, g, names, members&hint.good)
	if d < 0 {
		return nil
	}
	for r, n := range names {
		if n == "" || n == keep {
			continue
		}
		h.log.Debug("a directory's other name moved to its decider's", "name", n, "gfid", g, "decider's", keep)
		moved, err := h.moveTo(ctx, si, r, d, hint.lists[r][n].Attr)
		if err != nil {
			return err
		}
		if moved {
			skip[n] = true
			hint.moved(r, n, keep)
		}
	}
	return nil
}

// moved records that replica r's copy of the directory named name was
// moved to to ("": out of the directory).
func (d *dirHint) moved(r int, name, to string) {
	if to != "" {
		d.renamed(r, name, to)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.lists[r][name]
	delete(d.lists[r], name)
	d.byGfid[r][e.Attr.Gfid] = slices.DeleteFunc(d.byGfid[r][e.Attr.Gfid], func(n string) bool { return n == name })
}

// dirNames is a directory's name in each copy of its parent ("": not
// listed).
type dirNames []string

// agree reports whether every member lists the directory under one name.
func (n dirNames) agree(members replicate.Mask) bool {
	first := n[members.First()]
	for r := range n {
		if members.Has(r) && (n[r] == "" || n[r] != first) {
			return false
		}
	}
	return true
}

// dirNames returns, for each directory some member's copy lists, its
// name in every copy. A directory some copy lists under two names (a
// second directory of its gfid, made by an earlier heal) is left out:
// its names are healed as any.
func (d *dirHint) dirNames(members replicate.Mask) map[layer.Gfid]dirNames {
	out, twice := map[layer.Gfid]dirNames{}, map[layer.Gfid]bool{}
	for r, l := range d.lists {
		if !members.Has(r) {
			continue
		}
		for name, e := range l {
			g := e.Attr.Gfid
			switch {
			case !e.Attr.IsDir():
			case out[g] == nil:
				out[g] = make(dirNames, len(d.lists))
				fallthrough
			case out[g][r] == "":
				out[g][r] = name
			default:
				twice[g] = true
			}
		}
	}
	for g := range twice {
		delete(out, g)
	}
	return out
}

// decider returns the decider of directory g, the first of cand listing
// it or holding it by its id (-1: none), and its name there ("": in
// another directory).
func (h *Healer) decider(ctx context.Context, si int, g layer.Gfid, names dirNames, cand replicate.Mask) (int, string) {
	for r := range names {
		if !cand.Has(r) {
			continue
		}
		if names[r] != "" {
			return r, names[r]
		}
		if h.holdsDir(ctx, si, r, g) {
			return r, ""
		}
	}
	return -1, ""
}

// gather gives the sinks of plan p that lack directory path their copy of
// it, held under another name in the same directory (reuse) or in
// another directory (moveHere), before anything is marked or healed, and
// returns those it moved. The moved copies are the same inode with their
// own marks: judged with them, a copy newer than the source's (the
// source's directory missed changes made in it under its other name) is
// healed from, not to; marked first as a sink by the source (premark),
// it lost names it alone held (sim replica3x2-dirs seed 15: an
// acknowledged file).
func (h *Healer) gather(ctx context.Context, si int, path string, p *plan, hint *dirHint) (replicate.Mask, error) {
	want := p.attr()
	if !want.IsDir() {
		return 0, nil
	}
	var moved replicate.Mask
	for s := range h.sets[si] {
		if !p.sinks.Has(s) || p.good.Has(s) || !errors.Is(p.copies[s].Err, syscall.ENOENT) {
			continue
		}
		if hint != nil && h.reuse(ctx, si, s, p.src, path, want, hint) {
			moved |= replicate.Bit(s)
			continue
		}
		held, err := h.moveHere(ctx, si, s, p.src, path, want, false)
		if err != nil {
			return moved, fmt.Errorf("%s on %s: %w", path, h.sets[si][s].Name, err)
		}
		if held {
			moved |= replicate.Bit(s)
		}
	}
	return moved, nil
}

// blames reports whether replica r's copy of path's directory blames
// replica s.
func (h *Healer) blames(ctx context.Context, si, r int, path string, s int) bool {
	dir, _ := layer.Split(path)
	a, err := h.sets[si][r].Layer.Lookup(ctx, dir)
	return err == nil && replicate.Mask(a.Pending).Has(s)
}

// relocate moves sink s's stale copy of directory path (one p.remove
// says to remove) to where a copy trusted holds it, rather than remove
// it while the heal of that name moves it (or makes it anew), and
// reports whether it did, or failed to (err): false if no such copy
// holds it, or the sink has something there already (removed then).
func (h *Healer) relocate(ctx context.Context, si, s int, path string, p *plan) (moved bool, err error) {
	a := p.copies[s].Attr
	if !a.IsDir() {
		return false, nil
	}
	for c := range h.sets[si] {
		if !keptBy(p, c, s) {
			continue
		}
		to, err := h.sets[si][c].Layer.Getxattr(ctx, layer.IDPath(a.Gfid), layer.XattrPath)
		if err != nil {
			continue
		}
		err = layer.RenameSource(ctx, h.sets[si][s].Layer, path, string(to), layer.RenameNoReplace, a.Gfid)
		h.log.Debug("a stale directory moved to where a good copy holds it", "replica", h.sets[si][s].Name,
			"from", path, "to", string(to), "err", err)
		if errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY) {
			return false, nil
		}
		return true, err
	}
	return false, nil
}

// markMoved marks replica r's copy of directory a, just moved to path,
// Dirty, as the bricks mark a directory a client went away from: what
// was made or removed in it under its other name and not acknowledged
// (replicate refuses a change by too few replicas, which may still have
// made it) is compared with the others' once quiet.
func (h *Healer) markMoved(ctx context.Context, si, r int, path string, a layer.Attr) {
	if err := h.stores[si][r].MarkPending(ctx, path, a.Gfid, layer.Dirty); err != nil {
		h.log.Warn("a moved directory not marked for a compare of its names", "replica", h.sets[si][r].Name, "path", path, "err", err)
	}
}

// moveTo moves replica r's copy of directory a to where replica d holds
// it, and reports whether r holds it there now. The copy moved is marked
// Dirty (markMoved).
func (h *Healer) moveTo(ctx context.Context, si, r, d int, a layer.Attr) (bool, error) {
	to, err := h.sets[si][d].Layer.Getxattr(ctx, layer.IDPath(a.Gfid), layer.XattrPath)
	if err != nil {
		return false, fmt.Errorf("where %s holds directory %s: %w", h.sets[si][d].Name, a.Gfid, err)
	}
	moved, err := h.moveHere(ctx, si, r, d, string(to), a, true)
	if moved && err == nil {
		h.markMoved(ctx, si, r, string(to), a)
	}
	return moved, err
}

// errMovedSince: a sink holds a directory in a directory whose copy there
// blames the source (the sink's is newer: the directory was moved there
// since), and the source's copy of the directory it would go to does
// not blame the sink (or does, the sink being the lower replica); that
// directory's heal settles it first.
var errMovedSince = errors.New("the sink's copy of the directory was moved where the source's copy is behind")

// errTwoNames: the source holds a directory under two names (see
// moveHere); heal cannot give the sink the second.
var errTwoNames = errors.New("the good copy holds one directory under two names (made by a heal older than 2026-11-29): remove or rename one of them")

// errNameInDoubt: a sink, the decider of a directory's name, holds it in
// a directory whose names a client left half changed (Dirty): the heal
// of the directory's own marks, which judge its content, not its name,
// moves the other copies to the decider's name (followDecider), as the
// heal of that Dirty directory does (undecided), and looks again. Moving
// the decider's copy instead, the two heals moved it back and forth;
// waiting for that heal, which waits until the directory is quiet, left
// the copy unhealed while clients kept changing it (a review).
var errNameInDoubt = errors.New("the directory's decider holds it in a directory a client left half changed: moved the others there")

// firstHolder returns the first replica of set si up that holds
// directory g (-1: none).
func (h *Healer) firstHolder(ctx context.Context, si int, g layer.Gfid) int {
	for r := range h.sets[si] {
		if !h.up(si, r) {
			continue
		}
		if h.holdsDir(ctx, si, r, g) {
			return r
		}
	}
	return -1
}

// holdsDir reports whether replica r of set si holds directory g (by its
// id).
func (h *Healer) holdsDir(ctx context.Context, si, r int, g layer.Gfid) bool {
	a, err := h.sets[si][r].Layer.Lookup(ctx, layer.IDPath(g))
	return err == nil && a.IsDir()
}

// followDecider moves every other copy of directory want in set si to
// where replica d, its decider, holds it.
func (h *Healer) followDecider(ctx context.Context, si, d int, want layer.Attr) error {
	for r := range h.sets[si] {
		if r == d || !h.up(si, r) {
			continue
		}
		if _, err := h.moveTo(ctx, si, r, d, want); err != nil {
			return err
		}
	}
	return nil
}

// moveHere gives sink s directory want at path by moving the sink's copy
// of it from where the sink holds it (layer.XattrPath), rather than make
// a second directory of its gfid; src is the copy healed from. held is
// false if the sink holds no directory of that gfid. err is set if it
// holds one it could not move: where the source holds it too (a second
// directory of the gfid, made by a heal older than 2026-11-29; a brick
// now refuses to make one, so the sink cannot be given it: errTwoNames,
// for the operator); where its copy of the parent blames the source
// (errMovedSince: a client moved it there since, and the move is that
// directory's heal's to settle), into its own subtree, or a name taken
// meanwhile; the heal fails and is tried again. Unless decided (the heal
// of that Dirty directory moves it), the decider's copy in a directory
// the sink's copy of which is Dirty is not moved either: the others are
// moved to it (errNameInDoubt), unless the source's copy of path's
// directory blames the sink (a client's change there, acknowledged, that
// the sink missed).
func (h *Healer) moveHere(ctx context.Context, si, s, src int, path string, want layer.Attr, decided bool) (held bool, err error) {
	l := h.sets[si][s].Layer
	id := layer.IDPath(want.Gfid)
	if a, err := l.Lookup(ctx, id); errors.Is(err, syscall.ENOENT) || err == nil && !a.IsDir() {
		return false, nil
	} else if err != nil {
		return true, err
	}
	b, err := l.Getxattr(ctx, id, layer.XattrPath)
	if err != nil {
		return true, err
	}
	from := string(b)
	if from == path {
		return true, nil
	}
	if a, err := h.sets[si][src].Layer.Lookup(ctx, from); err == nil && a.Gfid == want.Gfid {
		return true, fmt.Errorf("%s and %s on %s: %w", from, path, h.sets[si][src].Name, errTwoNames)
	}
	dir, _ := layer.Split(from)
	if a, err := l.Lookup(ctx, dir); err != nil {
		return true, err
	} else if replicate.Mask(a.Pending).Has(src) && (src > s || !h.blames(ctx, si, src, path, s)) {
		// Where the copies of the two directories blame each other, the
		// lower replica's place wins, as the decider's (else each side
		// refused to move to the other's: sim replica3x2-dirs seed 15).
		return true, fmt.Errorf("%s on %s: %w", from, h.sets[si][s].Name, errMovedSince)
	} else if !decided && a.Pending&layer.Dirty != 0 && !h.blames(ctx, si, src, path, s) && h.firstHolder(ctx, si, want.Gfid) == s {
		if err := h.followDecider(ctx, si, s, want); err != nil {
			return true, err
		}
		return true, fmt.Errorf("%s on %s: %w", from, h.sets[si][s].Name, errNameInDoubt)
	}
	err = layer.RenameSource(ctx, l, from, path, layer.RenameNoReplace, want.Gfid)
	if decided && (errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY)) {
		err = h.renameOver(ctx, si, s, src, from, path, want)
	}
	h.log.Debug("a directory moved to where the good copies hold it", "replica", h.sets[si][s].Name,
		"from", from, "to", path, "err", err)
	if errors.Is(err, errNotReplaced) {
		return false, nil
	}
	return true, err
}

// errNotReplaced: a decided move found at its path another inode than one
// the decider's rename replaced.
var errNotReplaced = errors.New("another inode at the decider's name")

// renameOver moves sink s's copy of directory want from from over what it
// holds at path, if that is a directory the source no longer holds: the
// empty directory the decider's rename replaced (rename(2) over an empty
// directory). Anything else there is left (errNotReplaced): the names are
// healed as any, the majority's inode winning the name.
func (h *Healer) renameOver(ctx context.Context, si, s, src int, from, path string, want layer.Attr) error {
	l := h.sets[si][s].Layer
	a, err := l.Lookup(ctx, path)
	if err != nil || !a.IsDir() || a.Gfid == want.Gfid {
		return errNotReplaced
	}
	if _, err := h.sets[si][src].Layer.Lookup(ctx, layer.IDPath(a.Gfid)); !errors.Is(err, syscall.ENOENT) {
		return errNotReplaced
	}
	if err := layer.RenameSource(ctx, l, from, path, 0, want.Gfid); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return errNotReplaced
		}
		return err
	}
	return nil
}
