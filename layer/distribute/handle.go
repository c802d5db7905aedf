package distribute

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// handle is a file open through distribute. A rebalance may move the file
// to another child while it is open: the old child then answers EREMOTE
// to every operation on it (and Getattr reports a pointer), and the handle
// reopens the file by the path it was opened with, where it lives now, and
// does the operation again. The application sees nothing.
//
// The reopened file must be the same inode (same gfid; a migration keeps
// it): a file renamed while open and then moved is not found under its old
// path, and its operations fail with ESTALE from then on.
type handle struct {
	d     *Distribute
	path  string
	flags uint32 // for reopening: without O_CREAT, O_EXCL, O_TRUNC

	cur atomic.Pointer[opened]

	mu   sync.Mutex   // serialises reopens
	gfid layer.Gfid   // the inode's, once known
	old  []layer.File // replaced by reopens; released with the handle
}

// opened boxes the child's file for atomic swaps.
type opened struct{ f layer.File }

var _ layer.File = (*handle)(nil)

func (d *Distribute) newHandle(f layer.File, path string, flags uint32, g layer.Gfid) *handle {
	h := &handle{d: d, path: path, flags: flags &^ (syscall.O_CREAT | syscall.O_EXCL | syscall.O_TRUNC), gfid: g}
	h.cur.Store(&opened{f: f})
	return h
}

// maxReopen bounds the reopens of one operation (a file moved again and
// again while the operation runs).
const maxReopen = 4

// do runs op on the child's file, reopening the file where it lives now
// when the child says it moved.
func (h *handle) do(ctx context.Context, op func(f layer.File) error) error {
	for try := 0; ; try++ {
		o := h.cur.Load()
		err := op(o.f)
		if !errors.Is(err, syscall.EREMOTE) || try == maxReopen {
			return err
		}
		if err := h.reopen(ctx, o); err != nil {
			return err
		}
	}
}

// reopen replaces o, the file that answered EREMOTE, unless another
// operation did already.
func (h *handle) reopen(ctx context.Context, o *opened) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur.Load() != o {
		return nil
	}
	g := h.gfid
	if a, err := o.f.Getattr(ctx); err == nil && !a.Gfid.IsZero() {
		g = a.Gfid // a moved file reports itself as a pointer, gfid kept
	}
	for try := 0; ; try++ {
		l, err := h.d.find(ctx, h.path)
		switch {
		case errors.Is(err, syscall.ENOENT):
			return syscall.ESTALE // renamed or removed while open
		case err != nil:
			return err
		case l.attr.IsDir() || !g.IsZero() && l.attr.Gfid != g:
			return syscall.ESTALE // another inode has the name now
		}
		f, err := h.d.child(l.cached).Open(ctx, h.path, h.flags)
		if try < maxReopen && (errors.Is(err, syscall.EREMOTE) || (l.prev || l.ptr) && errors.Is(err, syscall.ENOENT)) {
			continue // moved once more in between
		}
		if err != nil {
			return err
		}
		h.gfid = l.attr.Gfid
		h.old = append(h.old, o.f)
		h.cur.Store(&opened{f: f})
		h.d.log.Debug("reopened a file moved by a rebalance", "path", h.path, "child", h.d.children[l.cached].ID)
		return nil
	}
}

// remember records the inode's gfid from attributes the child returned.
func (h *handle) remember(a layer.Attr) {
	if a.Gfid.IsZero() {
		return
	}
	h.mu.Lock()
	if h.gfid.IsZero() {
		h.gfid = a.Gfid
	}
	h.mu.Unlock()
}

func (h *handle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	var n int
	err := h.do(ctx, func(f layer.File) error {
		var err error
		n, err = f.Read(ctx, p, off)
		return err
	})
	return n, err
}

func (h *handle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	var n int
	err := h.do(ctx, func(f layer.File) error {
		var err error
		n, err = f.Write(ctx, p, off)
		return err
	})
	return n, err
}

// Getattr treats a pointer's attributes as EREMOTE: the file was moved.
func (h *handle) Getattr(ctx context.Context) (layer.Attr, error) {
	var a layer.Attr
	err := h.do(ctx, func(f layer.File) error {
		var err error
		a, err = f.Getattr(ctx)
		if err == nil && a.Linkto != "" {
			return syscall.EREMOTE
		}
		return err
	})
	if err == nil {
		h.remember(a)
	}
	return a, err
}

func (h *handle) Setattr(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	var a layer.Attr
	err := h.do(ctx, func(f layer.File) error {
		var err error
		a, err = f.Setattr(ctx, in)
		return err
	})
	if err == nil {
		h.remember(a)
	}
	return a, err
}

func (h *handle) Fsync(ctx context.Context, datasync bool) error {
	return h.do(ctx, func(f layer.File) error { return f.Fsync(ctx, datasync) })
}

func (h *handle) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	return h.do(ctx, func(f layer.File) error { return f.Fallocate(ctx, mode, off, length) })
}

func (h *handle) Flush(ctx context.Context, owner uint64) error {
	return h.do(ctx, func(f layer.File) error { return f.Flush(ctx, owner) })
}

func (h *handle) Getlk(ctx context.Context, owner uint64, lk layer.Lock) (layer.Lock, error) {
	var out layer.Lock
	err := h.do(ctx, func(f layer.File) error {
		var err error
		out, err = f.Getlk(ctx, owner, lk)
		return err
	})
	return out, err
}

func (h *handle) Setlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool) error {
	return h.do(ctx, func(f layer.File) error { return f.Setlk(ctx, owner, lk, wait) })
}

// Release closes the file, and the files reopens replaced.
func (h *handle) Release(ctx context.Context) error {
	err := h.cur.Load().f.Release(ctx)
	h.mu.Lock()
	old := h.old
	h.old = nil
	h.mu.Unlock()
	for _, f := range old {
		f.Release(ctx)
	}
	return err
}
