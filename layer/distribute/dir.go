package distribute

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// withParent runs op, an operation on child i that creates or moves a name
// at path. If it fails with ENOENT because path's parent directory is
// missing on that child (a brick that was replaced, restored or missed a
// mkdir), the parent chain is healed there and op is retried once.
func (d *Distribute) withParent(ctx context.Context, i int, path string, op func() error) error {
	err := op()
	if !errors.Is(err, syscall.ENOENT) || path == "/" {
		return err
	}
	dir, _ := layer.Split(path)
	if herr := d.ensureDir(ctx, i, dir); herr != nil {
		if errors.Is(herr, syscall.ENOENT) {
			return d.refine(ctx, dir, err) // the parent really does not exist
		}
		return herr
	}
	return op()
}

// createAt runs op, which creates path on child i (path's hashed child),
// healing a missing parent. If the name is taken only by a dangling
// pointer, the pointer is removed and op retried once.
func (d *Distribute) createAt(ctx context.Context, i int, path string, op func() error) error {
	err := d.withParent(ctx, i, path, op)
	if !errors.Is(err, syscall.EEXIST) {
		return err
	}
	if _, lerr := d.locate(ctx, path); lerr != errDangling {
		return err
	}
	d.removeStalePointer(ctx, i, path)
	return d.withParent(ctx, i, path, op)
}

// ensureDir makes sure directory dir exists on child i, creating it (and
// its missing ancestors) with the gfid, mode and owner it has elsewhere.
// Extended attributes and times are not copied yet.
func (d *Distribute) ensureDir(ctx context.Context, i int, dir string) error {
	if dir == "/" {
		return nil // the root is made by brick setup, never healed here
	}
	a, err := d.dirSource(ctx, dir)
	if err != nil {
		return err
	}
	return d.mkdirCopy(ctx, i, dir, a)
}

// dirSource returns the attributes of directory dir: from its hashed child,
// or, if that child lacks it too, from the first child that has it. The
// fallback fans out, but only on this heal path, never on Lookup.
func (d *Distribute) dirSource(ctx context.Context, dir string) (layer.Attr, error) {
	l, err := d.locate(ctx, dir)
	if err == nil {
		if !l.attr.IsDir() {
			return layer.Attr{}, syscall.ENOTDIR
		}
		return l.attr, nil
	}
	if !errors.Is(err, syscall.ENOENT) {
		return layer.Attr{}, err
	}
	attrs := make([]layer.Attr, len(d.children))
	errs := d.parallel(d.others(l.hashed), func(i int) error {
		var err error
		attrs[i], err = d.child(i).Lookup(ctx, dir)
		return err
	})
	for i, a := range attrs {
		if errs[i] == nil && i != l.hashed && a.IsDir() {
			return a, nil
		}
	}
	return layer.Attr{}, syscall.ENOENT
}

// mkdirCopy creates dir on child i as a copy of a (gfid, mode, owner),
// healing missing ancestors first. A directory already there is fine.
func (d *Distribute) mkdirCopy(ctx context.Context, i int, dir string, a layer.Attr) error {
	in := layer.MkdirIn{
		Owner: layer.Owner{Uid: a.Uid, Gid: a.Gid, Gfid: a.Gfid},
		Mode:  a.Mode & 07777,
	}
	mk := func() error { _, err := d.child(i).Mkdir(ctx, dir, in); return err }
	if d.heldElsewhere(ctx, i, a.Gfid) && !holdsAt(ctx, d.child(i), dir, a.Gfid) {
		d.log.Warn("not making a directory again where it is under another name", "path", dir, "child", d.children[i].ID, "gfid", a.Gfid)
		return fmt.Errorf("distribute: %s on %s: %w: %w", dir, d.children[i].ID, errSplit, syscall.EIO)
	}
	err := d.withParent(ctx, i, dir, mk)
	if errors.Is(err, syscall.EEXIST) {
		b, lerr := d.child(i).Lookup(ctx, dir)
		if lerr == nil && b.IsDir() {
			return nil
		}
		return fmt.Errorf("distribute: %s on %s is not a directory: %w", dir, d.children[i].ID, syscall.EIO)
	}
	if err == nil {
		d.log.Info("healed directory", "path", dir, "child", d.children[i].ID, "gfid", a.Gfid)
	}
	return err
}

// dirUpdate changes directory path on every child: first on its hashed
// child h (whose errors, e.g. EPERM, are authoritative and leave nothing
// half done), then on the others in parallel, healing the directory on a
// child that lacks it. first tells fn which call is the hashed one.
func (d *Distribute) dirUpdate(ctx context.Context, path string, h int, fn func(i int, first bool) error) error {
	if err := fn(h, true); err != nil {
		return err
	}
	errs := d.parallel(d.others(h), func(i int) error {
		err := fn(i, false)
		if errors.Is(err, syscall.ENOENT) {
			if herr := d.ensureDir(ctx, i, path); herr != nil {
				return herr
			}
			err = fn(i, false)
		}
		return err
	})
	if err := firstErr(errs, -1); err != nil {
		d.log.Warn("directory update incomplete; children now differ", "path", path, "err", err)
		return err
	}
	return nil
}

// Mkdir creates the directory on its hashed child first (which decides
// EEXIST), then on every other child in parallel with the same gfid. If any
// child fails, the directory is removed again where it was made.
func (d *Distribute) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	if path == "/" {
		return layer.Attr{}, syscall.EEXIST
	}
	if in.Gfid.IsZero() {
		in.Gfid = layer.NewGfid()
	}
	h, err := d.hashedChild(ctx, path)
	if err != nil {
		return layer.Attr{}, err
	}
	if found, err := d.elsewhere(ctx, path); err != nil {
		return layer.Attr{}, err
	} else if found {
		return layer.Attr{}, syscall.EEXIST
	}
	var attr layer.Attr
	err = d.createAt(ctx, h, path, func() error {
		var err error
		attr, err = d.child(h).Mkdir(ctx, path, in)
		return err
	})
	if err != nil {
		return layer.Attr{}, err
	}
	errs := d.parallel(d.others(h), func(i int) error { return d.mkdirPeer(ctx, i, path, in) })
	if err := firstErr(errs, -1); err != nil {
		undo := append([]int{h}, d.others(h)...)
		for _, i := range undo {
			if errs[i] != nil {
				continue
			}
			if rerr := d.child(i).Rmdir(ctx, path); rerr != nil {
				d.log.Warn("mkdir rollback failed", "path", path, "child", d.children[i].ID, "err", rerr)
			}
		}
		return layer.Attr{}, err
	}
	return attr, nil
}

// mkdirPeer creates path on a non-hashed child. A directory already there
// with the same gfid is a leftover of an earlier attempt and is fine; an
// empty one with another gfid is replaced.
func (d *Distribute) mkdirPeer(ctx context.Context, i int, path string, in layer.MkdirIn) error {
	mk := func() error { _, err := d.child(i).Mkdir(ctx, path, in); return err }
	err := d.withParent(ctx, i, path, mk)
	if !errors.Is(err, syscall.EEXIST) {
		return err
	}
	a, lerr := d.child(i).Lookup(ctx, path)
	switch {
	case lerr != nil:
		return lerr
	case a.IsDir() && a.Gfid == in.Gfid:
		return nil
	case a.IsDir():
		if rerr := d.child(i).Rmdir(ctx, path); rerr == nil {
			d.log.Info("replaced stray directory", "path", path, "child", d.children[i].ID)
			return mk()
		}
	}
	d.log.Warn("mkdir: name taken on a non-hashed child", "path", path, "child", d.children[i].ID, "mode", a.Mode)
	return fmt.Errorf("distribute: mkdir %s: stray entry on %s: %w", path, d.children[i].ID, syscall.EIO)
}

// Rmdir checks that the directory is empty on every child (only pointer
// files, which are then stale, may remain, and are deleted), removes it on
// every child but its hashed one in parallel, then on the hashed one, so
// that Lookup sees it until it is gone everywhere. On failure, the copies
// already removed are made again with the same gfid, mode and owner.
func (d *Distribute) Rmdir(ctx context.Context, path string) error {
	if path == "/" {
		return syscall.EBUSY
	}
	l, err := d.find(ctx, path)
	if err != nil {
		return err
	}
	if !l.attr.IsDir() {
		return syscall.ENOTDIR
	}
	if err := d.clearIfEmpty(ctx, path); err != nil {
		return err
	}
	rm := func(i int) error {
		err := d.child(i).Rmdir(ctx, path)
		if i != l.hashed && errors.Is(err, syscall.ENOENT) {
			return nil
		}
		return err
	}
	peers := d.others(l.hashed)
	errs := d.parallel(peers, rm)
	if err := firstErr(errs, -1); err == nil {
		err = rm(l.hashed)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return err // ENOENT: a concurrent rmdir won
		}
		errs[l.hashed] = err
	}
	for _, i := range peers {
		if errs[i] == nil {
			if rerr := d.mkdirCopy(ctx, i, path, l.attr); rerr != nil {
				d.log.Warn("rmdir rollback failed", "path", path, "child", d.children[i].ID, "err", rerr)
			}
		}
	}
	return firstErr(errs, l.hashed)
}

// clearIfEmpty lists directory path on every child in parallel and returns
// ENOTEMPTY if any child holds anything but pointer files. Otherwise the
// pointers are stale (their data would be a non-pointer entry in this
// directory on some child) and are deleted.
func (d *Distribute) clearIfEmpty(ctx context.Context, path string) error {
	lists := make([][]layer.Entry, len(d.children))
	errs := d.parallel(d.all(), func(i int) error {
		var err error
		lists[i], err = layer.ReadDirAll(ctx, d.child(i), path)
		if errors.Is(err, syscall.ENOENT) {
			return nil
		}
		return err
	})
	if err := firstErr(errs, -1); err != nil {
		return err
	}
	stale := false
	for _, list := range lists {
		for _, e := range list {
			if e.Attr.Linkto == "" {
				return syscall.ENOTEMPTY
			}
			stale = true
		}
	}
	if !stale {
		return nil
	}
	errs = d.parallel(d.all(), func(i int) error {
		for _, e := range lists[i] {
			err := d.child(i).Unlink(ctx, layer.Join(path, e.Name))
			if err != nil && !errors.Is(err, syscall.ENOENT) {
				return err
			}
		}
		return nil
	})
	return firstErr(errs, -1)
}
