package fusebridge

import (
	"context"
	"math"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/mortarfs/mortar/layer"
)

// offsetMax is the kernel's "to end of file" lock end (OFFSET_MAX).
const offsetMax = math.MaxInt64

// toLock converts the kernel's lock request.
func toLock(in *fuse.LkIn) layer.Lock {
	lk := layer.Lock{
		Type:  in.Lk.Typ,
		Start: in.Lk.Start,
		End:   in.Lk.End,
		Pid:   in.Lk.Pid,
		Flock: in.LkFlags&fuse.FUSE_LK_FLOCK != 0,
	}
	if lk.End >= offsetMax {
		lk.End = math.MaxUint64
	}
	return lk
}

// fromLock converts a lock for the kernel.
func fromLock(lk layer.Lock) fuse.FileLock {
	out := fuse.FileLock{Start: lk.Start, End: lk.End, Typ: lk.Type, Pid: lk.Pid}
	if out.End > offsetMax || out.End < out.Start {
		out.End = offsetMax
	}
	if out.Start > offsetMax {
		out.Start = offsetMax
	}
	return out
}

func (b *bridge) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	h := b.handles.file(in.Fh)
	if h == nil {
		return fuse.EBADF
	}
	lk, err := h.file.Getlk(b.ctx(), in.Owner, toLock(in))
	if err != nil {
		return b.status("getlk", "", err)
	}
	if lk.Type == syscall.F_UNLCK {
		out.Lk = fuse.FileLock{Typ: syscall.F_UNLCK}
		return fuse.OK
	}
	out.Lk = fromLock(lk)
	return fuse.OK
}

func (b *bridge) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return b.setLk(cancel, in, false)
}

// SetLkw waits for the lock until it is granted or the kernel interrupts
// the request (a signal to the caller); the kernel restarts the call after
// a signal handled with SA_RESTART.
func (b *bridge) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return b.setLk(cancel, in, true)
}

func (b *bridge) setLk(cancel <-chan struct{}, in *fuse.LkIn, wait bool) fuse.Status {
	h := b.handles.file(in.Fh)
	if h == nil {
		return fuse.EBADF
	}
	if !wait {
		return b.status("setlk", "", h.file.Setlk(b.ctx(), in.Owner, toLock(in), false))
	}
	// The wait ends when the caller is interrupted or the file released.
	ctx, stop := context.WithCancel(b.ctx())
	defer stop()
	go func() {
		select {
		case <-cancel:
		case <-h.released:
		case <-ctx.Done():
		}
		stop()
	}()
	return b.status("setlkw", "", h.file.Setlk(ctx, in.Owner, toLock(in), true))
}
