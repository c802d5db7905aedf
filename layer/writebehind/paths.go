package writebehind

import (
	"context"

	"github.com/mortarfs/mortar/layer"
)

// Every path operation sends every window first (see the package doc):
// what it answers or changes then follows the writes acknowledged before.
// It moves the generation as it starts and ends (attrs.go).

func (l *Layer) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	defer l.done(l.begin(ctx))
	return l.Child.Lookup(ctx, path)
}

func (l *Layer) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	defer l.done(l.begin(ctx))
	return l.Child.Setattr(ctx, path, in)
}

func (l *Layer) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	defer l.done(l.begin(ctx))
	return l.Child.Mknod(ctx, path, in)
}

func (l *Layer) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	defer l.done(l.begin(ctx))
	return l.Child.Mkdir(ctx, path, in)
}

func (l *Layer) Symlink(ctx context.Context, path string, in layer.SymlinkIn) (layer.Attr, error) {
	defer l.done(l.begin(ctx))
	return l.Child.Symlink(ctx, path, in)
}

func (l *Layer) Rmdir(ctx context.Context, path string) error {
	defer l.done(l.begin(ctx))
	return l.Child.Rmdir(ctx, path)
}

func (l *Layer) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	defer l.done(l.begin(ctx))
	return l.Child.Rename(ctx, oldpath, newpath, flags)
}

func (l *Layer) Link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	defer l.done(l.begin(ctx))
	return l.Child.Link(ctx, oldpath, newpath)
}

func (l *Layer) Readlink(ctx context.Context, path string) (string, error) {
	defer l.done(l.begin(ctx))
	return l.Child.Readlink(ctx, path)
}

func (l *Layer) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	defer l.done(l.begin(ctx))
	return l.Child.Readdir(ctx, path, cookie, max)
}

func (l *Layer) Statfs(ctx context.Context, path string) (layer.Statfs, error) {
	defer l.done(l.begin(ctx))
	return l.Child.Statfs(ctx, path)
}

func (l *Layer) Getxattr(ctx context.Context, path, name string) ([]byte, error) {
	defer l.done(l.begin(ctx))
	return l.Child.Getxattr(ctx, path, name)
}

func (l *Layer) Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	defer l.done(l.begin(ctx))
	return l.Child.Setxattr(ctx, path, name, value, flags)
}

func (l *Layer) Listxattr(ctx context.Context, path string) ([]string, error) {
	defer l.done(l.begin(ctx))
	return l.Child.Listxattr(ctx, path)
}

func (l *Layer) Removexattr(ctx context.Context, path, name string) error {
	defer l.done(l.begin(ctx))
	return l.Child.Removexattr(ctx, path, name)
}
