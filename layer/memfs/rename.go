package memfs

import (
	"context"
	"strings"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Rename has rename(2) semantics, replacing an existing target in one
// step. flags may hold layer.RenameNoReplace, and layer.RenameTakeBack,
// which changes nothing here: memfs keeps no removal records.
func (fs *FS) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	return fs.RenameSource(ctx, oldpath, newpath, flags, layer.Gfid{})
}

// RenameSource is Rename of the inode with gfid src (layer.SourceRenamer;
// zero: whatever oldpath names): another inode at oldpath, a stale name,
// is refused with ESTALE.
func (fs *FS) RenameSource(ctx context.Context, oldpath, newpath string, flags uint32, src layer.Gfid) error {
	if flags&^(layer.RenameNoReplace|layer.RenameTakeBack) != 0 {
		return syscall.EINVAL
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	from, fname, moved, err := fs.named(oldpath)
	if err != nil {
		return err
	}
	to, tname, replaced, err := fs.named(newpath)
	switch {
	case err != nil:
		return err
	case fname == "" || tname == "":
		return syscall.EBUSY
	case moved == nil:
		return syscall.ENOENT
	case !src.IsZero() && moved.gfid != src:
		return syscall.ESTALE
	}
	if err := checkRename(moved, replaced, flags, oldpath, newpath); err != nil || moved == replaced {
		return err // two names of one inode: rename(2) does nothing
	}
	t := now()
	if replaced != nil {
		take(to, tname, replaced, t)
		fs.unlinked(replaced, t)
	}
	take(from, fname, moved, t)
	put(to, tname, moved, t)
	moved.ctime = t
	return nil
}

// checkRename refuses what rename(2) refuses, in the order Linux checks.
// Paths never pass through symlinks, so a directory's subtree is what
// lies under its path.
func checkRename(moved, replaced *inode, flags uint32, oldpath, newpath string) error {
	switch {
	case replaced != nil && flags&layer.RenameNoReplace != 0:
		return syscall.EEXIST
	case moved.isDir() && strings.HasPrefix(newpath, oldpath+"/"):
		return syscall.EINVAL
	case replaced == nil || replaced == moved:
		return nil
	case moved.isDir() && !replaced.isDir():
		return syscall.ENOTDIR
	case !moved.isDir() && replaced.isDir():
		return syscall.EISDIR
	case replaced.isDir() && replaced.dir.len() > 0:
		return syscall.ENOTEMPTY
	}
	return nil
}
