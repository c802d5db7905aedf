package memfs

import (
	"context"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Lookup returns the attributes of the inode at path, not following it.
func (fs *FS) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	return on(fs, path, func(ino *inode) (layer.Attr, error) { return ino.attr(), nil })
}

// make makes a new inode of mode for o at path, with init filling in
// what its kind needs before it is named.
func (fs *FS) make(path string, o layer.Owner, mode uint32, init func(*inode)) (layer.Attr, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	dir, name, err := fs.free(path)
	if err != nil {
		return layer.Attr{}, err
	}
	ino := fs.newInode(dir, o, mode)
	if init != nil {
		init(ino)
	}
	put(dir, name, ino, ino.ctime)
	return ino.attr(), nil
}

// Mknod makes a special file or an empty regular file (the default type).
// With in.Linkto it makes a distribute pointer file, of mode
// S_IFREG|01000, as posix does.
func (fs *FS) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	mode := in.Mode
	if in.Linkto != "" {
		mode = linktoMode
	} else if mode&syscall.S_IFMT == 0 {
		mode |= syscall.S_IFREG
	}
	kind := mode & syscall.S_IFMT
	switch kind {
	case syscall.S_IFREG, syscall.S_IFIFO, syscall.S_IFCHR, syscall.S_IFBLK, syscall.S_IFSOCK:
	default:
		return layer.Attr{}, syscall.EINVAL
	}
	return fs.make(path, in.Owner, kind|mode&07777, func(ino *inode) {
		ino.linkto = in.Linkto
		if kind == syscall.S_IFCHR || kind == syscall.S_IFBLK {
			ino.rdev = in.Rdev
		}
	})
}

// Mkdir makes a directory.
func (fs *FS) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	return fs.make(path, in.Owner, syscall.S_IFDIR|in.Mode&07777, nil)
}

// Symlink makes a symbolic link; its target is kept as given.
func (fs *FS) Symlink(ctx context.Context, path string, in layer.SymlinkIn) (layer.Attr, error) {
	switch {
	case in.Target == "":
		return layer.Attr{}, syscall.ENOENT // as symlink(2)
	case len(in.Target) >= layer.PathMax:
		return layer.Attr{}, syscall.ENAMETOOLONG
	}
	return fs.make(path, in.Owner, syscall.S_IFLNK|0o777, func(ino *inode) { ino.target = in.Target })
}

// Readlink returns the target of the symlink at path.
func (fs *FS) Readlink(ctx context.Context, path string) (string, error) {
	return on(fs, path, func(ino *inode) (string, error) {
		if ino.kind() != syscall.S_IFLNK {
			return "", syscall.EINVAL
		}
		return ino.target, nil
	})
}

// Link makes newpath another name of the non-directory at oldpath.
func (fs *FS) Link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ino, err := fs.find(oldpath)
	if err != nil {
		return layer.Attr{}, err
	}
	dir, name, err := fs.free(newpath)
	if err != nil {
		return layer.Attr{}, err
	}
	if ino.isDir() {
		return layer.Attr{}, syscall.EPERM
	}
	t := now()
	ino.nlink++
	ino.ctime = t
	put(dir, name, ino, t)
	return ino.attr(), nil
}

// Unlink removes a non-directory's name. The inode stays readable through
// the Files open on it.
func (fs *FS) Unlink(ctx context.Context, path string) error {
	return fs.unlink(path, false)
}

// UnlinkData is Unlink, but fails with EREMOTE, removing nothing, if path
// names a distribute pointer file (layer.DataUnlinker).
func (fs *FS) UnlinkData(ctx context.Context, path string) error {
	return fs.unlink(path, true)
}

func (fs *FS) unlink(path string, data bool) error {
	return fs.remove(path, func(_ string, ino *inode) error {
		switch {
		case ino.isDir(): // the root too
			return syscall.EISDIR
		case data && ino.pointer():
			return syscall.EREMOTE
		}
		return nil
	})
}

// Rmdir removes an empty directory (the root is EBUSY, as on a brick).
func (fs *FS) Rmdir(ctx context.Context, path string) error {
	return fs.remove(path, func(name string, ino *inode) error {
		switch {
		case !ino.isDir():
			return syscall.ENOTDIR
		case name == "":
			return syscall.EBUSY
		case ino.dir.len() > 0:
			return syscall.ENOTEMPTY
		}
		return nil
	})
}

// remove takes away the name path, unless refuse, given the name and
// the inode it names, says why not.
func (fs *FS) remove(path string, refuse func(name string, ino *inode) error) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	dir, name, ino, err := fs.named(path)
	if err == nil && ino == nil {
		err = syscall.ENOENT
	}
	if err == nil {
		err = refuse(name, ino)
	}
	if err != nil {
		return err
	}
	t := now()
	take(dir, name, ino, t)
	fs.unlinked(ino, t)
	return nil
}
