package memfs

import (
	"context"
	"math"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Create makes and opens a regular file. Without O_EXCL an existing file
// is opened instead (truncated with O_TRUNC), keeping its owner and gfid.
// A create made in one go (in.Data, in.Set) is finished as the brick's
// server finishes it: an O_EXCL one that fails after making the file
// removes it again.
func (fs *FS) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	f, a, err := fs.create(path, in)
	if err != nil {
		return nil, layer.Attr{}, err
	}
	if len(in.Data) == 0 && in.Set.Valid == 0 {
		return f, a, nil
	}
	if a, err = layer.Fill(ctx, f, in.Data, in.Set, a); err != nil {
		f.Release(ctx)
		if in.Flags&syscall.O_EXCL != 0 {
			fs.Unlink(ctx, path)
		}
		return nil, layer.Attr{}, err
	}
	return f, a, nil
}

func (fs *FS) create(path string, in layer.CreateIn) (*file, layer.Attr, error) {
	if in.Flags&syscall.O_DIRECTORY != 0 {
		return nil, layer.Attr{}, syscall.EINVAL // as open(2) with O_CREAT
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	dir, name, ino, err := fs.named(path)
	switch {
	case err != nil:
		return nil, layer.Attr{}, err
	case ino != nil && in.Flags&syscall.O_EXCL != 0:
		return nil, layer.Attr{}, syscall.EEXIST
	case ino != nil && ino.isDir():
		return nil, layer.Attr{}, syscall.EISDIR
	case ino == nil:
		ino = fs.newInode(dir, in.Owner, syscall.S_IFREG|in.Mode&07777)
		put(dir, name, ino, ino.ctime)
	}
	f, err := fs.open(ino, in.Flags)
	if err != nil {
		return nil, layer.Attr{}, err
	}
	return f, ino.attr(), nil
}

// Open opens an existing regular file, or a directory for reading.
func (fs *FS) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	if flags&syscall.O_CREAT != 0 {
		return nil, syscall.EINVAL
	}
	return on(fs, path, func(ino *inode) (layer.File, error) {
		if ino.pointer() {
			return nil, syscall.EREMOTE // distribute follows the pointer
		}
		f, err := fs.open(ino, flags)
		if err != nil {
			return nil, err
		}
		return f, nil
	})
}

// open opens ino with the errors posix gives: symlinks are never
// followed (ELOOP), special files never opened (ENXIO).
func (fs *FS) open(ino *inode, flags uint32) (*file, error) {
	switch {
	case ino.kind() == syscall.S_IFLNK:
		return nil, syscall.ELOOP
	case ino.isDir() && (flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0):
		return nil, syscall.EISDIR
	case ino.data == nil && !ino.isDir():
		return nil, syscall.ENXIO
	case flags&syscall.O_DIRECTORY != 0 && !ino.isDir():
		return nil, syscall.ENOTDIR
	}
	if flags&syscall.O_TRUNC != 0 {
		resize(ino, 0, now())
	}
	ino.opens++
	return &file{fs: fs, ino: ino, flags: flags}, nil
}

// file is an open file or directory.
type file struct {
	fs       *FS
	ino      *inode
	flags    uint32
	released bool // guarded by fs.mu
}

var _ layer.File = (*file)(nil)

// do runs fn holding the lock, unless f is released (EBADF).
func (f *file) do(fn func() error) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.released {
		return syscall.EBADF
	}
	return fn()
}

// writable fails with EBADF if f was opened read-only, as a descriptor
// does.
func (f *file) writable() error {
	if f.flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		return syscall.EBADF
	}
	return nil
}

// Read reads at off; fewer bytes than len(p) only at the end of file.
func (f *file) Read(ctx context.Context, p []byte, off int64) (n int, err error) {
	err = f.do(func() error {
		switch {
		case f.flags&syscall.O_ACCMODE == syscall.O_WRONLY:
			return syscall.EBADF
		case f.ino.isDir():
			return syscall.EISDIR
		case off < 0:
			return syscall.EINVAL
		}
		n = f.ino.data.readAt(p, off)
		if f.flags&syscall.O_NOATIME == 0 {
			accessed(f.ino)
		}
		return nil
	})
	return n, err
}

// Write writes all of p at off, at the end of file with O_APPEND.
func (f *file) Write(ctx context.Context, p []byte, off int64) (n int, err error) {
	err = f.do(func() error {
		if err := f.writable(); err != nil {
			return err
		}
		d := f.ino.data
		if f.flags&syscall.O_APPEND != 0 {
			off = d.size
		}
		if err := checkRange(off, int64(len(p))); err != nil || len(p) == 0 {
			return err
		}
		d.writeAt(p, off)
		t := now()
		f.ino.mtime, f.ino.ctime = t, t
		n = len(p)
		return nil
	})
	return n, err
}

// checkRange refuses a negative offset, and a range past the largest
// offset a file may have.
func checkRange(off, n int64) error {
	switch {
	case off < 0 || n < 0:
		return syscall.EINVAL
	case off > math.MaxInt64-n:
		return syscall.EFBIG
	}
	return nil
}

func (f *file) Getattr(ctx context.Context) (a layer.Attr, err error) {
	err = f.do(func() error {
		a = f.ino.attr()
		return nil
	})
	return a, err
}

// Setattr changes attributes of the open inode; it truncates also a file
// opened read-only, as posix does (the client kernel has checked
// permissions).
func (f *file) Setattr(ctx context.Context, in layer.SetattrIn) (a layer.Attr, err error) {
	err = f.do(func() error {
		a, err = setattr(f.ino, in)
		return err
	})
	return a, err
}

// Fsync has nothing to do: memory is as durable as memfs gets.
func (f *file) Fsync(ctx context.Context, datasync bool) error {
	return f.do(func() error { return nil })
}

// Fallocate allocates (mode 0 or FALLOC_FL_KEEP_SIZE), punches a hole
// (FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE) or zeroes a range
// (FALLOC_FL_ZERO_RANGE), with fallocate(2)'s errors.
func (f *file) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	return f.do(func() error {
		if off < 0 || length <= 0 {
			return syscall.EINVAL
		}
		if err := f.writable(); err != nil {
			return err
		}
		if err := checkRange(off, length); err != nil {
			return err
		}
		if mode&fallocPunchHole == 0 {
			if err := f.fs.room(blocksIn(off, length)); err != nil {
				return err
			}
		}
		if err := f.ino.data.fallocate(mode, off, length); err != nil {
			return err
		}
		t := now()
		f.ino.mtime, f.ino.ctime = t, t
		return nil
	})
}

// Flush does nothing: memfs keeps no locks.
func (f *file) Flush(ctx context.Context, owner uint64) error {
	return f.do(func() error { return nil })
}

// Getlk fails, as posix's: the locks layer above implements locks.
func (f *file) Getlk(ctx context.Context, owner uint64, lk layer.Lock) (layer.Lock, error) {
	return layer.Lock{}, syscall.ENOLCK
}

// Setlk fails, as posix's: the locks layer above implements locks.
func (f *file) Setlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool) error {
	return syscall.ENOLCK
}

// Release closes the file; an inode without names goes with its last
// File.
func (f *file) Release(ctx context.Context) error {
	return f.do(func() error {
		f.released = true
		f.ino.opens--
		f.fs.forget(f.ino)
		return nil
	})
}
