package fusebridge

import (
	"strings"
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/mortarfs/mortar/layer"
)

// Notifier makes the kernel forget what it caches of paths other clients
// changed (layer.Change: the volume's bricks tell them when its option
// features.cache-invalidation is on): attributes and page cache of the
// inode at a path, and for a name, the name and its directory's
// attributes. Give one to Options.Notifier and its Changed to the graph
// (volume.BuildOptions.OnChange). The kernel is told from a goroutine of
// the mount's own: telling it may wait on a request of the same
// directory, which may wait on a brick.
type Notifier struct {
	ch   chan layer.Change
	lost atomic.Bool // a change did not fit: forget everything
}

// notifyQueue bounds the changes waiting to be told to the kernel.
const notifyQueue = 4096

// NewNotifier returns a Notifier for one mount.
func NewNotifier() *Notifier {
	return &Notifier{ch: make(chan layer.Change, notifyQueue)}
}

// Changed queues c for the kernel. It never waits: when the queue is
// full, the kernel is later told to forget everything it knows.
func (n *Notifier) Changed(c layer.Change) {
	select {
	case n.ch <- c:
	default:
		n.lost.Store(true)
	}
}

// run tells the kernel of srv the changes queued, until done is closed.
func (n *Notifier) run(b *bridge, srv *fuse.Server, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case c := <-n.ch:
			if n.lost.Swap(false) {
				c = layer.ChangedAll
			}
			b.forget(srv, c)
		}
	}
}

// forget tells the kernel to forget what c makes stale.
func (b *bridge) forget(srv *fuse.Server, c layer.Change) {
	if c.All {
		inos, links := b.nodes.all()
		for _, ino := range inos {
			srv.InodeNotify(ino, 0, 0)
		}
		for _, l := range links {
			srv.EntryNotify(l.dir, l.name)
		}
		return
	}
	dir, n := b.nodes.walk(c.Path)
	if n != nil {
		srv.InodeNotify(n.ino, 0, 0) // attributes and page cache
	}
	if c.Entry && dir != nil {
		_, name := layer.Split(c.Path)
		srv.EntryNotify(dir.ino, name)
		srv.InodeNotify(dir.ino, -1, 0) // attributes only
	}
}

// walk returns the node of path and of its directory, as far as the
// kernel knows them (nil where it does not).
func (t *table) walk(path string) (dir, n *node) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n = t.root
	for _, name := range strings.Split(strings.Trim(path, "/"), "/") {
		if name == "" {
			break
		}
		if n == nil {
			return nil, nil
		}
		dir, n = n, n.children[name]
	}
	return dir, n
}

// named is a name the kernel may have cached: name in directory dir.
type named struct {
	dir  uint64
	name string
}

// all returns the ids of every node, and every name of them.
func (t *table) all() ([]uint64, []named) {
	t.mu.Lock()
	defer t.mu.Unlock()
	inos := make([]uint64, 0, len(t.nodes))
	var links []named
	for ino, n := range t.nodes {
		inos = append(inos, ino)
		for _, l := range n.links {
			links = append(links, named{l.parent.ino, l.name})
		}
	}
	return inos, links
}
