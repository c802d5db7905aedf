package memfs

import (
	"context"
	"slices"
	"strings"
	"syscall"
)

// Setxattr flags and the limits of Linux's xattr calls.
const (
	xattrCreate  = 1 // XATTR_CREATE
	xattrReplace = 2 // XATTR_REPLACE
	xattrNameMax = 255
	xattrSizeMax = 64 << 10
)

// userPrefix is the only xattr namespace callers may use, as on a brick:
// the others are mortar's (trusted.mortar.*) or the system's.
const userPrefix = "user."

func checkXattrName(name string) error {
	switch {
	case !strings.HasPrefix(name, userPrefix) || len(name) == len(userPrefix):
		return syscall.EOPNOTSUPP
	case len(name) > xattrNameMax:
		return syscall.ERANGE
	}
	return nil
}

// xattrsFor fails unless ino may carry user xattrs: as on Linux, only
// regular files and directories may (EPERM).
func xattrsFor(ino *inode) error {
	if ino.data == nil && ino.dir == nil {
		return syscall.EPERM
	}
	return nil
}

// Getxattr returns a user.* xattr of the inode at path (ENODATA if it has
// none of that name).
func (fs *FS) Getxattr(ctx context.Context, path, name string) ([]byte, error) {
	if err := checkXattrName(name); err != nil {
		return nil, err
	}
	return on(fs, path, func(ino *inode) ([]byte, error) {
		v, ok := ino.xattrs[name]
		if !ok {
			return nil, syscall.ENODATA
		}
		return slices.Clone(v), nil
	})
}

// Setxattr sets a user.* xattr; flags may be XATTR_CREATE (EEXIST if it
// is there) or XATTR_REPLACE (ENODATA if it is not).
func (fs *FS) Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	switch {
	case flags&^(xattrCreate|xattrReplace) != 0:
		return syscall.EINVAL
	case len(value) > xattrSizeMax:
		return syscall.E2BIG
	}
	return fs.changeXattr(path, name, func(ino *inode, had bool) error {
		switch {
		case had && flags&xattrCreate != 0:
			return syscall.EEXIST
		case !had && flags&xattrReplace != 0:
			return syscall.ENODATA
		}
		if ino.xattrs == nil {
			ino.xattrs = map[string][]byte{}
		}
		ino.xattrs[name] = slices.Clone(value)
		return nil
	})
}

// Removexattr removes a user.* xattr (ENODATA if there is none).
func (fs *FS) Removexattr(ctx context.Context, path, name string) error {
	return fs.changeXattr(path, name, func(ino *inode, had bool) error {
		if !had {
			return syscall.ENODATA
		}
		delete(ino.xattrs, name)
		return nil
	})
}

// changeXattr runs change on the inode at path, telling it whether the
// inode has the xattr name; a change made changes the inode's ctime.
func (fs *FS) changeXattr(path, name string, change func(ino *inode, had bool) error) error {
	if err := checkXattrName(name); err != nil {
		return err
	}
	_, err := on(fs, path, func(ino *inode) (struct{}, error) {
		if err := xattrsFor(ino); err != nil {
			return struct{}{}, err
		}
		_, had := ino.xattrs[name]
		if err := change(ino, had); err != nil {
			return struct{}{}, err
		}
		ino.ctime = now()
		return struct{}{}, nil
	})
	return err
}

// Listxattr lists the xattrs of the inode at path, sorted.
func (fs *FS) Listxattr(ctx context.Context, path string) ([]string, error) {
	return on(fs, path, func(ino *inode) ([]string, error) {
		var names []string
		for name := range ino.xattrs {
			names = append(names, name)
		}
		slices.Sort(names)
		return names, nil
	})
}
