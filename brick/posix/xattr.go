package posix

import (
	"context"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// userPrefix is the only xattr namespace callers may use.
const userPrefix = "user."

func checkUserXattr(name string) error {
	if !strings.HasPrefix(name, userPrefix) || len(name) == len(userPrefix) {
		return unix.EOPNOTSUPP
	}
	return nil
}

// getxattr reads an xattr of path, following a final symlink or not.
func getxattr(path, name string, follow bool) ([]byte, error) {
	get := unix.Lgetxattr
	if follow {
		get = unix.Getxattr
	}
	buf := make([]byte, 256)
	for {
		n, err := get(path, name, buf)
		if err == unix.ERANGE {
			if n, err = get(path, name, nil); err != nil {
				return nil, err
			}
			buf = make([]byte, n+64)
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// fgetxattr reads an xattr of an open descriptor.
func fgetxattr(fd int, name string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Fgetxattr(fd, name, buf)
		if err == unix.ERANGE {
			if n, err = unix.Fgetxattr(fd, name, nil); err != nil {
				return nil, err
			}
			buf = make([]byte, n+64)
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// getxattrString reads an xattr as a string; a missing one is "".
func getxattrString(path, name string, follow bool) (string, error) {
	v, err := getxattr(path, name, follow)
	if err == unix.ENODATA {
		return "", nil
	}
	return string(v), err
}

// listxattr lists the xattr names of path (not following it).
func listxattr(path string) ([]string, error) {
	buf := make([]byte, 1024)
	for {
		n, err := unix.Llistxattr(path, buf)
		if err == unix.ERANGE {
			if n, err = unix.Llistxattr(path, nil); err != nil {
				return nil, err
			}
			buf = make([]byte, n+256)
			continue
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, name := range strings.Split(string(buf[:n]), "\x00") {
			if name != "" {
				names = append(names, name)
			}
		}
		return names, nil
	}
}

// Getxattr returns a user.* xattr of the inode at path, or its
// layer.XattrRenamed record (path may then name it by its id,
// layer.IDPath), or a directory's layer.XattrPath.
func (s *Store) Getxattr(ctx context.Context, path, name string) ([]byte, error) {
	resolve := s.resolve
	if name == layer.XattrPath {
		return s.dirPathOf(path)
	}
	if name == layer.XattrRenamed {
		resolve = func(p string, _ bool) (at, error) { return s.resolveSource(p) }
	} else if err := checkUserXattr(name); err != nil {
		return nil, err
	}
	a, err := resolve(path, false)
	if err != nil {
		return nil, err
	}
	defer a.close()
	return getxattr(procAt(a.dir, a.name), name, false)
}

// Setxattr sets a user.* xattr; flags may be XATTR_CREATE or XATTR_REPLACE.
func (s *Store) Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	if name == XattrMigrate {
		return s.migrate(ctx, path, value)
	}
	if name == layer.XattrRenamed {
		return s.setRenamed(path, value)
	}
	if err := checkUserXattr(name); err != nil {
		return err
	}
	if flags&^(unix.XATTR_CREATE|unix.XATTR_REPLACE) != 0 {
		return unix.EINVAL
	}
	a, err := s.resolve(path, false)
	if err != nil {
		return err
	}
	defer a.close()
	release, err := s.holdSelf(ctx, a, path)
	if err != nil {
		return err
	}
	defer release()
	return unix.Lsetxattr(procAt(a.dir, a.name), name, value, int(flags))
}

// Listxattr lists the user.* xattrs of the inode at path.
func (s *Store) Listxattr(ctx context.Context, path string) ([]string, error) {
	a, err := s.resolve(path, false)
	if err != nil {
		return nil, err
	}
	defer a.close()
	all, err := listxattr(procAt(a.dir, a.name))
	if err != nil {
		return nil, err
	}
	names := all[:0]
	for _, n := range all {
		if strings.HasPrefix(n, userPrefix) {
			names = append(names, n)
		}
	}
	return names, nil
}

// Removexattr removes a user.* xattr (ENODATA if it does not exist).
func (s *Store) Removexattr(ctx context.Context, path, name string) error {
	if name == layer.XattrRenamed {
		return s.clearRenamed(path)
	}
	if err := checkUserXattr(name); err != nil {
		return err
	}
	a, err := s.resolve(path, false)
	if err != nil {
		return err
	}
	defer a.close()
	release, err := s.holdSelf(ctx, a, path)
	if err != nil {
		return err
	}
	defer release()
	return unix.Lremovexattr(procAt(a.dir, a.name), name)
}

// setRenamed records a rename done by too few replicas on the inode at
// path (layer.XattrRenamed): no mark, nothing held, it changes no data.
func (s *Store) setRenamed(path string, value []byte) error {
	if _, ok := layer.ParseRenameRecord(value); !ok {
		return unix.EINVAL
	}
	a, err := s.resolve(path, false)
	if err != nil {
		return err
	}
	defer a.close()
	return unix.Lsetxattr(procAt(a.dir, a.name), layer.XattrRenamed, value, 0)
}

// clearRenamed forgets the layer.XattrRenamed record of the inode at path
// (or its id): heal settled the rename. None is no error.
func (s *Store) clearRenamed(path string) error {
	a, err := s.resolveSource(path)
	if err != nil {
		return err
	}
	defer a.close()
	if err := unix.Lremovexattr(procAt(a.dir, a.name), layer.XattrRenamed); err != nil && err != unix.ENODATA {
		return err
	}
	return nil
}
