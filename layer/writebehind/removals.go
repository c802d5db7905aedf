package writebehind

import (
	"context"

	"github.com/mortarfs/mortar/layer"
)

// Unlink-behind: an unlink of a non-directory the child made in a
// directory whose names it leases (layer.NameLeaser.MadeName: the client
// made the name and nobody else can look it up, change or remove it until
// the client hands the lease back) is answered at once and sent in the
// background,
// up to maxRemovals at a time. So `rm -rf` of a tree the mount made
// (a build's output, an unpacked archive) pays for its removals in
// parallel, not one round trip after another.
//
// Every other operation of the layer — a lookup, create, listing,
// rename, rmdir, a file's read or close, statfs — waits for the removals
// under way first, as it sends the windows first, so nothing the program
// does afterwards can tell; another unlink waits only for an earlier
// removal of its own name. A recall of the directory's lease (another
// client wants a name in it) waits for the removals in it before the
// lease goes back. A removal that fails (a brick down, a full disk) is
// lost as a failed write is: the name is back (Options.Changed tells the
// caches above, which were told it went), an rmdir of its directory then
// fails with ENOTEMPTY, and the next Sync (fsync of a directory, syncfs)
// reports the error once. The layers below log it.
//
// Known limit: a connection to a brick lost between the answer and the
// send ends the lease on that brick; the removal then goes on the next
// connection, and would remove a file another client made under the name
// in that window (after this client's unlink had returned).

// maxRemovals bounds the removals under way at once.
const maxRemovals = 32

// removal is an unlink under way; done is closed when it has ended.
type removal struct {
	path string
	done chan struct{}
}

// removeBehind sends an unlink of path in the background if the child
// made the name under a lease and no removal of it is under way, and
// reports whether it did.
func (l *Layer) removeBehind(ctx context.Context, path string) bool {
	nl, ok := l.Child.(layer.NameLeaser)
	if !l.unlinkBehind || !ok || !nl.MadeName(path) {
		return false
	}
	l.w.slots <- struct{}{}
	// Asked again under the windows' lock, so that a recall of the lease
	// (Recall) that comes after MadeName says yes finds the removal.
	l.w.mu.Lock()
	if !nl.MadeName(path) || l.w.removing(path) {
		l.w.mu.Unlock()
		<-l.w.slots
		return false
	}
	r := &removal{path: path, done: make(chan struct{})}
	l.w.removals[r] = struct{}{}
	l.w.mu.Unlock()
	go func() {
		defer func() { <-l.w.slots }()
		err := l.Child.Unlink(context.WithoutCancel(ctx), path)
		l.w.mu.Lock()
		delete(l.w.removals, r)
		if err != nil && l.w.removeErr == nil {
			l.w.removeErr = err
		}
		l.w.mu.Unlock()
		if err != nil && l.changed != nil {
			// The name is back: the caches above, told it was gone,
			// must forget that.
			l.changed(layer.Change{Path: path, Entry: true})
		}
		close(r.done)
	}()
	return true
}

// removing reports whether a removal of path is under way. w.mu is held.
func (w *Windows) removing(path string) bool {
	for r := range w.removals {
		if r.path == path {
			return true
		}
	}
	return false
}

// awaitRemovals returns once the removals under way that which picks
// have ended.
func (w *Windows) awaitRemovals(which func(*removal) bool) {
	w.mu.Lock()
	if len(w.removals) == 0 {
		w.mu.Unlock()
		return
	}
	var wait []chan struct{}
	for r := range w.removals {
		if which(r) {
			wait = append(wait, r.done)
		}
	}
	w.mu.Unlock()
	for _, c := range wait {
		<-c
	}
}

// AwaitRemovals returns once every removal under way has ended: a graph
// closing must not cut off the removals its layers answered for.
func (w *Windows) AwaitRemovals() {
	w.awaitRemovals(func(*removal) bool { return true })
}

// takeRemoveErr returns the error of a removal that failed since it was
// last asked, and forgets it.
func (w *Windows) takeRemoveErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.removeErr
	w.removeErr = nil
	return err
}

func (l *Layer) Unlink(ctx context.Context, path string) error {
	gen := l.w.gen.Add(1)
	defer l.done(gen)
	l.w.flushAll(ctx)
	l.w.awaitRemovals(func(r *removal) bool { return r.path == path })
	if l.removeBehind(ctx, path) {
		return nil
	}
	l.w.AwaitRemovals()
	return l.Child.Unlink(ctx, path)
}
