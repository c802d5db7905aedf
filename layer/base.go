package layer

import "context"

// Base passes every operation to Child. A layer embeds Base and overrides
// only the operations it changes.
type Base struct {
	Child Layer
}

var _ Layer = Base{}

func (b Base) Lookup(ctx context.Context, path string) (Attr, error) {
	return b.Child.Lookup(ctx, path)
}

func (b Base) Setattr(ctx context.Context, path string, in SetattrIn) (Attr, error) {
	return b.Child.Setattr(ctx, path, in)
}

func (b Base) Mknod(ctx context.Context, path string, in MknodIn) (Attr, error) {
	return b.Child.Mknod(ctx, path, in)
}

func (b Base) Mkdir(ctx context.Context, path string, in MkdirIn) (Attr, error) {
	return b.Child.Mkdir(ctx, path, in)
}

func (b Base) Symlink(ctx context.Context, path string, in SymlinkIn) (Attr, error) {
	return b.Child.Symlink(ctx, path, in)
}

func (b Base) Readlink(ctx context.Context, path string) (string, error) {
	return b.Child.Readlink(ctx, path)
}

func (b Base) Unlink(ctx context.Context, path string) error { return b.Child.Unlink(ctx, path) }

func (b Base) Rmdir(ctx context.Context, path string) error { return b.Child.Rmdir(ctx, path) }

func (b Base) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	return b.Child.Rename(ctx, oldpath, newpath, flags)
}

func (b Base) Link(ctx context.Context, oldpath, newpath string) (Attr, error) {
	return b.Child.Link(ctx, oldpath, newpath)
}

func (b Base) Create(ctx context.Context, path string, in CreateIn) (File, Attr, error) {
	return b.Child.Create(ctx, path, in)
}

func (b Base) Open(ctx context.Context, path string, flags uint32) (File, error) {
	return b.Child.Open(ctx, path, flags)
}

func (b Base) Readdir(ctx context.Context, path string, cookie uint64, max int) (DirPage, error) {
	return b.Child.Readdir(ctx, path, cookie, max)
}

func (b Base) Statfs(ctx context.Context, path string) (Statfs, error) {
	return b.Child.Statfs(ctx, path)
}

func (b Base) Getxattr(ctx context.Context, path, name string) ([]byte, error) {
	return b.Child.Getxattr(ctx, path, name)
}

func (b Base) Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	return b.Child.Setxattr(ctx, path, name, value, flags)
}

func (b Base) Listxattr(ctx context.Context, path string) ([]string, error) {
	return b.Child.Listxattr(ctx, path)
}

func (b Base) Removexattr(ctx context.Context, path, name string) error {
	return b.Child.Removexattr(ctx, path, name)
}
