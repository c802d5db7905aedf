package protocol

import (
	"context"
	"errors"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// file is a file open on the brick. After a reconnect it is reopened by
// path on first use.
type file struct {
	c      *Client
	path   string
	flags  uint32 // for reopening: without O_CREAT, O_EXCL, O_TRUNC
	append bool

	mu       sync.Mutex
	s        *session
	fh       uint64
	released bool

	// lmu orders the file's POSIX lock requests with its lock lease
	// (lease.go); it is not held while a request waits on the brick.
	lmu     sync.Mutex
	lease   *heldLease // nil: none
	waiting int        // blocking Setlk requests on the brick
}

var _ layer.File = (*file)(nil)

func (c *Client) newFile(s *session, fh uint64, path string, flags uint32) *file {
	return &file{
		c: c, s: s, fh: fh, path: path,
		flags:  flags &^ (syscall.O_CREAT | syscall.O_EXCL | syscall.O_TRUNC),
		append: flags&syscall.O_APPEND != 0,
	}
}

func alive(s *session) bool {
	select {
	case <-s.dead:
		return false
	default:
		return true
	}
}

// handle returns the session and brick handle to use, reopening the file
// if its session is gone.
func (f *file) handle(ctx context.Context) (*session, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.released {
		return nil, 0, syscall.EBADF
	}
	if alive(f.s) {
		return f.s, f.fh, nil
	}
	s, fh, err := f.c.open(ctx, f.path, f.flags)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			err = syscall.ESTALE // the file went away while we were cut off
		}
		return nil, 0, err
	}
	f.s, f.fh = s, fh
	f.c.log.Debug("reopened file after reconnect", "path", f.path)
	return s, fh, nil
}

// do runs a file operation, once more on a new session if the connection
// failed under it and retry allows.
func (f *file) do(ctx context.Context, req *wire.Request, data, dest []byte, retry bool) (*call, error) {
	for attempt := 0; ; attempt++ {
		s, fh, err := f.handle(ctx)
		if err != nil {
			return nil, err
		}
		req.Fh = fh
		cl, err := f.c.roundTrip(ctx, s, req, data, dest)
		if errors.Is(err, syscall.ENOTCONN) && retry && attempt == 0 {
			continue
		}
		return cl, err
	}
}

func (f *file) Read(ctx context.Context, p []byte, off int64) (int, error) {
	return f.read(ctx, wire.OpRead, p, off)
}

// ReadUndo reads the file's undo copy on the brick (layer.UndoReader).
func (f *file) ReadUndo(ctx context.Context, p []byte, off int64) (int, error) {
	return f.read(ctx, wire.OpReadUndo, p, off)
}

// read reads p at off with op, OpRead or OpReadUndo.
func (f *file) read(ctx context.Context, op uint8, p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		chunk := p[done:min(len(p), done+wire.MaxIO)]
		req := &wire.Request{Op: op, Off: off + int64(done), Len: int64(len(chunk))}
		cl, err := f.do(ctx, req, nil, chunk, true)
		if err != nil {
			return done, err
		}
		done += cl.n
		if cl.n < len(chunk) {
			break
		}
	}
	return done, nil
}

func (f *file) Write(ctx context.Context, p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) || (len(p) == 0 && done == 0) {
		chunk := p[done:min(len(p), done+wire.MaxIO)]
		req := &wire.Request{Op: wire.OpWrite, Off: off + int64(done)}
		cl, err := f.do(ctx, req, chunk, nil, !f.append)
		if err != nil {
			return done, err
		}
		d := wire.Dec{B: cl.payload}
		n := int(d.U32())
		if err := decoded(&d); err != nil {
			return done, err
		}
		done += n
		if n < len(chunk) || len(p) == 0 {
			break
		}
	}
	return done, nil
}

// WriteGap writes p around gap in one request (layer.GapWriter); p must
// fit in one (wire.MaxIO).
func (f *file) WriteGap(ctx context.Context, p []byte, off int64, gap layer.Gap) (int, error) {
	if len(p) > wire.MaxIO || int(gap.At) > len(p) {
		return 0, syscall.EINVAL
	}
	req := &wire.Request{Op: wire.OpWriteGap, Off: off, Gap: gap}
	cl, err := f.do(ctx, req, p, nil, !f.append)
	if err != nil {
		return 0, err
	}
	d := wire.Dec{B: cl.payload}
	n := int(d.U32())
	return n, decoded(&d)
}

func (f *file) attr(ctx context.Context, req *wire.Request) (layer.Attr, error) {
	cl, err := f.do(ctx, req, nil, nil, true)
	if err != nil {
		return layer.Attr{}, err
	}
	d := wire.Dec{B: cl.payload}
	a := d.Attr()
	return a, decoded(&d)
}

func (f *file) Getattr(ctx context.Context) (layer.Attr, error) {
	return f.attr(ctx, &wire.Request{Op: wire.OpFgetattr})
}

func (f *file) Setattr(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	return f.attr(ctx, &wire.Request{Op: wire.OpFsetattr, Setattr: in})
}

func (f *file) Fsync(ctx context.Context, datasync bool) error {
	var flags uint32
	if datasync {
		flags = 1
	}
	_, err := f.do(ctx, &wire.Request{Op: wire.OpFsync, Flags: flags}, nil, nil, false)
	return err
}

func (f *file) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	_, err := f.do(ctx, &wire.Request{Op: wire.OpFallocate, Mode: mode, Off: off, Len: length}, nil, nil, true)
	return err
}

func (f *file) Flush(ctx context.Context, owner uint64) error {
	if !f.c.usedLocks.Load() {
		return nil // no lock was ever taken through this client: nothing to drop
	}
	f.lmu.Lock()
	defer f.lmu.Unlock()
	if le := f.liveLease(); le != nil {
		le.table.DropOwner(owner)
	}
	_, err := f.do(ctx, &wire.Request{Op: wire.OpFlush, LockOwner: owner}, nil, nil, false)
	return err
}

// usesLocks notes a lock of the applications' domain: from then on Flush
// and Release wait for the brick. Internal locks (layer.DomainInternal) are
// not dropped by Flush, and their takers unlock before they release.
func (f *file) usesLocks(lk layer.Lock) {
	if lk.Domain == layer.DomainPosix {
		f.c.usedLocks.Store(true)
	}
}

func (f *file) Getlk(ctx context.Context, owner uint64, lk layer.Lock) (layer.Lock, error) {
	f.usesLocks(lk)
	if layer.Leasable(lk) {
		f.lmu.Lock()
		defer f.lmu.Unlock()
		if le := f.liveLease(); le != nil {
			if c, ok := le.table.Conflict(owner, lk); ok {
				return c, nil
			}
			lk.Type = syscall.F_UNLCK
			return lk, nil
		}
	}
	cl, err := f.do(ctx, &wire.Request{Op: wire.OpGetlk, LockOwner: owner, Lock: lk}, nil, nil, false)
	if err != nil {
		return layer.Lock{}, err
	}
	d := wire.Dec{B: cl.payload}
	out := d.Lock()
	out.Domain = lk.Domain
	return out, decoded(&d)
}

func (f *file) Setlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool) error {
	f.usesLocks(lk)
	if !layer.Leasable(lk) {
		_, _, _, err := f.setlk(ctx, owner, lk, wait, 0)
		return err
	}
	f.lmu.Lock()
	defer f.lmu.Unlock()
	return f.leasedSetlk(ctx, owner, lk, wait)
}

// Release closes the file on the brick. Unless locks are in use it does not
// wait for the brick's answer: nothing depends on it.
func (f *file) Release(ctx context.Context) error {
	f.mu.Lock()
	if f.released {
		f.mu.Unlock()
		return syscall.EBADF
	}
	f.released = true
	s, fh := f.s, f.fh
	f.mu.Unlock()
	f.lmu.Lock()
	f.dropLease()
	f.lmu.Unlock()
	if !alive(s) {
		return nil // the brick closed it with the old connection
	}
	req := &wire.Request{Op: wire.OpRelease, Fh: fh}
	if !f.c.usedLocks.Load() {
		f.c.post(s, req)
		return nil
	}
	_, err := f.c.roundTrip(ctx, s, req, nil, nil)
	return err
}
