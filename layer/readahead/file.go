package readahead

import (
	"context"
	"sync"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// file is an open file of the layer.
type file struct {
	layer.File
	l      *Layer
	gfid   layer.Gfid
	in     *inode
	direct bool

	mu      sync.Mutex
	nextOff int64     // where the last read ended
	ahead   *prefetch // the block being or already read ahead
}

// prefetch is one block read in the background.
type prefetch struct {
	off    int64
	gen    uint64
	buf    []byte
	tokens int
	done   chan struct{}
	n      int
	err    error
}

func (f *file) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if !f.direct || len(p) == 0 || len(p) > MaxBlock {
		return f.File.Read(ctx, p, off)
	}
	f.mu.Lock()
	pf := f.ahead
	f.ahead = nil
	sequential := off == f.nextOff
	f.mu.Unlock()

	n, err, served := f.fromPrefetch(pf, p, off)
	if !served {
		n, err = f.File.Read(ctx, p, off)
	}
	if err == nil && n == len(p) && sequential {
		f.start(off+int64(n), len(p))
	}
	f.mu.Lock()
	f.nextOff = off + int64(n)
	f.mu.Unlock()
	return n, err
}

// fromPrefetch serves p from pf if pf holds exactly that block, read under
// the inode's current generation. It always frees pf.
func (f *file) fromPrefetch(pf *prefetch, p []byte, off int64) (int, error, bool) {
	if pf == nil {
		return 0, nil, false
	}
	defer f.free(pf)
	if pf.off != off || len(pf.buf) != len(p) {
		<-pf.done
		return 0, nil, false
	}
	<-pf.done
	if pf.err != nil || pf.gen != f.in.gen.Load() {
		return 0, nil, false
	}
	return copy(p, pf.buf[:pf.n]), nil, true
}

// start reads [off, off+size) in the background, if memory allows.
func (f *file) start(off int64, size int) {
	tokens := (size + 1<<20 - 1) >> 20
	for i := range tokens {
		select {
		case f.l.mem <- struct{}{}:
		default:
			for range i {
				<-f.l.mem
			}
			return // over budget: no read-ahead this time
		}
	}
	pf := &prefetch{off: off, gen: f.in.gen.Load(), buf: wire.GetBuf(size), tokens: tokens, done: make(chan struct{})}
	f.mu.Lock()
	old := f.ahead
	f.ahead = pf
	f.mu.Unlock()
	if old != nil {
		go func() { <-old.done; f.free(old) }()
	}
	go func() {
		pf.n, pf.err = f.File.Read(context.Background(), pf.buf, off)
		close(pf.done)
	}()
}

func (f *file) free(pf *prefetch) {
	wire.PutBuf(pf.buf)
	for range pf.tokens {
		<-f.l.mem
	}
}

// Every change to the data invalidates what was read ahead.

func (f *file) Write(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := f.File.Write(ctx, p, off)
	f.in.gen.Add(1)
	return n, err
}

// WriteGap passes a write around a gap on (layer.GapWriter); ENOSYS if
// the file below cannot.
func (f *file) WriteGap(ctx context.Context, p []byte, off int64, gap layer.Gap) (int, error) {
	n, err := layer.WriteGap(ctx, f.File, p, off, gap)
	f.in.gen.Add(1)
	return n, err
}

// ReadUndo passes a read of the undo copy on (layer.UndoReader), past
// the read-ahead: the copy is not the file.
func (f *file) ReadUndo(ctx context.Context, p []byte, off int64) (int, error) {
	return layer.ReadUndo(ctx, f.File, p, off)
}

func (f *file) Setattr(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	a, err := f.File.Setattr(ctx, in)
	if in.Valid&layer.SetSize != 0 {
		f.in.gen.Add(1)
	}
	return a, err
}

func (f *file) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	err := f.File.Fallocate(ctx, mode, off, length)
	f.in.gen.Add(1)
	return err
}

func (f *file) Release(ctx context.Context) error {
	f.mu.Lock()
	pf := f.ahead
	f.ahead = nil
	f.mu.Unlock()
	if pf != nil {
		<-pf.done
		f.free(pf)
	}
	f.l.unref(f.gfid)
	return f.File.Release(ctx)
}
