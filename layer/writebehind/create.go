package writebehind

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// Create-behind: a file created where the child owns the name
// (layer.NameLeaser: the bricks leased the directory's names to this
// client, which knows the name is not there) is answered at once, with an
// identity and attributes the layer gives it, and made on the bricks when
// its window is sent — with the window's first bytes and attribute
// changes, in one round trip (CreateIn's Data and Set). So writing a
// small file in a directory the client made (tar x, cp -a, a loop of
// `echo > f`) costs one round trip, not three.
//
// The create goes by the window's rules: before anything else the layer
// does (another create, a lookup, a listing...), at the file's close, at
// the latest MaxAge after; and when the bricks recall the directory's
// lease, because another client wants to see or change a name in it
// (Recall). A close sends nothing while the file has neither bytes nor
// changes waiting and was not created O_EXCL: the program that opened it
// may write through another descriptor (a shell's `> f` closes its first
// one after dup2); the create goes then at the next close, the release or
// MaxAge after. A create that fails is the file's error, as a failed
// write is (reported at its next write, fsync or close; an empty file
// whose create failed after its last close is only logged by the layers
// below); with the lease lost meanwhile (the connection to a brick broke)
// and the name made by another client, a create without O_EXCL opens that
// file as the program asked, one with O_EXCL fails with EEXIST.

// heldCreate is a create not sent yet.
type heldCreate struct {
	path string
	in   layer.CreateIn
}

// holdCreate answers a create at once if the child owns the name, and
// returns the file; gen is the generation the create began at.
func (l *Layer) holdCreate(path string, in layer.CreateIn, gen uint64) (layer.File, layer.Attr, bool) {
	nl, ok := l.Child.(layer.NameLeaser)
	if !l.createBehind || !ok || !behind(in.Flags) || len(in.Data) > 0 || in.Set.Valid != 0 {
		return nil, layer.Attr{}, false
	}
	if in.Gfid.IsZero() {
		in.Gfid = layer.NewGfid()
	}
	// Under the windows' lock, so that a recall of the lease (Recall) that
	// comes after OwnsName says yes finds the file among the windows.
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	dir, owns := nl.OwnsName(path)
	if !owns {
		return nil, layer.Attr{}, false
	}
	a := newAttr(in, dir)
	gen, current := l.end(gen)
	if !current {
		gen = 0
	}
	f := l.newFile(nil, in.Flags, in.Gfid, a, gen)
	f.create = &heldCreate{path: path, in: in}
	f.timer = time.AfterFunc(l.maxAge, f.age)
	l.w.open[f] = struct{}{}
	l.w.pending[f] = struct{}{}
	l.w.count.Add(1)
	return f, a, true
}

// newAttr returns the attributes a brick gives the file in creates in
// directory dir: in Linux's rules, a set-group-ID directory gives it its
// group.
func newAttr(in layer.CreateIn, dir layer.Attr) layer.Attr {
	gid := in.Gid
	if dir.Mode&syscall.S_ISGID != 0 {
		gid = dir.Gid
	}
	t := now()
	return layer.Attr{
		Gfid: in.Gfid, Mode: syscall.S_IFREG | in.Mode&07777, Nlink: 1, Uid: in.Uid, Gid: gid,
		Blksize: dir.Blksize, Atime: t, Mtime: t, Ctime: t,
	}
}

// sendCreate makes the file held back, with the window's bytes if they
// start at offset 0 (at most layer.MaxCreateData) and the attribute
// changes waiting, in one go; what it does not carry the window sends
// after it, the attribute changes last (a write after them would move
// the times they set). f.mu is held.
func (f *file) sendCreate(ctx context.Context) {
	c := f.create
	f.create = nil
	in := c.in
	in.Flags |= syscall.O_EXCL // the name is known to be free
	withData := len(f.buf) > 0 && f.off == 0 && len(f.buf) <= layer.MaxCreateData
	if withData {
		in.Data = f.buf
	}
	if withData || len(f.buf) == 0 {
		in.Set = f.set
	}
	lf, a, err := f.l.Child.Create(ctx, c.path, in)
	switch {
	case err == nil:
		if withData {
			f.l.w.bytes.Add(-int64(len(f.buf)))
			f.buf = nil
		}
		if in.Set.Valid != 0 {
			f.set = layer.SetattrIn{}
		}
	case errors.Is(err, syscall.EEXIST) && c.in.Flags&syscall.O_EXCL == 0:
		// The lease was lost, and another client made the name meanwhile:
		// open it as the program asked (another inode than the one the
		// layer answered for: the window's writes follow that file).
		lf, a, err = f.l.Child.Create(ctx, c.path, c.in)
		if err == nil {
			f.l.w.mu.Lock()
			f.gfid = a.Gfid
			f.l.w.mu.Unlock()
		}
	}
	if err != nil {
		f.child.Store(&made{err: err})
		f.l.w.failed(f, err)
		f.drop()
		return
	}
	f.child.Store(&made{f: lf})
}

// heldEmpty reports whether f is a create held back with nothing waiting
// to go with it yet. f.mu is held.
func (f *file) heldEmpty() bool {
	return f.create != nil && len(f.buf) == 0 && f.set.Valid == 0
}

// emptyCreate reports whether f is a create held back that a close need
// not send (see above). f.mu is held.
func (f *file) emptyCreate() bool {
	return f.heldEmpty() && f.create.in.Flags&syscall.O_EXCL == 0
}

// Recall sends the creates held back in dir, a directory whose lease a
// brick recalls (protocol.Config.OnRecall), each with its window, and
// waits for the removals under way there (removals.go): it returns once
// they are on the bricks (or failed: their files' errors). A create held
// or a removal answered as the lease was recalled is among them:
// holdCreate and removeBehind record them under w.mu, which Recall takes
// before it looks.
func (w *Windows) Recall(dir string) {
	w.awaitRemovals(func(r *removal) bool { return parentOf(r.path) == dir })
	w.mu.Lock()
	files := make([]*file, 0, len(w.pending))
	for f := range w.pending {
		files = append(files, f)
	}
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.create != nil && parentOf(f.create.path) == dir {
				f.send(context.Background())
			}
		}()
	}
	wg.Wait()
}

func parentOf(path string) string {
	dir, _ := layer.Split(path)
	return dir
}

// Sync sends every window and create held back and waits for the
// removals under way (layer.Syncer); it reports the error of a removal
// that failed since the last Sync, else of a create that failed (which
// stays with its file too).
func (l *Layer) Sync(ctx context.Context) error {
	l.done(l.begin(ctx))
	if err := l.w.takeRemoveErr(); err != nil {
		return err
	}
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	for f := range l.w.open {
		if m := f.child.Load(); m != nil && m.err != nil {
			return m.err
		}
	}
	return nil
}
