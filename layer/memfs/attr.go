package memfs

import (
	"context"
	"math"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Setattr changes the attributes in.Valid names of the inode at path,
// never following a symlink; SetCtime is ignored, as by posix. A
// distribute pointer file answers EREMOTE, as on a brick: changing the
// pointer would not change the file.
func (fs *FS) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	return on(fs, path, func(ino *inode) (layer.Attr, error) {
		if ino.pointer() {
			return layer.Attr{}, syscall.EREMOTE
		}
		return setattr(ino, in)
	})
}

// setattr checks the whole change before it makes any of it, so that one
// that fails changes nothing.
func setattr(ino *inode, in layer.SetattrIn) (layer.Attr, error) {
	if err := checkSetattr(ino, in); err != nil {
		return layer.Attr{}, err
	}
	t := now()
	if in.Valid&(layer.SetUid|layer.SetGid) != 0 {
		chown(ino, in)
	}
	if in.Valid&layer.SetMode != 0 {
		ino.mode = ino.kind() | in.Mode&07777
	}
	if in.Valid&layer.SetSize != 0 {
		resize(ino, int64(in.Size), t)
	}
	setTimes(ino, in, t)
	if in.Valid&^layer.SetCtime != 0 {
		ino.ctime = t
	}
	return ino.attr(), nil
}

// checkSetattr refuses what the system calls behind in would.
func checkSetattr(ino *inode, in layer.SetattrIn) error {
	switch {
	case in.Valid&layer.SetMode != 0 && ino.kind() == syscall.S_IFLNK:
		return syscall.EOPNOTSUPP // as fchmodat(AT_SYMLINK_NOFOLLOW)
	case in.Valid&layer.SetAtime != 0 && in.Atime.Nsec >= 1e9,
		in.Valid&layer.SetMtime != 0 && in.Mtime.Nsec >= 1e9:
		return syscall.EINVAL
	case in.Valid&layer.SetSize == 0:
		return nil
	case ino.isDir():
		return syscall.EISDIR
	case ino.data == nil:
		return syscall.EINVAL
	case in.Size > math.MaxInt64:
		return syscall.EFBIG
	}
	return nil
}

// chown changes the owner or group. As Linux does, for root too, it
// clears a non-directory's set-user-ID bit, and its set-group-ID bit if
// group execution is on: a setattr that also sets the mode sets it after.
func chown(ino *inode, in layer.SetattrIn) {
	if in.Valid&layer.SetUid != 0 {
		ino.uid = in.Uid
	}
	if in.Valid&layer.SetGid != 0 {
		ino.gid = in.Gid
	}
	if ino.isDir() {
		return
	}
	ino.mode &^= syscall.S_ISUID
	if ino.mode&syscall.S_IXGRP != 0 {
		ino.mode &^= syscall.S_ISGID
	}
}

// resize truncates or extends a regular file, which changes it.
func resize(ino *inode, size int64, t layer.Timespec) {
	ino.data.truncate(size)
	ino.mtime, ino.ctime = t, t
}

// setTimes sets the times in names, to now where it says so.
func setTimes(ino *inode, in layer.SetattrIn, t layer.Timespec) {
	switch {
	case in.Valid&layer.SetAtimeNow != 0:
		ino.atime = t
	case in.Valid&layer.SetAtime != 0:
		ino.atime = in.Atime
	}
	switch {
	case in.Valid&layer.SetMtimeNow != 0:
		ino.mtime = t
	case in.Valid&layer.SetMtime != 0:
		ino.mtime = in.Mtime
	}
}

// accessed updates the atime of a read as Linux's relatime does: only if
// it is not after the last change, or is a day old.
func accessed(ino *inode) {
	t := now()
	if !after(ino.atime, ino.mtime) || !after(ino.atime, ino.ctime) || t.Sec-ino.atime.Sec >= 24*60*60 {
		ino.atime = t
	}
}

// Statfs reports a volume of 1 TiB, less the blocks files hold.
func (fs *FS) Statfs(ctx context.Context, path string) (layer.Statfs, error) {
	if err := layer.CheckPath(path); err != nil {
		return layer.Statfs{}, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	free := uint64(capacity - min(fs.used, capacity))
	return layer.Statfs{Blocks: capacity, Bfree: free, Bavail: free,
		Files: maxFiles, Ffree: uint64(maxFiles - min(fs.files, maxFiles)),
		Bsize: blockSize, Frsize: blockSize, NameLen: layer.NameMax}, nil
}

// room fails with ENOSPC unless n more blocks fit.
func (fs *FS) room(n int64) error {
	if fs.used+n > capacity {
		return syscall.ENOSPC
	}
	return nil
}
