package writebehind

import (
	"context"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// file is a file of the child with a window of acknowledged writes not
// yet sent: buf, to go at off.
type file struct {
	layer.File
	l      *Layer
	behind bool // its writes may wait (see behind)
	// gfid is the file's inode, learnt at its first write if not at its
	// creation: a write sends the windows of the inode's other files
	// first, so that the later of two writes wins.
	gfid layer.Gfid

	mu  sync.Mutex
	off int64
	buf []byte
	err error // a window that failed, for the next operation
}

// Write keeps p in the window if it continues it and fits; otherwise the
// window goes first, and p goes through unless it can start a new one.
func (f *file) Write(ctx context.Context, p []byte, off int64) (int, error) {
	if !f.behind || !f.knowInode(ctx) {
		if err := f.before(ctx); err != nil {
			return 0, err
		}
		return f.File.Write(ctx, p, off)
	}
	f.l.w.flushInode(ctx, f.gfid, f)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.takeErr(); err != nil {
		return 0, err
	}
	if len(f.buf) > 0 && off == f.off+int64(len(f.buf)) && len(f.buf)+len(p) <= f.l.window && f.l.w.room(len(p)) {
		f.buf = append(f.buf, p...)
		return len(p), nil
	}
	if err := f.flush(ctx); err != nil {
		return 0, err
	}
	if len(p) >= f.l.window || !f.l.w.room(len(p)) {
		return f.File.Write(ctx, p, off)
	}
	f.off, f.buf = off, append(make([]byte, 0, min(f.l.window, 64<<10)), p...)
	f.l.w.held(f, true)
	return len(p), nil
}

// knowInode learns the file's inode if it does not know it yet (one
// getattr, at the first write of a file opened, not created).
func (f *file) knowInode(ctx context.Context) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gfid.IsZero() {
		if a, err := f.File.Getattr(ctx); err == nil {
			f.gfid = a.Gfid
		}
	}
	return !f.gfid.IsZero()
}

// send writes the window to the child; a failure is kept for the file's
// next operation. f.mu is held.
func (f *file) send(ctx context.Context) {
	if len(f.buf) == 0 {
		return
	}
	n, err := f.File.Write(ctx, f.buf, f.off)
	if err == nil && n < len(f.buf) {
		err = syscall.EIO // a short write of acknowledged bytes: they are lost
	}
	if err != nil && f.err == nil {
		f.err = err
	}
	f.l.w.bytes.Add(-int64(len(f.buf)))
	f.buf = nil // a file open long but written once keeps no memory
	f.l.w.held(f, false)
}

// takeErr returns and forgets the error of a window that failed.
func (f *file) takeErr() error {
	err := f.err
	f.err = nil
	return err
}

// flush sends the window and returns its error, or one kept. f.mu is held.
func (f *file) flush(ctx context.Context) error {
	f.send(ctx)
	return f.takeErr()
}

// closing sends the window and returns its error, or one kept, without
// forgetting it: the kernel flushes at every close of a descriptor —
// those a child inherited and closed at its exec too — and the program's
// own close must hear the error all the same.
func (f *file) closing(ctx context.Context) error {
	f.l.flushAll(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.send(ctx)
	return f.err
}

// before sends every window of the layer, and returns this file's error.
func (f *file) before(ctx context.Context) error {
	f.l.flushAll(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flush(ctx)
}

func (f *file) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if err := f.before(ctx); err != nil {
		return 0, err
	}
	return f.File.Read(ctx, p, off)
}

func (f *file) Getattr(ctx context.Context) (layer.Attr, error) {
	if err := f.before(ctx); err != nil {
		return layer.Attr{}, err
	}
	return f.File.Getattr(ctx)
}

func (f *file) Setattr(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	if err := f.before(ctx); err != nil {
		return layer.Attr{}, err
	}
	return f.File.Setattr(ctx, in)
}

func (f *file) Fsync(ctx context.Context, datasync bool) error {
	if err := f.before(ctx); err != nil {
		return err
	}
	return f.File.Fsync(ctx, datasync)
}

func (f *file) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	if err := f.before(ctx); err != nil {
		return err
	}
	return f.File.Fallocate(ctx, mode, off, length)
}

// Flush (every close) sends the window: its error is the close's, and
// every later close's until an fsync or a write reports it.
func (f *file) Flush(ctx context.Context, owner uint64) error {
	err := f.closing(ctx)
	if ferr := f.File.Flush(ctx, owner); err == nil {
		err = ferr
	}
	return err
}

func (f *file) Getlk(ctx context.Context, owner uint64, lk layer.Lock) (layer.Lock, error) {
	if err := f.before(ctx); err != nil {
		return layer.Lock{}, err
	}
	return f.File.Getlk(ctx, owner, lk)
}

func (f *file) Setlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool) error {
	if err := f.before(ctx); err != nil {
		return err
	}
	return f.File.Setlk(ctx, owner, lk, wait)
}

// Release sends the window too: a caller that closes without Flush (the
// Go client library) hears its error here.
func (f *file) Release(ctx context.Context) error {
	err := f.closing(ctx)
	if rerr := f.File.Release(ctx); err == nil {
		err = rerr
	}
	return err
}
