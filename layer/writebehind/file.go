package writebehind

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// file is a file of the child with a window of acknowledged writes not
// yet sent: buf, to go at off.
type file struct {
	l      *Layer
	behind bool // its writes may wait (see behind)
	// child is the child's file: nil while its create is held back
	// (create.go), then the file made or the error that kept it from
	// being made.
	child atomic.Pointer[made]

	// Under l.w.mu: gfid is the file's inode, learnt at its first write or
	// fsync if not at its creation (a write sends the windows of the
	// inode's other files first, so that the later of two writes wins; a
	// failed window is the error of every file of its inode); err is a
	// failed window's error, for the file's next write, fsync or close.
	gfid layer.Gfid
	err  error

	mu    sync.Mutex
	off   int64
	buf   []byte
	set   layer.SetattrIn // attribute changes behind the writes (attrs.go)
	timer *time.Timer     // sends the window once it is MaxAge old
	// attr are the file's attributes as the layer knows them, true while
	// the Windows' generation is attrGen (0: not known; attrs.go).
	attr    layer.Attr
	attrGen uint64
	// flushed is set by a close (Flush) until the next write: changes
	// then go at once (the descriptor may be another process's).
	flushed bool
	// create is the create held back, nil once sent (create.go).
	create *heldCreate
}

// made is a file's child file, once made (or what kept it from being).
type made struct {
	f   layer.File
	err error
}

// made returns the child's file, or why there is none: the error of the
// create that failed to make it.
func (f *file) made() (layer.File, error) {
	m := f.child.Load()
	switch {
	case m == nil:
		return nil, syscall.EIO // held back still: a caller forgot to send it
	case m.f == nil:
		return nil, m.err
	}
	return m.f, nil
}

// Write keeps p in the window if it continues it and fits; otherwise the
// window goes first, and p goes through unless it can start a new one.
func (f *file) Write(ctx context.Context, p []byte, off int64) (int, error) {
	if err := f.l.w.takeErr(f); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !f.behind || !f.knowInode(ctx) {
		defer f.l.done(f.l.begin(ctx))
		if err := f.l.w.takeErr(f); err != nil {
			return 0, err
		}
		lf, err := f.made()
		if err != nil {
			return 0, err
		}
		return lf.Write(ctx, p, off)
	}
	f.l.w.flushInode(ctx, f.inode(), f)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.carry()
	f.flushed = false
	if f.set.Valid == 0 && len(f.buf) > 0 && off == f.off+int64(len(f.buf)) &&
		len(f.buf)+len(p) <= f.l.window && f.l.w.room(len(p)) {
		f.buf = append(f.buf, p...)
		f.wrote(off, len(p))
		return len(p), nil
	}
	if !f.heldEmpty() {
		f.send(ctx) // attribute changes too: a write after them sets the times
	}
	if err := f.l.w.takeErr(f); err != nil {
		return 0, err
	}
	if len(p) >= f.l.window || !f.l.w.room(len(p)) {
		f.send(ctx) // a create held back goes first
		lf, err := f.made()
		if err != nil {
			return 0, err
		}
		n, err := lf.Write(ctx, p, off)
		f.carry() // others may have learnt the inode while it went
		f.wrote(off, n)
		return n, err
	}
	f.off, f.buf = off, append(make([]byte, 0, min(f.l.window, 64<<10)), p...)
	f.wrote(off, len(p))
	f.pend()
	return len(p), nil
}

// age sends a window that waited MaxAge.
func (f *file) age() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.send(context.Background())
}

// inode returns the file's gfid, zero if not known yet.
func (f *file) inode() layer.Gfid {
	f.l.w.mu.Lock()
	defer f.l.w.mu.Unlock()
	return f.gfid
}

// knowInode learns the file's inode if it does not know it yet (one
// getattr, at the first write of a file opened, not created).
func (f *file) knowInode(ctx context.Context) bool {
	if !f.inode().IsZero() {
		return true
	}
	lf, err := f.made()
	if err != nil {
		return false
	}
	a, err := lf.Getattr(ctx)
	if err != nil || a.Gfid.IsZero() {
		return false
	}
	f.l.w.mu.Lock()
	defer f.l.w.mu.Unlock()
	f.gfid = a.Gfid
	return true
}

// send writes the window to the child, whatever becomes of the context of
// the operation that sends it; a failure is every file of the inode's
// error. f.mu is held.
func (f *file) send(ctx context.Context) {
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	ctx = context.WithoutCancel(ctx)
	if f.create != nil {
		f.sendCreate(ctx)
	}
	if len(f.buf) == 0 && f.set.Valid == 0 {
		f.l.w.held(f, false)
		return
	}
	lf, err := f.made()
	if err != nil {
		f.drop() // the file was not made: its failed create is its error
		return
	}
	if len(f.buf) > 0 {
		n, err := lf.Write(ctx, f.buf, f.off)
		if err == nil && n < len(f.buf) {
			err = syscall.EIO // a short write of acknowledged bytes: they are lost
		}
		if err != nil {
			f.l.w.failed(f, err)
			f.attrGen = 0 // the bricks do not have what it knows
		}
		f.l.w.bytes.Add(-int64(len(f.buf)))
		f.buf = nil // a file open long but written once keeps no memory
	}
	if f.set.Valid != 0 {
		if _, err := lf.Setattr(ctx, f.set); err != nil {
			f.l.w.failedFile(f, err)
			f.attrGen = 0
		}
		f.set = layer.SetattrIn{}
	}
	f.l.w.held(f, false)
}

// drop forgets the window without sending it. f.mu is held.
func (f *file) drop() {
	f.l.w.bytes.Add(-int64(len(f.buf)))
	f.buf, f.set = nil, layer.SetattrIn{}
	f.attrGen = 0
	f.l.w.held(f, false)
}

// Every operation of a file but a write begins and ends as the layer's
// do (begin sends every window of the layer: what the file does next
// then follows every write acknowledged before; a failed window's error
// stays for the next write, fsync or close).

func (f *file) Read(ctx context.Context, p []byte, off int64) (int, error) {
	defer f.l.done(f.l.begin(ctx))
	lf, err := f.made()
	if err != nil {
		return 0, err
	}
	return lf.Read(ctx, p, off)
}

func (f *file) Getattr(ctx context.Context) (layer.Attr, error) {
	gen := f.l.begin(ctx)
	lf, err := f.made()
	if err != nil {
		f.l.done(gen)
		return layer.Attr{}, err
	}
	a, err := lf.Getattr(ctx)
	return f.learn(gen, a, err)
}

// Setattr keeps the change with the window if it may wait (attrs.go).
func (f *file) Setattr(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	if a, ok := f.setBehind(in); ok {
		return a, nil
	}
	gen := f.l.begin(ctx)
	lf, err := f.made()
	if err != nil {
		f.l.done(gen)
		return layer.Attr{}, err
	}
	a, err := lf.Setattr(ctx, in)
	return f.learn(gen, a, err)
}

// learn ends an operation begun at gen that asked the child for the
// file's attributes, and keeps them as what the file knows if nothing
// else went on meanwhile.
func (f *file) learn(gen uint64, a layer.Attr, err error) (layer.Attr, error) {
	gen, current := f.l.end(gen)
	if err == nil && current && f.behind && !a.Gfid.IsZero() {
		f.mu.Lock()
		f.know(a, gen)
		f.mu.Unlock()
	}
	return a, err
}

func (f *file) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	defer f.l.done(f.l.begin(ctx))
	lf, err := f.made()
	if err != nil {
		return err
	}
	return lf.Fallocate(ctx, mode, off, length)
}

func (f *file) Getlk(ctx context.Context, owner uint64, lk layer.Lock) (layer.Lock, error) {
	defer f.l.done(f.l.begin(ctx))
	lf, err := f.made()
	if err != nil {
		return layer.Lock{}, err
	}
	return lf.Getlk(ctx, owner, lk)
}

func (f *file) Setlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool) error {
	defer f.l.done(f.l.begin(ctx))
	lf, err := f.made()
	if err != nil {
		return err
	}
	return lf.Setlk(ctx, owner, lk, wait)
}

// Fsync reports a failed window of the file's inode, once, then asks the
// bricks for the rest.
func (f *file) Fsync(ctx context.Context, datasync bool) error {
	f.knowInode(ctx)
	defer f.l.done(f.l.begin(ctx))
	if err := f.l.w.takeErr(f); err != nil {
		return err
	}
	lf, err := f.made()
	if err != nil {
		return err
	}
	return lf.Fsync(ctx, datasync)
}

// Flush (every close) sends the windows; a failed one is the close's
// error, and every later close's until a write or an fsync reports it:
// the kernel flushes at every close of any descriptor of the file — a
// child's, at its exec, too — and the program's own close must still hear
// it.
func (f *file) Flush(ctx context.Context, owner uint64) error {
	f.mu.Lock()
	f.flushed = true // no attribute change waits from now: see setBehind
	empty := f.emptyCreate()
	f.mu.Unlock()
	if empty {
		return f.l.w.peekErr(f) // see emptyCreate
	}
	defer f.l.done(f.l.begin(ctx))
	err := f.l.w.peekErr(f)
	lf, merr := f.made()
	if merr != nil {
		if err == nil {
			err = merr
		}
		return err
	}
	if ferr := lf.Flush(ctx, owner); err == nil {
		err = ferr
	}
	return err
}

// Release sends the windows too, and reports a failed one: a caller that
// closes without Flush (the Go client library) hears it here.
func (f *file) Release(ctx context.Context) error {
	defer f.l.done(f.l.begin(ctx))
	f.mu.Lock()
	f.send(ctx) // stops the timer of a window the layer's count missed
	f.mu.Unlock()
	err := f.l.w.forget(f)
	lf, merr := f.made()
	if merr != nil {
		if err == nil {
			err = merr
		}
		return err
	}
	if rerr := lf.Release(ctx); err == nil {
		err = rerr
	}
	return err
}
