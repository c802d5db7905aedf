// Package writebehind is a client-side layer that acknowledges small
// sequential writes at once and sends them to the bricks aggregated
// (GlusterFS's write-behind): a program writing a file 4 KiB at a time
// pays one round trip per window (1 MiB by default), not one per write.
//
// # What it does
//
// A write to a file opened for writing without O_DIRECT, O_SYNC, O_DSYNC
// or O_APPEND is kept in the file's window when it continues the window's
// bytes (its offset is where the window ends) and the window stays within
// WindowSize; it is acknowledged at once. Any other write sends the
// window first; a write that would not fit goes through as it is.
//
// Attribute changes of a file created through the layer (mode, owner,
// times: what tar and cp -a do to every file) wait with its window the
// same way (attrs.go). Where the child leases a directory's names
// (layer.NameLeaser), a create there is answered at once and made with
// its window (create.go), and the removal of a name the client made
// there is answered at once and sent in the background (removals.go).
//
// # When the bricks get it
//
// Before anything could observe the file: every operation on any file of
// the layer other than a write that joins a window (reads, getattr,
// setattr, fsync, fallocate, locks, close, release), and every path
// operation (lookup, open, create, setattr, readdir, xattrs, names), sends
// every window the layer holds first. So a program sees its writes in
// every read, size and listing, through any descriptor or name, as if
// they had gone to the bricks at once. And at the latest MaxAge (a second)
// after the write that started it, whatever else happens: a program that writes
// a line and keeps its file open has it on the bricks all the same.
// Windows go whatever becomes of the context of the operation that sends
// them (an interrupted lock wait does not drop another file's data).
//
// # Errors
//
// A window that fails to reach the bricks is lost, as a failed write is;
// its error becomes the error of every open file of its inode, as the
// kernel reports a writeback error to every descriptor. A file reports it
// at its next write or fsync, which then forget it, and at every close
// until then (the kernel flushes at every close of any descriptor of the
// file, a child's at its exec too, and the program's own close must still
// hear it). Reads, getattr, setattr, fallocate and locks send windows but
// do not report their errors. A write acknowledged but not yet sent is
// lost if the client dies, as an acknowledged write in the kernel's page
// cache is lost when the machine does: fsync is the promise, and fsync
// sends the window and then asks the bricks for it.
//
// # Graphs of a mount
//
// The graphs a mount builds one after another as its volume changes share
// their Windows, so an operation on the new graph sends the windows of
// files still open on an old one; a graph built with write-behind off
// keeps the layer, without windows of its own, for that.
package writebehind

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// DefaultWindowSize is the bytes of one file's window (GlusterFS's
// performance.write-behind-window-size).
const DefaultWindowSize = 1 << 20

// DefaultMaxAge bounds how long a window waits: a program that writes a
// line and keeps its file open still has it on the bricks within this.
const DefaultMaxAge = time.Second

// DefaultMaxBytes bounds the bytes all windows hold: past it, writes go
// through at once.
const DefaultMaxBytes = 64 << 20

// Options tune the layer.
type Options struct {
	// WindowSize is the most a file keeps unsent (0: the default).
	WindowSize int
	// MaxAge is the longest a window waits before it is sent by itself
	// (0: the default).
	MaxAge time.Duration
	// Off keeps no windows of the layer's own: it only sends those of
	// the layers it shares Windows with before its operations (a mount's
	// graph built after write-behind was turned off, whose files opened
	// before may still hold windows).
	Off bool
	// Windows are the windows the layer's files join; nil: the layer's
	// own (with DefaultMaxBytes). Layers that share them — the graphs a
	// mount builds one after another as its volume changes — send each
	// other's windows before their operations too.
	Windows *Windows
	// CreateBehind holds creates back where the child owns the name
	// (create.go); the graph must hand the child's recalls to
	// Windows.Recall.
	CreateBehind bool
	// UnlinkBehind sends the removals of names the child made under a
	// lease in the background (removals.go); as CreateBehind, the graph
	// must hand the child's recalls to Windows.Recall.
	UnlinkBehind bool
	// Changed is told of a name whose removal, answered before it was
	// sent, failed: the caches above the layer must forget that it went.
	Changed func(layer.Change)
}

// Layer keeps the windows of its files.
type Layer struct {
	layer.Base
	window       int
	maxAge       time.Duration
	w            *Windows
	createBehind bool
	unlinkBehind bool
	changed      func(layer.Change)
}

// Windows are the files whose windows hold data, of one layer or of
// several that share them.
type Windows struct {
	max   int64
	bytes atomic.Int64 // held by all windows
	// gen moves at every operation of the layers but a write joining a
	// window (attrs.go).
	gen atomic.Uint64

	mu      sync.Mutex
	pending map[*file]struct{}
	count   atomic.Int32       // len(pending): 0 is the fast path
	open    map[*file]struct{} // every file not released, for failed
	// removals are the unlinks under way in the background (at most
	// maxRemovals: slots), removeErr the error of one that failed since
	// Sync last reported one (removals.go).
	removals  map[*removal]struct{}
	removeErr error
	slots     chan struct{}
}

// NewWindows returns windows holding at most maxBytes (0: the default).
func NewWindows(maxBytes int) *Windows {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Windows{max: int64(maxBytes), pending: map[*file]struct{}{}, open: map[*file]struct{}{},
		removals: map[*removal]struct{}{}, slots: make(chan struct{}, maxRemovals)}
}

// New returns the layer over child.
func New(child layer.Layer, opts Options) *Layer {
	if opts.WindowSize <= 0 {
		opts.WindowSize = DefaultWindowSize
	}
	if opts.Off {
		opts.WindowSize = 0
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.Windows == nil {
		opts.Windows = NewWindows(0)
	}
	return &Layer{Base: layer.Base{Child: child}, window: opts.WindowSize, maxAge: opts.MaxAge, w: opts.Windows,
		createBehind: opts.CreateBehind && !opts.Off, unlinkBehind: opts.UnlinkBehind && !opts.Off, changed: opts.Changed}
}

// Send sends every window (creates held back among them); their errors
// stay with their files, reported where a program would see them.
func (w *Windows) Send(ctx context.Context) { w.flushAll(ctx) }

// flushAll sends every window; their errors stay with their files.
func (w *Windows) flushAll(ctx context.Context) {
	w.sendEach(ctx, func(*file) bool { return true })
}

// flushInode sends the windows of the files of inode g but f (all
// windows while g is not known).
func (w *Windows) flushInode(ctx context.Context, g layer.Gfid, f *file) {
	w.sendEach(ctx, func(o *file) bool { return o != f && (g.IsZero() || o.gfid == g) })
}

// sendEach sends the windows of the files which.
func (w *Windows) sendEach(ctx context.Context, which func(*file) bool) {
	if w.count.Load() == 0 {
		return
	}
	w.mu.Lock()
	var files []*file
	for f := range w.pending {
		if which(f) {
			files = append(files, f)
		}
	}
	w.mu.Unlock()
	for _, f := range files {
		f.mu.Lock()
		f.send(ctx)
		f.mu.Unlock()
	}
}

// held records whether f's window holds data.
func (w *Windows) held(f *file, holds bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, was := w.pending[f]
	switch {
	case holds && !was:
		w.pending[f] = struct{}{}
		w.count.Add(1)
	case !holds && was:
		delete(w.pending, f)
		w.count.Add(-1)
	}
}

// failed records err as the error of f and of every open file of its
// inode that has none yet (the kernel reports a writeback error to every
// descriptor of the inode).
func (w *Windows) failed(f *file, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for o := range w.open {
		if o.err == nil && (o == f || !f.gfid.IsZero() && o.gfid == f.gfid) {
			o.err = err
		}
	}
	if f.err == nil {
		f.err = err
	}
}

// failedFile records err as f's error alone (an attribute change that
// failed: the inode's data is not in question).
func (w *Windows) failedFile(f *file, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

// takeErr returns f's error and forgets it.
func (w *Windows) takeErr(f *file) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := f.err
	f.err = nil
	return err
}

// peekErr returns f's error and keeps it.
func (w *Windows) peekErr(f *file) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return f.err
}

// forget drops f (released) and returns its error.
func (w *Windows) forget(f *file) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.open, f)
	return f.err
}

// room reports whether n more bytes may be held, and counts them in.
func (w *Windows) room(n int) bool {
	if w.bytes.Add(int64(n)) > w.max {
		w.bytes.Add(-int64(n))
		return false
	}
	return true
}

// Off reports whether the layer keeps no windows of its own.
func (l *Layer) Off() bool { return l.window == 0 }

// begin starts an operation of the layer: it moves the generation
// (attrs.go), sends every window of the layer's Windows and waits for
// the removals under way (removals.go). It returns the generation it
// moved to, for end.
func (l *Layer) begin(ctx context.Context) uint64 {
	gen := l.w.gen.Add(1)
	l.w.flushAll(ctx)
	l.w.AwaitRemovals()
	return gen
}

// end ends an operation begun at generation gen: it moves the generation
// again, and reports whether nothing else began or ended meanwhile (then
// what the operation learnt is current at the generation returned).
func (l *Layer) end(gen uint64) (uint64, bool) {
	if l.w.gen.CompareAndSwap(gen, gen+1) {
		return gen + 1, true
	}
	return l.w.gen.Add(1), false
}

// done is end, for operations that learn nothing.
func (l *Layer) done(gen uint64) { l.end(gen) }

// behind reports whether writes of a file opened with flags may wait.
func behind(flags uint32) bool {
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		return false
	}
	return flags&(syscall.O_DIRECT|syscall.O_SYNC|syscall.O_DSYNC|syscall.O_APPEND) == 0
}

// wrap gives f (of inode g, if known) a window if its writes may wait;
// every file of the layer is wrapped, so that whatever it does first sends
// the windows of the others. A file created knows its attributes a at
// generation gen (0: none).
func (l *Layer) wrap(f layer.File, flags uint32, g layer.Gfid, a layer.Attr, gen uint64) layer.File {
	wf := l.newFile(f, flags, g, a, gen)
	l.w.mu.Lock()
	l.w.open[wf] = struct{}{}
	l.w.mu.Unlock()
	return wf
}

// newFile is wrap's file, not yet counted open (nil f: its create is
// held back).
func (l *Layer) newFile(f layer.File, flags uint32, g layer.Gfid, a layer.Attr, gen uint64) *file {
	wf := &file{l: l, behind: l.window > 0 && behind(flags), gfid: g}
	if f != nil {
		wf.child.Store(&made{f: f})
	}
	if wf.behind {
		wf.attr, wf.attrGen = a, gen
	}
	return wf
}

func (l *Layer) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	gen := l.begin(ctx)
	if f, a, ok := l.holdCreate(path, in, gen); ok {
		return f, a, nil
	}
	f, a, err := l.Child.Create(ctx, path, in)
	gen, current := l.end(gen)
	if err != nil {
		return nil, a, err
	}
	if !current {
		gen = 0
	}
	return l.wrap(f, in.Flags, a.Gfid, a, gen), a, nil
}

func (l *Layer) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	defer l.done(l.begin(ctx))
	f, err := l.Child.Open(ctx, path, flags)
	if err != nil {
		return nil, err
	}
	return l.wrap(f, flags, layer.Gfid{}, layer.Attr{}, 0), nil
}
