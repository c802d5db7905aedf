package distribute

import (
	"context"
	"errors"
	"slices"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Directories renamed on some children only. A directory lives on every
// child, and a rename moves it on each: a client that dies in the middle
// (or a rollback that fails) leaves it under its old name on some
// children and its new one on others. Left so, a later operation needing
// it on a child that lacks it under one name would make it there again
// (mkdirCopy, by its gfid) beside the other: two directories, each child
// holding part of the files under each name.
//
// So one child decides: the decider, the volume's first child, which
// every client agrees on whatever layout it runs (a rebalance changes
// layouts, and a client may run the old one for a while; sets are added
// after the others, and the first leaves only by a remove-brick, whose
// clients are fenced off the old spec before it commits). A directory
// rename is done there first and undone there last, so the name the
// decider holds is the one the rename has reached; whoever finds the
// directory under two names moves it on the other children to the
// decider's name (settleSplit). A listing of the parent finds such splits
// (the two names carry one gfid); mkdirCopy never makes a directory on a
// child that holds its gfid already.

// decider is the child whose name for a renamed directory counts.
func (d *Distribute) decider() int { return 0 }

// splits finds, in the listings of directory dir, directories listed
// under two names (one gfid) by different children, and settles each. It
// reports whether it settled any (the listings are stale then).
func (d *Distribute) splits(ctx context.Context, dir string, lists [][]layer.Entry) bool {
	first := map[layer.Gfid]string{}
	var pairs [][2]string
	var gfids []layer.Gfid
	for _, list := range lists {
		for _, e := range list {
			if !e.Attr.IsDir() || e.Attr.Gfid.IsZero() {
				continue
			}
			n, seen := first[e.Attr.Gfid]
			switch {
			case !seen:
				first[e.Attr.Gfid] = e.Name
			case n != e.Name && !slices.Contains(gfids, e.Attr.Gfid):
				pairs = append(pairs, [2]string{layer.Join(dir, n), layer.Join(dir, e.Name)})
				gfids = append(gfids, e.Attr.Gfid)
			}
		}
	}
	settled := false
	for k, two := range pairs {
		if _, err := d.settleSplit(ctx, two[0], two[1], gfids[k]); err != nil {
			d.log.Warn("a directory under two names could not be settled", "names", two, "gfid", gfids[k], "err", err)
			continue
		}
		settled = true
	}
	return settled
}

// settleSplit moves directory g, found under names a and b on different
// children, to the decider's name on every child, and returns that name.
// A child holding another, empty directory under that name (the target a
// rename replaced, where the rename did not reach) has it replaced.
func (d *Distribute) settleSplit(ctx context.Context, a, b string, g layer.Gfid) (string, error) {
	dec := d.decider()
	keep, drop := a, b
	if !holdsAt(ctx, d.child(dec), keep, g) {
		keep, drop = b, a
		if !holdsAt(ctx, d.child(dec), keep, g) {
			return "", syscall.ENOENT // the decider holds neither (yet): no answer
		}
	}
	errs := d.parallel(d.all(), func(i int) error {
		if !holdsAt(ctx, d.child(i), drop, g) {
			return nil
		}
		replaced, err := d.child(i).Lookup(ctx, keep)
		switch {
		case errors.Is(err, syscall.ENOENT):
			return d.child(i).Rename(ctx, drop, keep, layer.RenameNoReplace)
		case err != nil:
			return err
		case !replaced.IsDir():
			return syscall.EEXIST
		}
		return layer.RenameDir(ctx, d.child(i), drop, keep, 0, replaced) // ENOTEMPTY unless empty
	})
	if err := firstErr(errs, -1); err != nil {
		return "", err
	}
	d.log.Warn("directory left under two names by a rename done on some children only: settled", "kept", keep, "dropped", drop, "gfid", g)
	return keep, nil
}

// holdsAt reports whether l holds directory g at path.
func holdsAt(ctx context.Context, l layer.Layer, path string, g layer.Gfid) bool {
	a, err := l.Lookup(ctx, path)
	return err == nil && a.IsDir() && a.Gfid == g
}

// heldElsewhere reports whether child i holds directory g (by its id),
// which it then does not hold at the path a caller wants it made at: a
// rename done on some children only (see above).
func (d *Distribute) heldElsewhere(ctx context.Context, i int, g layer.Gfid) bool {
	if g.IsZero() || g == layer.RootGfid {
		return false
	}
	a, err := d.child(i).Lookup(ctx, layer.IDPath(g))
	return err == nil && a.IsDir() && a.Gfid == g
}

// errSplit: a directory is wanted on a child that holds it under another
// name.
var errSplit = errors.New("the directory is under another name on that child (a rename done on some children only); list its parent to settle it")
