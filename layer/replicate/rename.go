package replicate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

func (r *Replicate) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	return r.RenameDir(ctx, oldpath, newpath, flags, layer.Attr{})
}

// RenameDir is Rename of a directory over replaced, the directory at
// newpath as the caller looked it up (layer.DirRenamer; zero: none
// known): moved back where one replica alone did it, a rename makes it
// again there (undoDirRename). It is sent to the first replica up (the
// decider) before the others (deciderFirst): a client that goes away in
// between leaves the copies of the parents listing the directory under
// two names, blaming nobody, and heal keeps the decider's
// (heal/dirname.go). A client's rename of any other inode comes with
// its gfid (RenameSource, sent to every replica at once); Rename without
// one, a directory's or one of distribute's own moves of a file, is sent
// as RenameDir.
func (r *Replicate) RenameDir(ctx context.Context, oldpath, newpath string, flags uint32, replaced layer.Attr) error {
	return r.rename(ctx, oldpath, newpath, r.sourceMissed(ctx, oldpath, newpath), replaced, r.deciderFirst, func(ctx context.Context, i int) error {
		return r.children[i].Layer.Rename(ctx, oldpath, newpath, flags)
	})
}

// RenameSource is Rename of the inode with gfid src (layer.SourceRenamer),
// which every replica is told: one whose copy of the source directory
// holds the name for another inode, a stale name heal has not reached
// yet, refuses (ESTALE). Renamed there, that inode would stand under the
// new name beside the file's inode on the others, in copies of the new
// directory that blame nobody for it, and heal could keep the stale one
// (the simulation, replica3x2-full seed 156: an acknowledged write lost;
// replica3x2-grow seed 18: a split-brain). Such a replica counts as
// having missed the rename (staleRefused), and its stale inode is parked
// once the others did it (parkStale).
func (r *Replicate) RenameSource(ctx context.Context, oldpath, newpath string, flags uint32, src layer.Gfid) error {
	adjust := staleRefused(r.sourceMissed(ctx, oldpath, newpath))
	did, stale := make([]bool, len(r.children)), make([]bool, len(r.children)) // each replica's goroutine writes its own
	err := r.rename(ctx, oldpath, newpath, adjust, layer.Attr{}, r.parallel, func(ctx context.Context, i int) error {
		err := layer.RenameSource(ctx, r.children[i].Layer, oldpath, newpath, flags, src)
		did[i], stale[i] = err == nil && !r.arbiters.Has(i), errors.Is(err, syscall.ESTALE)
		return err
	})
	// Only once a data replica did it is src the inode the name held, and
	// another one under it stale (settle's winners may be the replicas
	// that refused).
	if slices.Contains(did, true) {
		for i, s := range stale {
			if s {
				r.parkStale(ctx, i, oldpath, src)
			}
		}
	}
	return err
}

// rename runs fn, a rename of oldpath to newpath on replica i, on every
// replica, marking the directories of both names. A rename that fails
// where some replicas did it leaves its record on the inode there
// (recordRenamed), or a directory moved back (undoDirRename, which makes
// replaced again).
func (r *Replicate) rename(ctx context.Context, oldpath, newpath string, adjust adjuster, replaced layer.Attr, send sender, fn func(ctx context.Context, i int) error) error {
	marks := []string{parentOf(oldpath)}
	if p := parentOf(newpath); p != marks[0] {
		marks = append(marks, p)
	}
	did := make([]bool, len(r.children)) // each replica's goroutine writes its own
	o, err := r.modifySent(ctx, marks, adjust, send, func(ctx context.Context, i int) error {
		err := fn(ctx, i)
		did[i] = err == nil
		return err
	})
	if err == nil || doneBy(did) == 0 {
		return err
	}
	if counts := o.winners != 0 && o.winners&^doneBy(did) == 0; !counts || !r.undoDirRename(ctx, doneBy(did), oldpath, newpath, replaced) {
		// Refused: the client was told nothing was done (not EIO, and
		// not a fence, which the mount retries on a newer graph).
		refused := o.winners != 0 && o.winners&doneBy(did) == 0 && !errors.Is(err, syscall.EIO) && !errors.Is(err, layer.ErrFenced)
		r.recordRenamed(ctx, did, layer.RenameRecord{From: oldpath, To: newpath, Refused: refused})
	}
	return err
}

// undoDirRename moves a directory that a rename moved on one replica
// alone (done, the side that counts; the client is answered EIO) back
// under its old name there. Left moved, heal could judge the rename done
// in one of its two directories and undone in the other (the copies of
// each judged apart) and remove the directory, its whole subtree with it,
// under both names: heal parks files it takes a name from, never
// directories, and a file's record (recordRenamed) cannot save a
// directory (moving it back from heal, once heal may have copied it under
// the new name to others, left copies differing unmarked;
// docs/REPLICATION.md, "Simulation"). The rename was never acknowledged,
// so undoing it is what the client was told.
//
// The brick records no removal for the move back (layer.RenameTakeBack:
// a record of the new name's removal would take the directory from
// replicas a retried rename later gave it to). A directory the rename
// replaced is made again, as a replica that did not do the rename holds
// it, if one answers, else as replaced (the caller's look before the
// rename; zero: none known) says, unless the replica holds it still. The
// directory is marked on the replica, blaming the others (unless one of
// them blames the replica for it: blamedBy), and so are both parents (a
// heal between the rename and the move back may have cleared their
// marks: a fourth review): a name made or removed in it on the others
// while it stood under the new name (refused there, so not acknowledged)
// is healed away. If a replica that did not do the rename
// holds it already (that heal gave it the rename, or its brick did it
// and its answer was lost), the rename stands, recorded. With more than
// one replica having done it, a move back done by only some of them
// would leave them differing unmarked: such a rename is recorded, as a
// file's is. Reports whether it moved it back.
func (r *Replicate) undoDirRename(ctx context.Context, done Mask, oldpath, newpath string, replaced layer.Attr) bool {
	if done.Count() != 1 {
		return false
	}
	ctx = context.WithoutCancel(ctx) // the caller giving up must not leave it half done
	i := done.First()
	a, err := r.children[i].Layer.Lookup(ctx, newpath)
	if err != nil || !a.IsDir() {
		return false
	}
	held, spread := r.heldElsewhere(ctx, done, newpath, a.Gfid)
	if spread {
		return false // a heal gave the rename to others meanwhile: it stands, recorded
	}
	if held.IsDir() {
		replaced = held
	}
	had := replaced.IsDir() && replaced.Gfid != a.Gfid && !replaced.Gfid.IsZero() && !r.holds(ctx, i, replaced.Gfid)
	err = layer.RenameSource(ctx, r.children[i].Layer, newpath, oldpath, layer.RenameNoReplace|layer.RenameTakeBack, a.Gfid)
	if err != nil {
		r.log.Warn("a directory renamed by too few replicas not moved back; heal may remove it", "replica", r.children[i].Name, "old", oldpath, "new", newpath, "err", err)
		return false
	}
	if had {
		r.remakeDir(ctx, i, newpath, replaced)
	}
	marks := []string{parentOf(oldpath)}
	if p := parentOf(newpath); p != marks[0] {
		marks = append(marks, p)
	}
	if !r.blamedBy(ctx, done, oldpath, i) {
		marks = append(marks, oldpath)
	}
	r.markLosers(ctx, outcome{winners: done, losers: r.all &^ done}, marks)
	return true
}

// remakeDir makes directory a again at path on replica i, with its
// gfid, mode, owner and times, and no marks.
func (r *Replicate) remakeDir(ctx context.Context, i int, path string, a layer.Attr) {
	in := layer.MkdirIn{Owner: layer.Owner{Gfid: a.Gfid, Uid: a.Uid, Gid: a.Gid}, Mode: a.Mode &^ syscall.S_IFMT}
	_, err := r.children[i].Layer.Mkdir(ctx, path, in)
	if err == nil {
		_, err = r.children[i].Layer.Setattr(ctx, path, layer.SetattrIn{Valid: layer.SetAtime | layer.SetMtime, Atime: a.Atime, Mtime: a.Mtime})
	}
	if err != nil {
		r.log.Warn("a directory a rename replaced on too few replicas not made again; heal may remove it", "replica", r.children[i].Name, "path", path, "err", err)
	}
}

// holds reports whether replica i holds inode g (by its id): a rename
// there did not replace it (the replica's copy of the directory is behind
// and holds it under another name), and making it again would give the
// replica two directories of one gfid (a third review, 2026-11-28).
func (r *Replicate) holds(ctx context.Context, i int, g layer.Gfid) bool {
	_, err := r.children[i].Layer.Lookup(ctx, layer.IDPath(g))
	return err == nil
}

// blamedBy reports whether a replica up outside done blames replica i
// for path: its copy there is behind, and marking it to blame the others
// would make the copies blame each other, which lost a name the others
// held (a file made in the directory while replica i was away: heal
// TestMoveBackOfADirectoryBehind, about one run in eight).
func (r *Replicate) blamedBy(ctx context.Context, done Mask, path string, i int) bool {
	for j := range r.children {
		if done.Has(j) || !r.up().Has(j) {
			continue
		}
		if a, err := r.children[j].Layer.Lookup(ctx, path); err == nil && Mask(a.Pending).Has(i) {
			return true
		}
	}
	return false
}

// heldElsewhere returns the directory a replica outside done holds at
// path, if it is another than gfid g: the one a rename done by done
// alone replaced there; spread if one holds g there (a heal gave it the
// rename meanwhile).
func (r *Replicate) heldElsewhere(ctx context.Context, done Mask, path string, g layer.Gfid) (held layer.Attr, spread bool) {
	for j := range r.children {
		if done.Has(j) || !r.up().Has(j) {
			continue
		}
		a, err := r.children[j].Layer.Lookup(ctx, path)
		switch {
		case err != nil || !a.IsDir():
		case a.Gfid == g:
			return layer.Attr{}, true
		default:
			held = a
		}
	}
	return held, false
}

// doneBy is the mask of the replicas did says did it.
func doneBy(did []bool) Mask {
	var m Mask
	for i, d := range did {
		if d {
			m |= Bit(i)
		}
	}
	return m
}

// recordRenamed records, on the replicas that did it, a rename the client
// is answered an error for (layer.XattrRenamed): heal may take it as done
// in one of its directories and as undone in the other, and keeps the
// inode under one of its two names only with this record, which it
// clears once it used it or gave the new name to a replica. It is left
// also when the replicas that refused the rename win: heal undoes it
// where it was done, and when the copies of the new name's directory
// hold no mark against the replicas that did it (the refusers lacked
// that directory under its name: a directory rename half done), the
// record is what tells heal where to move the file back (sim
// disperse2+1x2-dirs seed 70). A refusal that won is recorded as such
// (RenameRecord.Refused): heal never takes that rename as done under the
// new name (heal/refused.go). Best effort: a replica that does not take
// it leaves heal as it was without.
func (r *Replicate) recordRenamed(ctx context.Context, did []bool, record layer.RenameRecord) {
	rec, newpath := record.Encode(), record.To
	for i, d := range did {
		if !d {
			continue
		}
		if err := r.children[i].Layer.Setxattr(ctx, newpath, layer.XattrRenamed, rec, 0); err != nil {
			r.log.Warn("a rename done by too few replicas not recorded", "replica", r.children[i].Name, "path", newpath, "err", err)
		}
	}
}

// errStaleName stands for a replica's ESTALE to a rename that others did:
// it holds a stale name, and missed the rename as a replica down does
// (marked, never a vote against it: otherwise one stale refusal against
// one rename, with no copy of the directories known good, would undo the
// rename where it was done; a review found the file then under neither
// name).
var errStaleName = fmt.Errorf("a stale copy of the name (another inode) on this replica: %w", syscall.ENOTCONN)

// staleRefused is RenameSource's adjuster: missed's, with the replicas
// that refused the rename with ESTALE while others did it counted as
// having missed it (errStaleName), unless only copies that are not good
// did it (then the refusal of the good ones stands: the source changed
// since the caller looked it up).
func staleRefused(missed adjuster) adjuster {
	return func(targets Mask, errs []error, good Mask) (done, judged Mask) {
		done, judged = missed(targets, errs, good)
		ok, _ := okAndAbsent(targets, errs)
		var stale Mask
		for i, err := range errs {
			if targets.Has(i) && errors.Is(err, syscall.ESTALE) {
				stale |= Bit(i)
			}
		}
		if ok == 0 || stale == 0 || judged != 0 && ok&judged == 0 {
			return done, judged
		}
		for i := range errs {
			if stale.Has(i) {
				errs[i] = errStaleName
			}
		}
		return done, judged &^ stale
	}
}

// parkStale takes the stale name path away from replica i, which refused
// to rename it as another inode than src while the others renamed src,
// keeping that inode by its id for heal (posix.Store.Rename onto
// layer.IDPath, which parks only the inode it names): left under the old
// name, a merge of the directory's copies would bring it back as a file
// the rename removed (seed 62). The winners marked replica i on both
// directories; heal gives it the renamed file, and links the parked inode
// again where the good copies hold it (a brick removes, at its next start,
// an inode parked and never linked, as it does those heal parks). A
// directory is not parked: its stale name stays for heal.
func (r *Replicate) parkStale(ctx context.Context, i int, path string, src layer.Gfid) {
	a, err := r.children[i].Layer.Lookup(ctx, path)
	if err != nil || a.Gfid == src || a.IsDir() {
		return
	}
	if err := r.children[i].Layer.Rename(ctx, path, layer.IDPath(a.Gfid), 0); err != nil {
		r.log.Warn("a stale name not parked; heal takes it away", "replica", r.children[i].Name, "path", path, "err", err)
	}
}
