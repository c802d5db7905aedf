package layertest

import (
	"context"

	"github.com/mortarfs/mortar/layer"
)

// hooked passes every operation, of the layer and of its Files, to child
// after calling before with the operation's name (the method name: "Lookup",
// "Create", "Read", "Setlk", ...). An error from before fails the operation
// without calling the child.
type hooked struct {
	child  layer.Layer
	before func(op string) error
}

func (h *hooked) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	if err := h.before("Lookup"); err != nil {
		return layer.Attr{}, err
	}
	return h.child.Lookup(ctx, path)
}

// LookupData passes to the child's LookupData if it has one, else to its
// Lookup (content not given): wrapping keeps a DataLooker one.
func (h *hooked) LookupData(ctx context.Context, path string, max int) (layer.Attr, []byte, error) {
	if err := h.before("LookupData"); err != nil {
		return layer.Attr{}, nil, err
	}
	return layer.LookupData(ctx, h.child, path, max)
}

// UnlinkData passes to the child's UnlinkData, ENOSYS if it has none:
// wrapping keeps a DataUnlinker one.
func (h *hooked) UnlinkData(ctx context.Context, path string) error {
	if err := h.before("UnlinkData"); err != nil {
		return err
	}
	return layer.UnlinkData(ctx, h.child, path)
}

// RenameSource passes to the child's RenameSource, or its Rename:
// wrapping keeps a SourceRenamer one.
func (h *hooked) RenameSource(ctx context.Context, oldpath, newpath string, flags uint32, src layer.Gfid) error {
	if err := h.before("Rename"); err != nil {
		return err
	}
	return layer.RenameSource(ctx, h.child, oldpath, newpath, flags, src)
}

func (h *hooked) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	if err := h.before("Setattr"); err != nil {
		return layer.Attr{}, err
	}
	return h.child.Setattr(ctx, path, in)
}

func (h *hooked) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	if err := h.before("Mknod"); err != nil {
		return layer.Attr{}, err
	}
	return h.child.Mknod(ctx, path, in)
}

func (h *hooked) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	if err := h.before("Mkdir"); err != nil {
		return layer.Attr{}, err
	}
	return h.child.Mkdir(ctx, path, in)
}

func (h *hooked) Symlink(ctx context.Context, path string, in layer.SymlinkIn) (layer.Attr, error) {
	if err := h.before("Symlink"); err != nil {
		return layer.Attr{}, err
	}
	return h.child.Symlink(ctx, path, in)
}

func (h *hooked) Readlink(ctx context.Context, path string) (string, error) {
	if err := h.before("Readlink"); err != nil {
		return "", err
	}
	return h.child.Readlink(ctx, path)
}

func (h *hooked) Unlink(ctx context.Context, path string) error {
	if err := h.before("Unlink"); err != nil {
		return err
	}
	return h.child.Unlink(ctx, path)
}

func (h *hooked) Rmdir(ctx context.Context, path string) error {
	if err := h.before("Rmdir"); err != nil {
		return err
	}
	return h.child.Rmdir(ctx, path)
}

func (h *hooked) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	if err := h.before("Rename"); err != nil {
		return err
	}
	return h.child.Rename(ctx, oldpath, newpath, flags)
}

func (h *hooked) Link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	if err := h.before("Link"); err != nil {
		return layer.Attr{}, err
	}
	return h.child.Link(ctx, oldpath, newpath)
}

func (h *hooked) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	if err := h.before("Create"); err != nil {
		return nil, layer.Attr{}, err
	}
	f, a, err := h.child.Create(ctx, path, in)
	if err != nil {
		return nil, a, err
	}
	return &hookedFile{f: f, h: h}, a, nil
}

func (h *hooked) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	if err := h.before("Open"); err != nil {
		return nil, err
	}
	f, err := h.child.Open(ctx, path, flags)
	if err != nil {
		return nil, err
	}
	return &hookedFile{f: f, h: h}, nil
}

func (h *hooked) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	if err := h.before("Readdir"); err != nil {
		return layer.DirPage{}, err
	}
	return h.child.Readdir(ctx, path, cookie, max)
}

func (h *hooked) Statfs(ctx context.Context, path string) (layer.Statfs, error) {
	if err := h.before("Statfs"); err != nil {
		return layer.Statfs{}, err
	}
	return h.child.Statfs(ctx, path)
}

func (h *hooked) Getxattr(ctx context.Context, path, name string) ([]byte, error) {
	if err := h.before("Getxattr"); err != nil {
		return nil, err
	}
	return h.child.Getxattr(ctx, path, name)
}

func (h *hooked) Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	if err := h.before("Setxattr"); err != nil {
		return err
	}
	return h.child.Setxattr(ctx, path, name, value, flags)
}

func (h *hooked) Listxattr(ctx context.Context, path string) ([]string, error) {
	if err := h.before("Listxattr"); err != nil {
		return nil, err
	}
	return h.child.Listxattr(ctx, path)
}

func (h *hooked) Removexattr(ctx context.Context, path, name string) error {
	if err := h.before("Removexattr"); err != nil {
		return err
	}
	return h.child.Removexattr(ctx, path, name)
}

// hookedFile is a File of a hooked layer.
type hookedFile struct {
	f layer.File
	h *hooked
}

func (w *hookedFile) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if err := w.h.before("Read"); err != nil {
		return 0, err
	}
	return w.f.Read(ctx, p, off)
}

func (w *hookedFile) Write(ctx context.Context, p []byte, off int64) (int, error) {
	if err := w.h.before("Write"); err != nil {
		return 0, err
	}
	return w.f.Write(ctx, p, off)
}

func (w *hookedFile) Getattr(ctx context.Context) (layer.Attr, error) {
	if err := w.h.before("Getattr"); err != nil {
		return layer.Attr{}, err
	}
	return w.f.Getattr(ctx)
}

func (w *hookedFile) Setattr(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	if err := w.h.before("FileSetattr"); err != nil {
		return layer.Attr{}, err
	}
	return w.f.Setattr(ctx, in)
}

func (w *hookedFile) Fsync(ctx context.Context, datasync bool) error {
	if err := w.h.before("Fsync"); err != nil {
		return err
	}
	return w.f.Fsync(ctx, datasync)
}

func (w *hookedFile) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	if err := w.h.before("Fallocate"); err != nil {
		return err
	}
	return w.f.Fallocate(ctx, mode, off, length)
}

func (w *hookedFile) Flush(ctx context.Context, owner uint64) error {
	if err := w.h.before("Flush"); err != nil {
		return err
	}
	return w.f.Flush(ctx, owner)
}

func (w *hookedFile) Getlk(ctx context.Context, owner uint64, lk layer.Lock) (layer.Lock, error) {
	if err := w.h.before("Getlk"); err != nil {
		return layer.Lock{}, err
	}
	return w.f.Getlk(ctx, owner, lk)
}

func (w *hookedFile) Setlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool) error {
	if err := w.h.before("Setlk"); err != nil {
		return err
	}
	return w.f.Setlk(ctx, owner, lk, wait)
}

// Release always releases the child's File (a File must be released
// exactly once); a failure set for "Release" is returned afterwards.
func (w *hookedFile) Release(ctx context.Context) error {
	herr := w.h.before("Release")
	err := w.f.Release(ctx)
	if herr != nil {
		return herr
	}
	return err
}
