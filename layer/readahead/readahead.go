// Package readahead is a brick-side layer that overlaps the disk with the
// network for sequential O_DIRECT reads.
//
// A client reading with O_DIRECT (dd iflag=direct, databases, VM images)
// sends one read at a time and waits for it, so the brick's disk sits idle
// while the data crosses the network and the client asks for the next
// block. For files opened with O_DIRECT this layer notices a read that
// starts where the previous one ended, and reads the next block of the same
// size in the background; the next request is served from it.
//
// Coherence: every write, truncate or fallocate made through this layer to
// an inode — through any open file, from any client — bumps that inode's
// generation, and a prefetched block is used only if the generation is the
// one it was read under. Writes made behind mortar's back (directly on the
// brick) are not seen, as with any server-side cache. Buffered opens are not
// touched: the brick's page cache already reads ahead for them.
package readahead

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// MaxBlock is the largest read that triggers a prefetch.
const MaxBlock = 4 << 20

// budget bounds the memory all prefetched blocks of one layer may hold.
const budget = 64 << 20

// Layer adds read-ahead to O_DIRECT files of its child.
type Layer struct {
	layer.Base
	mem chan struct{} // one token per MiB of budget

	mu   sync.Mutex
	gens map[layer.Gfid]*inode
}

// inode counts the changes to one inode's data while files are open on it.
type inode struct {
	gen  atomic.Uint64
	refs int
}

// New wraps child.
func New(child layer.Layer) *Layer {
	return &Layer{Base: layer.Base{Child: child}, mem: make(chan struct{}, budget>>20), gens: map[layer.Gfid]*inode{}}
}

var _ layer.Layer = (*Layer)(nil)

func (l *Layer) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	f, a, err := l.Child.Create(ctx, path, in)
	if err != nil {
		return nil, a, err
	}
	return l.wrap(f, a.Gfid, in.Flags), a, nil
}

func (l *Layer) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	f, err := l.Child.Open(ctx, path, flags)
	if err != nil {
		return nil, err
	}
	a, err := f.Getattr(ctx)
	if err != nil {
		f.Release(ctx)
		return nil, err
	}
	return l.wrap(f, a.Gfid, flags), nil
}

// Setattr through a path may truncate: that changes the data.
func (l *Layer) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	a, err := l.Child.Setattr(ctx, path, in)
	if err == nil && in.Valid&layer.SetSize != 0 {
		l.bump(a.Gfid)
	}
	return a, err
}

// wrap gives every open file a share of its inode's generation counter;
// only O_DIRECT files prefetch.
func (l *Layer) wrap(f layer.File, g layer.Gfid, flags uint32) layer.File {
	l.mu.Lock()
	in := l.gens[g]
	if in == nil {
		in = &inode{}
		l.gens[g] = in
	}
	in.refs++
	l.mu.Unlock()
	return &file{File: f, l: l, gfid: g, in: in, direct: flags&syscall.O_DIRECT != 0}
}

func (l *Layer) bump(g layer.Gfid) {
	l.mu.Lock()
	in := l.gens[g]
	l.mu.Unlock()
	if in != nil {
		in.gen.Add(1)
	}
}

func (l *Layer) unref(g layer.Gfid) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if in := l.gens[g]; in != nil {
		if in.refs--; in.refs == 0 {
			delete(l.gens, g)
		}
	}
}

// UnlinkData passes layer.DataUnlinker through to the child.
func (l *Layer) UnlinkData(ctx context.Context, path string) error {
	return layer.UnlinkData(ctx, l.Child, path)
}

// RenameSource passes layer.SourceRenamer through to the child.
func (l *Layer) RenameSource(ctx context.Context, oldpath, newpath string, flags uint32, src layer.Gfid) error {
	return layer.RenameSource(ctx, l.Child, oldpath, newpath, flags, src)
}
