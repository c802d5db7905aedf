package distribute

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// tmpPrefix starts the names of pointers being placed: made under a random
// name, then renamed over their final name, so that a name switches from
// its old inode to the new one atomically on its hashed child. Being
// pointer files, they are hidden by Readdir like every other pointer; a
// crash can leave one behind, which Rmdir deletes as a stale pointer.
const tmpPrefix = ".mortar-ptr-"

func tmpName() string {
	var b [12]byte
	rand.Read(b[:])
	return tmpPrefix + hex.EncodeToString(b[:])
}

// Rename: see the package documentation for the order of steps and what
// each crash window leaves behind. A file a rebalance moves meanwhile
// (its child answers EREMOTE: the rename waited for the move's freeze and
// did nothing) is renamed where it went.
func (d *Distribute) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	for try := 0; ; try++ {
		err := d.rename(ctx, oldpath, newpath, flags)
		if try == maxReopen || !errors.Is(err, syscall.EREMOTE) {
			return err
		}
	}
}

func (d *Distribute) rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	if flags&^layer.RenameNoReplace != 0 {
		return syscall.EINVAL
	}
	if oldpath == "/" || newpath == "/" {
		return syscall.EBUSY
	}
	src, err := d.find(ctx, oldpath)
	if err == errDangling {
		d.removeStalePointer(ctx, src.hashed, oldpath)
	}
	if err != nil {
		return err
	}
	if oldpath == newpath {
		return d.child(src.cached).Rename(ctx, oldpath, newpath, flags)
	}
	target, hd, err := d.locateTarget(ctx, newpath)
	if err != nil {
		return err
	}
	// The checks in rename(2)'s order: an existing target with
	// RenameNoReplace, a directory into itself (once newpath's parent is
	// known to exist), an ancestor as target, then the types.
	switch {
	case target != nil && flags&layer.RenameNoReplace != 0:
		return syscall.EEXIST
	case strings.HasPrefix(newpath, oldpath+"/"):
		if err := d.parentDir(ctx, newpath); err != nil {
			return err
		}
		return syscall.EINVAL
	case strings.HasPrefix(oldpath, newpath+"/"):
		return syscall.ENOTEMPTY
	case src.attr.IsDir() && target != nil && !target.attr.IsDir():
		return syscall.ENOTDIR
	case !src.attr.IsDir() && target != nil && target.attr.IsDir():
		return syscall.EISDIR
	}
	if src.attr.IsDir() {
		err = d.renameDir(ctx, oldpath, newpath, flags, src, target)
	} else {
		err = d.renameFile(ctx, oldpath, newpath, flags, src, hd, target)
	}
	if target == nil {
		err = d.refine(ctx, newpath, err) // e.g. newpath's parent is a file
	}
	return err
}

// locateTarget finds a rename's target: nil if it does not exist. A
// dangling pointer in its place is removed first: a directory cannot
// replace it, and RenameNoReplace must not trip over it. hd is newpath's
// hashed child.
func (d *Distribute) locateTarget(ctx context.Context, newpath string) (*loc, int, error) {
	hd, err := d.hashedChild(ctx, newpath)
	if err != nil {
		return nil, 0, err
	}
	dst, err := d.locate(ctx, newpath)
	switch {
	case err == nil:
		return &dst, hd, nil
	case err == errDangling:
		d.removeStalePointer(ctx, dst.hashed, newpath)
		return nil, hd, nil
	case errors.Is(err, syscall.ENOENT):
		return nil, hd, nil
	}
	return nil, 0, err
}

// renameFile renames a non-directory whose inode lives on src.cached to
// newpath, hashed to hd, replacing target (nil if newpath does not exist).
func (d *Distribute) renameFile(ctx context.Context, oldpath, newpath string, flags uint32, src loc, hd int, target *loc) error {
	if target != nil && !src.attr.Gfid.IsZero() && target.attr.Gfid == src.attr.Gfid {
		return nil // two names of one inode: rename(2) does nothing
	}
	cs := src.cached
	var maybe, err error // maybe: see movedMaybe
	// Naming the inode its lookup found: a replica holding another one
	// under oldpath (a stale name) refuses (layer.SourceRenamer).
	move := func() error { return layer.RenameSource(ctx, d.child(cs), oldpath, newpath, flags, src.attr.Gfid) }
	moveOnCached := func() error { return d.withParent(ctx, cs, newpath, move) }
	if target != nil && target.prev {
		return d.renameOverPrev(ctx, oldpath, newpath, src, hd, target, moveOnCached)
	}
	switch {
	case hd == cs:
		// The data stays where newpath hashes: one atomic rename replaces
		// the old target there (data or pointer).
		if err := moveOnCached(); err != nil {
			return err
		}
	case target == nil:
		// Pointer first: until the data moves it dangles, and newpath
		// still reads as absent, which it is.
		excl := flags&layer.RenameNoReplace != 0
		if err := d.placePointer(ctx, hd, newpath, src, excl); err != nil {
			return err
		}
		if err := moveOnCached(); err != nil {
			if !mayStand(err) {
				d.unlinkPointer(ctx, hd, newpath)
			}
			return err
		}
	case target.cached == cs:
		// newpath's pointer on hd already names cs; the rename on cs
		// replaces the old data atomically.
		if err := moveOnCached(); err != nil {
			return err
		}
	default:
		// The old target lives on hd or a third child and stays visible
		// until the new pointer replaces its name on hd.
		if maybe, err = d.movedMaybe(ctx, cs, newpath, src.attr.Gfid, moveOnCached()); err != nil {
			return err
		}
		if err := d.placePointer(ctx, hd, newpath, src, false); err != nil {
			if maybe == nil {
				d.moveBack(ctx, cs, oldpath, newpath)
			}
			return err
		}
	}
	if target != nil && target.cached != cs && target.cached != hd {
		if err := d.child(target.cached).Unlink(ctx, newpath); err != nil && !errors.Is(err, syscall.ENOENT) {
			d.log.Warn("rename: old target's data left behind", "path", newpath,
				"child", d.children[target.cached].ID, "err", err)
		}
	}
	if src.ptr {
		d.unlinkPointer(ctx, src.hashed, oldpath)
	}
	return maybe
}

// movedMaybe sorts the error of a rename's move of the data (gfid src) to
// newpath on child cs: one that may stand (see mayStand) and did, as far
// as cs now answers newpath with the moved inode, lets the rename go on as
// if it was done, and is what the rename then answers (maybe); any other
// stops it (err), before the old target is touched. Stopped there after a
// move that did stand, the data would be a second file of the name beside
// the old target on the name's hashed child, invisible to lookups, which
// a rebalance cannot place (the simulation, replica3x2-grow seed 20); gone
// on after one that did not (ENOTCONN: nothing sent), the old target would
// be lost for nothing.
func (d *Distribute) movedMaybe(ctx context.Context, cs int, newpath string, src layer.Gfid, moved error) (maybe, err error) {
	if moved == nil || !mayStand(moved) || src.IsZero() {
		return nil, moved
	}
	if a, err := d.child(cs).Lookup(ctx, newpath); err != nil || a.Gfid != src {
		return nil, moved
	}
	return moved, nil
}

// moveBack undoes a rename's move of the data on child cs.
func (d *Distribute) moveBack(ctx context.Context, cs int, oldpath, newpath string) {
	if err := d.child(cs).Rename(ctx, newpath, oldpath, layer.RenameNoReplace); err != nil {
		d.log.Error("rename rollback failed; data hidden under new name", "old", oldpath, "new", newpath,
			"child", d.children[cs].ID, "err", err)
	}
}

// mayStand reports whether an operation that failed with err may have been
// done all the same, and stay done: a replica set answers EIO when fewer
// than a quorum of its bricks did it (which then blame the others, and heal
// gives it to them), and a child whose connection failed may have done it
// before. A rename's pointer then stays: without it, the data renamed on
// one child would be a second file of the name, not on its hashed child,
// that a listing shows and a lookup does not find (a create of the name
// then makes another one). A pointer whose data did not move dangles,
// which reads as absent.
func mayStand(err error) bool {
	switch layer.ToErrno(err) {
	case syscall.EIO, syscall.ENOTCONN, syscall.ETIMEDOUT, syscall.ECONNRESET, syscall.EPIPE, syscall.ESHUTDOWN:
		return true
	}
	return false
}

// renameOverPrev is renameFile onto a target that a rebalance has not
// moved yet (it lives where the previous layout put it, and its hashed
// child hd does not have it): the new name goes where the current layout
// puts it, then the old target's copies go. Lookup sees the old target
// until the name on hd appears, which then shadows it.
func (d *Distribute) renameOverPrev(ctx context.Context, oldpath, newpath string, src loc, hd int, target *loc, moveOnCached func() error) error {
	cs := src.cached
	maybe, err := d.movedMaybe(ctx, cs, newpath, src.attr.Gfid, moveOnCached())
	if err != nil {
		return err
	}
	if hd != cs {
		if err := d.placePointer(ctx, hd, newpath, src, false); err != nil {
			if maybe == nil {
				d.moveBack(ctx, cs, oldpath, newpath)
			}
			return err
		}
	}
	if target.cached != cs && target.cached != hd {
		if err := d.child(target.cached).Unlink(ctx, newpath); err != nil && !errors.Is(err, syscall.ENOENT) {
			d.log.Warn("rename: old target's data left behind", "path", newpath,
				"child", d.children[target.cached].ID, "err", err)
		}
	}
	if target.ptr && target.hashed != cs && target.hashed != hd {
		d.unlinkPointer(ctx, target.hashed, newpath)
	}
	if src.ptr {
		d.unlinkPointer(ctx, src.hashed, oldpath)
	}
	return maybe
}

// placePointer puts a pointer to the inode at target at path on child i.
// With excl the name must be free (Mknod decides EEXIST); otherwise the
// pointer is made under a temporary name and renamed over path, replacing
// whatever was there in one step.
func (d *Distribute) placePointer(ctx context.Context, i int, path string, target loc, excl bool) error {
	in := d.pointerFor(target)
	if excl {
		return d.createAt(ctx, i, path, func() error {
			_, err := d.child(i).Mknod(ctx, path, in)
			return err
		})
	}
	dir, _ := layer.Split(path)
	tmp := layer.Join(dir, tmpName())
	err := d.withParent(ctx, i, tmp, func() error {
		_, err := d.child(i).Mknod(ctx, tmp, in)
		return err
	})
	if err != nil {
		return err
	}
	if err := d.child(i).Rename(ctx, tmp, path, 0); err != nil {
		d.unlinkPointer(ctx, i, tmp)
		return err
	}
	return nil
}

// renameDir renames a directory on every child: on newpath's hashed child
// first (its errors are authoritative and nothing is undone), then on the
// others in parallel. If one of those fails, the children that renamed are
// renamed back and an empty target they replaced is made again.
func (d *Distribute) renameDir(ctx context.Context, oldpath, newpath string, flags uint32, src loc, target *loc) error {
	if target != nil {
		if err := d.clearIfEmpty(ctx, newpath); err != nil {
			return err
		}
	}
	// The decider first, and last when undone (splitdir.go): the name it
	// holds is the one the rename has reached.
	hd := d.decider()
	newDir, _ := layer.Split(newpath)
	var replaced layer.Attr // tells a replica set that moves the rename back what to make again
	if target != nil {
		replaced = target.attr
	}
	mv := func(i int) error {
		err := layer.RenameDir(ctx, d.child(i), oldpath, newpath, flags, replaced)
		if !errors.Is(err, syscall.ENOENT) {
			return err
		}
		if holdsAt(ctx, d.child(i), newpath, src.attr.Gfid) {
			return nil // moved there already (a rename left half done, settled since)
		}
		// The directory or newpath's parent is missing on this child.
		if herr := d.mkdirCopy(ctx, i, oldpath, src.attr); herr != nil {
			return herr
		}
		if herr := d.ensureDir(ctx, i, newDir); herr != nil {
			return herr
		}
		return layer.RenameDir(ctx, d.child(i), oldpath, newpath, flags, replaced)
	}
	if err := mv(hd); err != nil {
		return err
	}
	errs := d.parallel(d.others(hd), mv)
	err := firstErr(errs, -1)
	if err == nil {
		return nil
	}
	for _, i := range append(d.others(hd), hd) {
		if errs[i] != nil {
			continue
		}
		if rerr := d.child(i).Rename(ctx, newpath, oldpath, layer.RenameNoReplace); rerr != nil {
			d.log.Error("directory rename rollback failed", "old", oldpath, "new", newpath,
				"child", d.children[i].ID, "err", rerr)
			continue
		}
		if target != nil {
			if rerr := d.mkdirCopy(ctx, i, newpath, target.attr); rerr != nil {
				d.log.Warn("directory rename rollback: target not restored", "path", newpath,
					"child", d.children[i].ID, "err", rerr)
			}
		}
	}
	return err
}
