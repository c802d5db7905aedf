package brick

import (
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// Cache invalidation (GlusterFS's upcall): a connection that asked
// (wire.OpWatch) is told, in KindNotify frames, the paths that other
// connections to the brick changed, so that its client's caches forget
// them at once instead of at their timeouts. A change is queued for every
// watcher before the answer of the operation that made it is sent; each
// watcher's queue is sent by a goroutine of its own, so a slow client
// never holds an operation up. A queue that grows past maxQueued becomes
// one "anything may have changed" notice.

// watchers are a brick's watching connections.
type watchers struct {
	mu    sync.Mutex
	boxes map[*conn]*outbox
	n     atomic.Int32 // len(boxes), read without mu on every operation
}

// maxQueued bounds the changes waiting for one watcher.
const maxQueued = 4096

// outbox is the changes waiting to be sent to one watcher, in order and
// without duplicates.
type outbox struct {
	mu    sync.Mutex
	queue []layer.Change
	seen  map[layer.Change]struct{}
	wake  chan struct{} // has a token while queue is not empty
	// ready is closed once the watch's answer is sent: no notice may
	// reach the client before it (its handshake reads only the answer).
	ready     chan struct{}
	readyOnce sync.Once
}

// watch makes c a watcher (on) or not, and starts or stops its sender.
// A connection shutting down is never made one.
func (w *watchers) watch(c *conn, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, watching := w.boxes[c]
	switch {
	case on && !watching && c.ctx.Err() == nil:
		if w.boxes == nil {
			w.boxes = map[*conn]*outbox{}
		}
		o = &outbox{seen: map[layer.Change]struct{}{}, wake: make(chan struct{}, 1), ready: make(chan struct{})}
		w.boxes[c] = o
		w.n.Add(1)
		c.wg.Add(1)
		go c.sendChanges(o)
	case !on && watching:
		delete(w.boxes, c)
		w.n.Add(-1)
		o.close()
	}
}

// answered lets c's sender start, once the answer to its watch is sent.
func (w *watchers) answered(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if o := w.boxes[c]; o != nil {
		o.readyOnce.Do(func() { close(o.ready) })
	}
}

// active reports whether any connection watches.
func (w *watchers) active() bool { return w != nil && w.n.Load() > 0 }

// tell queues cs for every watcher but from, the connection that made
// them (its client knows).
func (w *watchers) tell(from *conn, cs []layer.Change) {
	if len(cs) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for c, o := range w.boxes {
		if c != from {
			o.put(cs)
		}
	}
}

func (o *outbox) put(cs []layer.Change) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil { // closed
		return
	}
	if _, all := o.seen[layer.ChangedAll]; all {
		return // it covers every change made before it is sent
	}
	for _, c := range cs {
		if _, dup := o.seen[c]; dup {
			continue
		}
		if len(o.queue) >= maxQueued {
			o.queue = append(o.queue[:0], layer.ChangedAll)
			clear(o.seen)
			o.seen[layer.ChangedAll] = struct{}{}
			break
		}
		o.queue = append(o.queue, c)
		o.seen[c] = struct{}{}
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take returns up to wire.MaxChanges queued changes, oldest first.
func (o *outbox) take() []layer.Change {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := min(len(o.queue), wire.MaxChanges)
	out := make([]layer.Change, n)
	copy(out, o.queue)
	o.queue = o.queue[n:]
	for _, c := range out {
		delete(o.seen, c)
	}
	if len(o.queue) > 0 {
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}
	return out
}

// close stops the outbox: its sender ends.
func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen, o.queue = nil, nil
	close(o.wake)
}

// sendChanges sends o's changes to c's client until o is closed or c
// ends.
func (c *conn) sendChanges(o *outbox) {
	defer c.wg.Done()
	select {
	case <-c.ctx.Done():
		return
	case <-o.ready:
	}
	for {
		select {
		case <-c.ctx.Done():
			return
		case _, ok := <-o.wake:
			if !ok {
				return
			}
		}
		if cs := o.take(); len(cs) > 0 {
			var e wire.Enc
			wire.EncodeChanges(&e, cs)
			if err := c.w.Send(wire.Header{Kind: wire.KindNotify}, e.B); err != nil {
				c.nc.Close()
				return
			}
		}
	}
}

// watch answers wire.OpWatch.
func (c *conn) watch(flags uint32) error {
	if flags > wire.WatchOn || c.watchers == nil {
		return syscall.EINVAL
	}
	c.watchers.watch(c, flags == wire.WatchOn)
	return nil
}

// changesOf returns what request r, which succeeded, changed.
func (c *conn) changesOf(r *wire.Request) []layer.Change {
	inode := func(p string) layer.Change { return layer.Change{Path: p} }
	if names := namesChanged(r); names != nil {
		var cs []layer.Change
		if r.Op == wire.OpLink {
			cs = append(cs, inode(r.Path)) // its link count
		}
		if r.Op == wire.OpCreate && r.Flags&syscall.O_EXCL == 0 {
			cs = append(cs, inode(r.Path)) // it may have opened (and truncated) a file there
		}
		for _, p := range names {
			cs = append(cs, layer.Change{Path: p, Entry: true})
		}
		return cs
	}
	switch r.Op {
	case wire.OpSetattr, wire.OpSetxattr, wire.OpRemovexattr:
		return []layer.Change{inode(r.Path)}
	case wire.OpOpen:
		if r.Flags&syscall.O_TRUNC != 0 {
			return []layer.Change{inode(r.Path)}
		}
	case wire.OpWrite, wire.OpWriteGap, wire.OpFsetattr, wire.OpFallocate:
		if p := c.pathOf(r.Fh); p != "" {
			return []layer.Change{inode(p)}
		}
	}
	return nil
}
