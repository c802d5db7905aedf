package readdirahead

import (
	"context"

	"github.com/mortarfs/mortar/layer"
)

// The operations that change names or attributes forget the listings
// they may have made stale when they end (see the package doc).

func (l *Layer) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	return changed(l, func() (layer.Attr, error) { return l.Child.Setattr(ctx, path, in) }, path)
}

func (l *Layer) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	return changed(l, func() (layer.Attr, error) { return l.Child.Mknod(ctx, path, in) }, path)
}

func (l *Layer) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	return changed(l, func() (layer.Attr, error) { return l.Child.Mkdir(ctx, path, in) }, path)
}

func (l *Layer) Symlink(ctx context.Context, path string, in layer.SymlinkIn) (layer.Attr, error) {
	return changed(l, func() (layer.Attr, error) { return l.Child.Symlink(ctx, path, in) }, path)
}

func (l *Layer) Unlink(ctx context.Context, path string) error {
	return changedErr(l, func() error { return l.Child.Unlink(ctx, path) }, path)
}

func (l *Layer) Rmdir(ctx context.Context, path string) error {
	return changedErr(l, func() error { return l.Child.Rmdir(ctx, path) }, path)
}

func (l *Layer) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	return changedErr(l, func() error { return l.Child.Rename(ctx, oldpath, newpath, flags) }, oldpath, newpath)
}

func (l *Layer) Link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	// The link count of the inode changes under both names.
	return changed(l, func() (layer.Attr, error) { return l.Child.Link(ctx, oldpath, newpath) }, oldpath, newpath)
}

func (l *Layer) Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	return changedErr(l, func() error { return l.Child.Setxattr(ctx, path, name, value, flags) }, path)
}

func (l *Layer) Removexattr(ctx context.Context, path, name string) error {
	return changedErr(l, func() error { return l.Child.Removexattr(ctx, path, name) }, path)
}

func (l *Layer) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	var f layer.File
	a, err := changed(l, func() (layer.Attr, error) {
		var a layer.Attr
		var err error
		f, a, err = l.Child.Create(ctx, path, in)
		return a, err
	}, path)
	if err != nil {
		return nil, a, err
	}
	return &file{File: f, l: l}, a, nil
}

// Open wraps a file opened for writing, whose changes forget listings;
// an open that truncates forgets its directory's.
func (l *Layer) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	if !writes(flags) {
		return l.Child.Open(ctx, path, flags)
	}
	f, err := changed(l, func() (layer.File, error) { return l.Child.Open(ctx, path, flags) }, path)
	if err != nil {
		return nil, err
	}
	return &file{File: f, l: l}, nil
}

// file is a file open for writing: its writes, truncations and attribute
// changes forget every listing, since it may have been renamed since it
// was opened.
type file struct {
	layer.File
	l *Layer
}

// changedAll is changed for a change through an open file.
func changedAll[T any](l *Layer, run func() (T, error)) (T, error) {
	v, err := run()
	l.mu.Lock()
	l.forgetAll()
	l.mu.Unlock()
	return v, err
}

func (f *file) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return changedAll(f.l, func() (int, error) { return f.File.Write(ctx, p, off) })
}

func (f *file) Setattr(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	return changedAll(f.l, func() (layer.Attr, error) { return f.File.Setattr(ctx, in) })
}

func (f *file) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	_, err := changedAll(f.l, func() (struct{}, error) { return struct{}{}, f.File.Fallocate(ctx, mode, off, length) })
	return err
}
