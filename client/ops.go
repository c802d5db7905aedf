package client

import (
	"context"
	"errors"
	"io/fs"
	"sort"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// Stat returns information about the named file (symlinks are not
// followed: the volume's paths never resolve through them server-side).
func (v *Volume) Stat(ctx context.Context, name string) (*FileInfo, error) {
	p, err := resolve("stat", name)
	if err != nil {
		return nil, err
	}
	a, err := v.top.Lookup(ctx, p)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	_, base := layer.Split(p)
	if p == "/" {
		base = "/"
	}
	return &FileInfo{name: base, attr: a}, nil
}

// Mkdir creates a directory.
func (v *Volume) Mkdir(ctx context.Context, name string, perm fs.FileMode) error {
	p, err := resolve("mkdir", name)
	if err != nil {
		return err
	}
	_, err = v.top.Mkdir(ctx, p, layer.MkdirIn{Owner: v.owner(), Mode: permBits(perm)})
	return pathErr("mkdir", name, err)
}

// MkdirAll creates a directory and any missing parents.
func (v *Volume) MkdirAll(ctx context.Context, name string, perm fs.FileMode) error {
	p, err := resolve("mkdir", name)
	if err != nil {
		return err
	}
	if p == "/" {
		return nil
	}
	if fi, err := v.Stat(ctx, p); err == nil {
		if fi.IsDir() {
			return nil
		}
		return &fs.PathError{Op: "mkdir", Path: name, Err: syscall.ENOTDIR}
	}
	parent, _ := layer.Split(p)
	if err := v.MkdirAll(ctx, parent, perm); err != nil {
		return err
	}
	err = v.Mkdir(ctx, p, perm)
	if errors.Is(err, fs.ErrExist) {
		return nil // made by someone else meanwhile
	}
	return err
}

// Remove removes a file or an empty directory.
func (v *Volume) Remove(ctx context.Context, name string) error {
	p, err := resolve("remove", name)
	if err != nil {
		return err
	}
	err = v.top.Unlink(ctx, p)
	if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EPERM) {
		err = v.top.Rmdir(ctx, p)
	}
	return pathErr("remove", name, err)
}

// RemoveAll removes name and everything under it; a missing name is not
// an error.
func (v *Volume) RemoveAll(ctx context.Context, name string) error {
	fi, err := v.Stat(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		entries, err := v.ReadDir(ctx, name)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := v.RemoveAll(ctx, name+"/"+e.Name()); err != nil {
				return err
			}
		}
	}
	return v.Remove(ctx, name)
}

// Rename renames (moves) oldname to newname, replacing newname atomically
// if it exists (rename(2) semantics).
func (v *Volume) Rename(ctx context.Context, oldname, newname string) error {
	op, err := resolve("rename", oldname)
	if err != nil {
		return err
	}
	np, err := resolve("rename", newname)
	if err != nil {
		return err
	}
	return pathErr("rename", oldname, v.top.Rename(ctx, op, np, 0))
}

// Link makes newname a hard link to oldname.
func (v *Volume) Link(ctx context.Context, oldname, newname string) error {
	op, err := resolve("link", oldname)
	if err != nil {
		return err
	}
	np, err := resolve("link", newname)
	if err != nil {
		return err
	}
	_, err = v.top.Link(ctx, op, np)
	return pathErr("link", newname, err)
}

// Symlink makes newname a symbolic link to target.
func (v *Volume) Symlink(ctx context.Context, target, newname string) error {
	p, err := resolve("symlink", newname)
	if err != nil {
		return err
	}
	_, err = v.top.Symlink(ctx, p, layer.SymlinkIn{Owner: v.owner(), Target: target})
	return pathErr("symlink", newname, err)
}

// Readlink returns a symbolic link's target.
func (v *Volume) Readlink(ctx context.Context, name string) (string, error) {
	p, err := resolve("readlink", name)
	if err != nil {
		return "", err
	}
	t, err := v.top.Readlink(ctx, p)
	return t, pathErr("readlink", name, err)
}

func (v *Volume) setattr(ctx context.Context, op, name string, in layer.SetattrIn) error {
	p, err := resolve(op, name)
	if err != nil {
		return err
	}
	_, err = v.top.Setattr(ctx, p, in)
	return pathErr(op, name, err)
}

// Chmod changes permission bits.
func (v *Volume) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	return v.setattr(ctx, "chmod", name, layer.SetattrIn{Valid: layer.SetMode, Mode: permBits(mode)})
}

// Chown changes owner and group.
func (v *Volume) Chown(ctx context.Context, name string, uid, gid int) error {
	return v.setattr(ctx, "chown", name, layer.SetattrIn{Valid: layer.SetUid | layer.SetGid, Uid: uint32(uid), Gid: uint32(gid)})
}

// Chtimes changes access and modification times (nanosecond precision).
func (v *Volume) Chtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return v.setattr(ctx, "chtimes", name, layer.SetattrIn{Valid: layer.SetAtime | layer.SetMtime,
		Atime: fromTime(atime), Mtime: fromTime(mtime)})
}

// Truncate changes a file's size.
func (v *Volume) Truncate(ctx context.Context, name string, size int64) error {
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: name, Err: syscall.EINVAL}
	}
	return v.setattr(ctx, "truncate", name, layer.SetattrIn{Valid: layer.SetSize, Size: uint64(size)})
}

// ReadDir lists a directory sorted by name, with attributes.
func (v *Volume) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	p, err := resolve("readdir", name)
	if err != nil {
		return nil, err
	}
	entries, err := layer.ReadDirAll(ctx, v.top, p)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	out := make([]fs.DirEntry, len(entries))
	for i, e := range entries {
		out[i] = &FileInfo{name: e.Name, attr: e.Attr}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Statfs reports the volume's capacity (the sum of its bricks).
func (v *Volume) Statfs(ctx context.Context) (layer.Statfs, error) {
	st, err := v.top.Statfs(ctx, "/")
	return st, pathErr("statfs", "/", err)
}

// Getxattr returns an extended attribute (user.* namespace).
func (v *Volume) Getxattr(ctx context.Context, name, attr string) ([]byte, error) {
	p, err := resolve("getxattr", name)
	if err != nil {
		return nil, err
	}
	val, err := v.top.Getxattr(ctx, p, attr)
	return val, pathErr("getxattr", name, err)
}

// Setxattr sets an extended attribute (user.* namespace).
func (v *Volume) Setxattr(ctx context.Context, name, attr string, value []byte) error {
	p, err := resolve("setxattr", name)
	if err != nil {
		return err
	}
	return pathErr("setxattr", name, v.top.Setxattr(ctx, p, attr, value, 0))
}
