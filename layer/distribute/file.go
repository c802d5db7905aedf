package distribute

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// pointerMode is the mode of a pointer file: a regular file with only the
// sticky bit, like GlusterFS's linkto files ("---------T" in ls on a brick).
const pointerMode = syscall.S_IFREG | 01000

// pointerFor returns the Mknod request for a pointer to the inode at l. The
// pointer gets its own gfid from storage: pointers are found by name, and
// two pointers to one hard-linked inode may sit on the same brick.
func (d *Distribute) pointerFor(l loc) layer.MknodIn {
	return layer.MknodIn{
		Owner:  layer.Owner{Uid: l.attr.Uid, Gid: l.attr.Gid},
		Mode:   pointerMode,
		Linkto: d.children[l.cached].ID,
	}
}

// Create creates the file on its hashed child. If that child holds a
// pointer of the name (the file lives elsewhere) and O_EXCL is not set, the
// file is opened where it lives, as open(2) with O_CREAT would.
func (d *Distribute) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	f, a, err := d.create(ctx, path, in)
	if err != nil {
		return nil, layer.Attr{}, err
	}
	return d.newHandle(f, path, in.Flags, a.Gfid), a, nil
}

// elsewhere reports, while a rebalance is under way, whether path exists
// where the previous layout put it and not on its hashed child: a name
// made there now would be a second one. When that cannot be told (the
// previous place not reachable), the error says why: made on its hashed
// child then, the name could stand twice (the simulation,
// replica3x2-grow seed 13).
func (d *Distribute) elsewhere(ctx context.Context, path string) (bool, error) {
	if d.prev == nil {
		return false, nil
	}
	l, err := d.locate(ctx, path)
	switch {
	case err == nil:
		return l.prev, nil
	case errors.Is(err, syscall.ENOENT) || err == errDangling:
		return false, nil
	}
	return false, err
}

func (d *Distribute) create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	h, err := d.hashedChild(ctx, path)
	if err != nil {
		return nil, layer.Attr{}, err
	}
	if found, err := d.elsewhere(ctx, path); err != nil {
		return nil, layer.Attr{}, err
	} else if found {
		if in.Flags&syscall.O_EXCL != 0 {
			return nil, layer.Attr{}, syscall.EEXIST
		}
		return d.openExisting(ctx, path, in.Flags)
	}
	for range 3 {
		var f layer.File
		var a layer.Attr
		err := d.createAt(ctx, h, path, func() error {
			var err error
			f, a, err = d.child(h).Create(ctx, path, in)
			return err
		})
		if err != nil {
			return nil, layer.Attr{}, err
		}
		if a.Linkto == "" {
			return f, a, nil
		}
		if err := f.Release(ctx); err != nil {
			d.log.Warn("release of opened pointer", "path", path, "err", err)
		}
		f, a, err = d.openExisting(ctx, path, in.Flags)
		if errors.Is(err, syscall.ENOENT) {
			continue // dangling pointer removed, or raced with unlink: create again
		}
		return f, a, err
	}
	return nil, layer.Attr{}, fmt.Errorf("distribute: create %s: name keeps changing: %w", path, syscall.EIO)
}

// openExisting opens path where it lives, for a Create that found it.
func (d *Distribute) openExisting(ctx context.Context, path string, flags uint32) (layer.File, layer.Attr, error) {
	l, err := d.locate(ctx, path)
	if err == errDangling {
		d.removeStalePointer(ctx, l.hashed, path)
		return nil, layer.Attr{}, syscall.ENOENT
	}
	if err != nil {
		return nil, layer.Attr{}, err
	}
	if l.attr.IsDir() {
		return nil, layer.Attr{}, syscall.EISDIR
	}
	f, err := d.child(l.cached).Open(ctx, path, flags&^(syscall.O_CREAT|syscall.O_EXCL))
	if errors.Is(err, syscall.EREMOTE) || (l.prev || l.ptr) && errors.Is(err, syscall.ENOENT) {
		// Moved by a rebalance since: it is where find says now.
		f, err = d.openFound(ctx, path, flags&^(syscall.O_CREAT|syscall.O_EXCL))
	}
	if err != nil {
		return nil, layer.Attr{}, err
	}
	a, err := f.Getattr(ctx)
	if err != nil {
		f.Release(ctx)
		return nil, layer.Attr{}, err
	}
	return f, a, nil
}

func (d *Distribute) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	if in.Linkto != "" {
		return layer.Attr{}, syscall.EINVAL // pointer files are distribute's own
	}
	return d.makeOnHashed(ctx, path, func(c layer.Layer) (layer.Attr, error) { return c.Mknod(ctx, path, in) })
}

func (d *Distribute) Symlink(ctx context.Context, path string, in layer.SymlinkIn) (layer.Attr, error) {
	return d.makeOnHashed(ctx, path, func(c layer.Layer) (layer.Attr, error) { return c.Symlink(ctx, path, in) })
}

// makeOnHashed creates a non-directory inode with mk on the name's hashed
// child (healing a missing parent directory there, see createAt).
func (d *Distribute) makeOnHashed(ctx context.Context, path string, mk func(layer.Layer) (layer.Attr, error)) (layer.Attr, error) {
	h, err := d.hashedChild(ctx, path)
	if err != nil {
		return layer.Attr{}, err
	}
	if found, err := d.elsewhere(ctx, path); err != nil {
		return layer.Attr{}, err
	} else if found {
		return layer.Attr{}, syscall.EEXIST
	}
	var a layer.Attr
	err = d.createAt(ctx, h, path, func() error {
		var err error
		a, err = mk(d.child(h))
		return err
	})
	return a, err
}

// Link makes the new name on the child that holds the inode, so the
// storage counts links. If newpath hashes elsewhere, a pointer is placed on
// its hashed child first (exclusively, so it decides EEXIST); a crash after
// it leaves a dangling pointer, which reads as "no such name". A file a
// rebalance moves meanwhile (EREMOTE: the link waited for the move's
// freeze and was not made) is linked where it went.
func (d *Distribute) Link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	for try := 0; ; try++ {
		a, err := d.link(ctx, oldpath, newpath)
		if try == maxReopen || !errors.Is(err, syscall.EREMOTE) {
			return a, err
		}
	}
}

func (d *Distribute) link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	src, err := d.find(ctx, oldpath)
	if err != nil {
		return layer.Attr{}, err
	}
	if src.attr.IsDir() {
		// link(2) resolves newpath before refusing a directory.
		if _, err := d.find(ctx, newpath); err == nil {
			return layer.Attr{}, syscall.EEXIST
		} else if err != errDangling && !errors.Is(err, syscall.ENOENT) {
			return layer.Attr{}, err
		} else if err := d.parentDir(ctx, newpath); err != nil {
			return layer.Attr{}, err
		}
		return layer.Attr{}, syscall.EPERM
	}
	hn, err := d.hashedChild(ctx, newpath)
	if err != nil {
		return layer.Attr{}, err
	}
	if found, err := d.elsewhere(ctx, newpath); err != nil {
		return layer.Attr{}, err
	} else if found {
		return layer.Attr{}, syscall.EEXIST
	}
	var a layer.Attr
	link := func() error {
		var err error
		a, err = d.child(src.cached).Link(ctx, oldpath, newpath)
		return err
	}
	if hn == src.cached {
		return a, d.createAt(ctx, hn, newpath, link)
	}
	in := d.pointerFor(src)
	err = d.createAt(ctx, hn, newpath, func() error {
		_, err := d.child(hn).Mknod(ctx, newpath, in)
		return err
	})
	if err != nil {
		return layer.Attr{}, err
	}
	if err := d.withParent(ctx, src.cached, newpath, link); err != nil {
		d.unlinkPointer(ctx, hn, newpath)
		return layer.Attr{}, err
	}
	return a, nil
}

// unlinkPointer removes the pointer this layer placed at path on child i,
// logging a failure: a leftover pointer dangles, which is harmless.
func (d *Distribute) unlinkPointer(ctx context.Context, i int, path string) {
	if err := d.child(i).Unlink(ctx, path); err != nil && !errors.Is(err, syscall.ENOENT) {
		d.log.Warn("pointer left behind", "path", path, "child", d.children[i].ID, "err", err)
	}
}

// slowUnlink reports whether an unlink on the hashed child that failed
// with err must find the file first.
func slowUnlink(err error) bool {
	for _, e := range []error{syscall.EREMOTE, syscall.ENOENT, syscall.ENOTDIR, syscall.ENOSYS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Unlink removes path. A file whose data is on its hashed child (the
// common case) goes in one round trip there (layer.DataUnlinker); a
// pointer (EREMOTE), a name not there (ENOENT: perhaps where a rebalance's
// previous layout put it; ENOTDIR) or a child without UnlinkData takes
// the way through a lookup. With the hashed child down, a directory is
// still told apart (EISDIR) by the others. That way removes the name where
// the inode lives, then its pointer: a crash between the two leaves a
// dangling pointer, which reads as "no such name" and is cleaned by the
// next create of the name.
func (d *Distribute) Unlink(ctx context.Context, path string) error {
	if h, err := d.hashedChild(ctx, path); err == nil {
		err = layer.UnlinkData(ctx, d.child(h), path)
		switch {
		case errors.Is(err, syscall.ENOTCONN):
			if _, isDir := d.dirElsewhere(ctx, path, h); isDir {
				return syscall.EISDIR
			}
			return err
		case !slowUnlink(err):
			return err
		}
	}
	for try := 0; ; try++ {
		l, err := d.find(ctx, path)
		if err == errDangling {
			d.removeStalePointer(ctx, l.hashed, path)
			return syscall.ENOENT
		}
		if err != nil {
			return err
		}
		if l.attr.IsDir() {
			return syscall.EISDIR
		}
		err = d.child(l.cached).Unlink(ctx, path)
		// Moved meanwhile (see onFound): removed where it went.
		if try < maxReopen && (errors.Is(err, syscall.EREMOTE) || (l.prev || l.ptr || d.prev != nil) && errors.Is(err, syscall.ENOENT)) {
			continue
		}
		if err != nil && !(l.ptr && errors.Is(err, syscall.ENOENT)) {
			return err
		}
		if l.ptr {
			d.unlinkPointer(ctx, l.hashed, path)
		}
		return err
	}
}

var _ layer.NameLeaser = (*Distribute)(nil)

// OwnsName asks the child path's name hashes to (layer.NameLeaser); never
// while a rebalance is under way (the name may be where the previous
// layout put it).
func (d *Distribute) OwnsName(path string) (layer.Attr, bool) {
	nl := d.leaserOf(path)
	if nl == nil {
		return layer.Attr{}, false
	}
	return nl.OwnsName(path)
}

// MadeName asks the subvolume path hashes to, where a file made there is
// (layer.NameLeaser).
func (d *Distribute) MadeName(path string) bool {
	nl := d.leaserOf(path)
	return nl != nil && nl.MadeName(path)
}

// leaserOf is the subvolume path hashes to if it leases names, and no
// rebalance is under way; nil otherwise.
func (d *Distribute) leaserOf(path string) layer.NameLeaser {
	if d.prev != nil || path == "/" {
		return nil
	}
	h, err := d.hashedChild(context.Background(), path)
	if err != nil {
		return nil
	}
	nl, _ := d.child(h).(layer.NameLeaser)
	return nl
}
