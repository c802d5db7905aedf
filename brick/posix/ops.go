package posix

import (
	"context"
	"math"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// Lookup returns the attributes of the inode at path, not following it;
// path may name it by its id (layer.IDPath).
func (s *Store) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	a, err := s.resolveSource(path)
	if err != nil {
		return layer.Attr{}, err
	}
	defer a.close()
	return s.attrAt(a)
}

// Setattr changes the attributes named by in.Valid; SetCtime is ignored.
func (s *Store) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	a, err := s.resolve(path, false)
	if err != nil {
		return layer.Attr{}, err
	}
	defer a.close()
	if err := refusePointer(a); err != nil {
		return layer.Attr{}, err
	}
	release, err := s.holdSelf(ctx, a, path)
	if err != nil {
		return layer.Attr{}, err
	}
	defer release()
	if err := s.checkFragmentTruncate(ctx, in); err != nil {
		return layer.Attr{}, err
	}
	if in.Valid&layer.SetSize != 0 && s.arbiter {
		// Arbiters hold no data, but refuse what a data brick refuses.
		if err := s.truncateAt(a, 0, true); err != nil {
			return layer.Attr{}, err
		}
		in.Valid &^= layer.SetSize
	}
	if in.Valid&(layer.SetUid|layer.SetGid) != 0 {
		uid, gid := chownArgs(in)
		if err := unix.Fchownat(a.dir, a.name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return layer.Attr{}, err
		}
	}
	if in.Valid&layer.SetMode != 0 {
		if err := chmodAt(a.dir, a.name, in.Mode&07777); err != nil {
			return layer.Attr{}, err
		}
	}
	if in.Valid&layer.SetSize != 0 {
		if err := s.truncateAt(a, in.Size, false); err != nil {
			return layer.Attr{}, err
		}
		if err := s.recordSize(ctx, self(a, path), true); err != nil {
			return layer.Attr{}, err
		}
	}
	if ts := utimes(in); ts != nil {
		if err := unix.UtimesNanoAt(a.dir, a.name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return layer.Attr{}, err
		}
	}
	return s.attrAt(a)
}

// refusePointer fails with EREMOTE if a names a distribute pointer file:
// changing a pointer's attributes would not change the file, so distribute
// is told to follow the pointer instead.
func refusePointer(a at) error {
	var st unix.Stat_t
	if err := unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if !isLinkto(st.Mode) {
		return nil
	}
	if v, err := getxattrString(procAt(a.dir, a.name), XattrLinkto, false); err == nil && v != "" {
		return unix.EREMOTE
	}
	return nil
}

// chownArgs returns the uid and gid arguments of chown(2) for in.
func chownArgs(in layer.SetattrIn) (uid, gid int) {
	uid, gid = -1, -1
	if in.Valid&layer.SetUid != 0 {
		uid = int(in.Uid)
	}
	if in.Valid&layer.SetGid != 0 {
		gid = int(in.Gid)
	}
	return uid, gid
}

// utimes returns the utimensat(2) times for in, or nil if it sets none.
func utimes(in layer.SetattrIn) []unix.Timespec {
	const any = layer.SetAtime | layer.SetMtime | layer.SetAtimeNow | layer.SetMtimeNow
	if in.Valid&any == 0 {
		return nil
	}
	one := func(set, now uint32, t layer.Timespec) unix.Timespec {
		switch {
		case in.Valid&now != 0:
			return unix.Timespec{Nsec: unix.UTIME_NOW}
		case in.Valid&set != 0:
			return unix.Timespec{Sec: t.Sec, Nsec: int64(t.Nsec)}
		}
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
	return []unix.Timespec{
		one(layer.SetAtime, layer.SetAtimeNow, in.Atime),
		one(layer.SetMtime, layer.SetMtimeNow, in.Mtime),
	}
}

// futimens sets the times of an open descriptor.
func futimens(fd int, ts []unix.Timespec) error {
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0,
		uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// chmodAt changes the mode of name in dir without following a symlink
// (EOPNOTSUPP for symlinks). Kernels without fchmodat2 use an O_PATH
// descriptor and its /proc path, as glibc does.
func chmodAt(dir int, name string, mode uint32) error {
	err := unix.Fchmodat(dir, name, mode, unix.AT_SYMLINK_NOFOLLOW)
	if err != unix.EOPNOTSUPP {
		return err
	}
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.EOPNOTSUPP
	}
	return unix.Chmod(procFd(fd), mode)
}

// truncateAt sets the size of the regular file a names (with checkOnly,
// only checks that it could).
func (s *Store) truncateAt(a at, size uint64, checkOnly bool) error {
	if size > math.MaxInt64 {
		return unix.EFBIG
	}
	var st unix.Stat_t
	if err := unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return unix.EISDIR
	default:
		return unix.EINVAL
	}
	if checkOnly {
		return nil
	}
	fd, err := unix.Openat(a.dir, a.name,
		unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	s.cutUndo(fd, int64(size), -1)
	return unix.Ftruncate(fd, int64(size))
}

// Readlink returns the target of the symlink at path.
func (s *Store) Readlink(ctx context.Context, path string) (string, error) {
	a, err := s.resolve(path, false)
	if err != nil {
		return "", err
	}
	defer a.close()
	return readlinkAt(a.dir, a.name)
}

// readlinkAt returns the target of the symlink name in directory dir.
func readlinkAt(dir int, name string) (string, error) {
	for size := 256; ; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// Unlink removes a non-directory.
func (s *Store) Unlink(ctx context.Context, path string) error {
	return s.unlink(ctx, path, false)
}

// UnlinkData is Unlink, but fails with EREMOTE if path names a distribute
// pointer file (layer.DataUnlinker).
func (s *Store) UnlinkData(ctx context.Context, path string) error {
	return s.unlink(ctx, path, true)
}

func (s *Store) unlink(ctx context.Context, path string, data bool) error {
	a, err := s.resolve(path, true)
	if err != nil {
		return eperm2enoent(err)
	}
	defer a.close()
	if a.isRoot() {
		return unix.EISDIR
	}
	if data {
		if err := refusePointer(a); err != nil {
			return err
		}
	}
	done, err := s.holdRemoval(ctx, a)
	if err != nil {
		return err
	}
	defer done()
	unlock, err := s.pend(ctx, parent(a, path))
	if err != nil {
		return err
	}
	defer unlock()
	g, ok := goneAt(a)
	if err := unix.Unlinkat(a.dir, a.name, 0); err != nil {
		return err
	}
	if ok {
		s.recordRemoval(ctx, parent(a, path), a.name, g.gfid)
		s.dropIfLast(g)
	}
	return nil
}

// Rmdir removes an empty directory.
func (s *Store) Rmdir(ctx context.Context, path string) error {
	a, err := s.resolve(path, true)
	if err != nil {
		return eperm2enoent(err)
	}
	defer a.close()
	if a.isRoot() {
		return unix.EBUSY
	}
	unlock, err := s.pend(ctx, parent(a, path))
	if err != nil {
		return err
	}
	defer unlock()
	g, ok := goneAt(a)
	if err := unix.Unlinkat(a.dir, a.name, unix.AT_REMOVEDIR); err != nil {
		return err
	}
	if ok && g.dir {
		s.recordRemoval(ctx, parent(a, path), a.name, g.gfid)
		s.idDirDrop(g.gfid)
		s.dropRemovals(g.gfid)
	}
	return nil
}

// eperm2enoent turns the hidden directory's EPERM into ENOENT for
// operations that only remove names.
func eperm2enoent(err error) error {
	if err == unix.EPERM {
		return unix.ENOENT
	}
	return err
}

// Rename has rename(2) semantics; flags may hold layer.RenameNoReplace
// and layer.RenameTakeBack (no removal recorded for oldpath's name).
// Onto the id of the inode at oldpath (layer.IDPath) it parks the inode:
// the name goes, the inode stays reachable by its id (see IDDir).
func (s *Store) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	return s.RenameSource(ctx, oldpath, newpath, flags, layer.Gfid{})
}

// RenameSource is Rename of the inode with gfid src (layer.SourceRenamer;
// zero: any): another inode at oldpath, a stale name, is refused with
// ESTALE.
func (s *Store) RenameSource(ctx context.Context, oldpath, newpath string, flags uint32, src layer.Gfid) error {
	if flags&^(layer.RenameNoReplace|layer.RenameTakeBack) != 0 {
		return unix.EINVAL
	}
	from, err := s.resolve(oldpath, false)
	if err != nil {
		return err
	}
	defer from.close()
	if id, ok, err := s.idPath(newpath); ok {
		return s.parkAt(ctx, from, oldpath, id, err)
	}
	to, err := s.resolve(newpath, true)
	if err != nil {
		return err
	}
	defer to.close()
	if from.isRoot() || to.isRoot() {
		return unix.EBUSY
	}
	// A migration moves every name of a file at once: renaming one away,
	// or another file over one, waits for its freeze (and then finds it
	// moved: EREMOTE).
	done, err := s.holdRenamed(ctx, from, to)
	if err != nil {
		return err
	}
	defer done()
	moved, err := self(from, oldpath).gfid(s)
	if err != nil {
		return err
	}
	if !src.IsZero() && moved != src {
		return unix.ESTALE
	}
	var st unix.Stat_t
	if err := unix.Fstatat(from.dir, from.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	unlock, err := s.pend(ctx, parent(from, oldpath), parent(to, newpath))
	if err != nil {
		return err
	}
	var rflags uint
	if flags&layer.RenameNoReplace != 0 {
		rflags = unix.RENAME_NOREPLACE
	}
	replaced, ok := goneAt(to)
	ok = ok && replaced.ino != st.Ino
	err = unix.Renameat2(from.dir, from.name, to.dir, to.name, rflags)
	if err == nil {
		if flags&layer.RenameTakeBack == 0 {
			s.recordRemoval(ctx, parent(from, oldpath), from.name, moved)
		}
		if ok {
			s.recordRemoval(ctx, parent(to, newpath), to.name, replaced.gfid)
		}
	}
	unlock()
	if err == nil {
		dir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		s.reindex(moved, dir, oldpath, newpath)
		if ok {
			s.dropIfLast(replaced)
		}
		if dir {
			if ierr := s.idDirAt(to, moved); ierr != nil {
				s.log.Warn("gfid index entry of a renamed directory not moved", "brick", s.root, "path", newpath, "err", ierr)
			}
		} else {
			forgetRenamed(to)
		}
	}
	return err
}

// forgetRenamed drops the record of a rename done by too few replicas
// (layer.XattrRenamed) from the file a rename just moved to a: a later
// rename of it was done here, and a record left would make heal undo or
// keep a name after it (a review: a retried rename left one, and heal
// moved the file back on one replica). Parking (a rename onto the id)
// keeps it: heal reads it after.
func forgetRenamed(a at) {
	_ = unix.Lremovexattr(procAt(a.dir, a.name), layer.XattrRenamed) // ENODATA: none; best effort, heal clears what it settles
}

// parkAt parks the inode at from (oldpath) under its id, which resolved
// to the index entry id (or the error err).
func (s *Store) parkAt(ctx context.Context, from at, oldpath string, id at, err error) error {
	if err != nil {
		return unix.EXDEV
	}
	if from.isRoot() {
		return unix.EBUSY
	}
	var g layer.Gfid
	if err := g.UnmarshalText([]byte(id.name[3:])); err != nil {
		return unix.EXDEV
	}
	unlock, err := s.pend(ctx, parent(from, oldpath))
	if err != nil {
		return err
	}
	defer unlock()
	return s.park(from, g)
}

// Link makes newpath another name of the non-directory at oldpath, which
// may name it by its id (layer.IDPath). It gives an inode that lacks one
// its index entry.
func (s *Store) Link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	from, err := s.resolveSource(oldpath)
	if err != nil {
		return layer.Attr{}, err
	}
	defer from.close()
	to, err := s.resolve(newpath, true)
	if err != nil {
		return layer.Attr{}, err
	}
	defer to.close()
	if from.isRoot() {
		return layer.Attr{}, unix.EPERM
	}
	if to.isRoot() {
		return layer.Attr{}, unix.EEXIST
	}
	// A migration moves every name of a file at once: a link waits for
	// its freeze (which then sees one name more than it was told, or
	// finds it moved: EREMOTE).
	done, err := s.holdPath(ctx, from)
	if err != nil {
		return layer.Attr{}, err
	}
	defer done()
	unlock, err := s.pend(ctx, parent(to, newpath))
	if err != nil {
		return layer.Attr{}, err
	}
	defer unlock()
	if err := unix.Linkat(from.dir, from.name, to.dir, to.name, 0); err != nil {
		return layer.Attr{}, err
	}
	attr, err := s.attrAt(to)
	if err == nil {
		if ierr := s.idLink(procAt(to.dir, to.name), attr.Gfid); ierr != nil {
			s.log.Warn("gfid index entry not made", "brick", s.root, "path", newpath, "err", ierr)
		} else if attr, err = s.attrAt(to); err != nil {
			return layer.Attr{}, err
		}
	}
	return attr, err
}

// Statfs reports on the file system holding the brick.
func (s *Store) Statfs(ctx context.Context, path string) (layer.Statfs, error) {
	if err := layer.CheckPath(path); err != nil {
		return layer.Statfs{}, err
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(s.rootfd, &st); err != nil {
		return layer.Statfs{}, err
	}
	return layer.Statfs{
		Blocks:  st.Blocks,
		Bfree:   st.Bfree,
		Bavail:  s.availBeyondReserve(&st),
		Files:   st.Files,
		Ffree:   st.Ffree,
		Bsize:   uint32(st.Bsize),
		Frsize:  uint32(st.Frsize),
		NameLen: uint32(st.Namelen),
	}, nil
}
