package quickread

import (
	"container/list"
	"strings"
	"sync"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// cache holds the content lookups brought, by path, and knows what the
// layer changed since: a logical clock counts every change made through
// the layer, and an entry (or a file served from one) is good only while
// no change that may touch its inode came after its lookup started.
type cache struct {
	timeout    time.Duration
	maxEntries int
	maxBytes   int

	mu      sync.Mutex
	entries map[string]*entry
	order   list.List // of *entry, oldest lookup first
	bytes   int

	clock  uint64               // counts the changes made through the layer
	all    uint64               // the last change that may have touched any inode
	inodes map[layer.Gfid]stamp // the last change of each inode changed lately

	owned owned                  // files this client made and owns (owned.go)
	owns  func(path string) bool // whether the client owns the name path
}

// maxStamps bounds the inodes a cache remembers changes of; past it, a
// change counts as one to every inode.
const maxStamps = 4096

// stamp is when an inode was last changed through the layer.
type stamp struct {
	clock uint64
	at    time.Time
}

// entry is the content of one small file, from one lookup.
type entry struct {
	path  string
	attr  layer.Attr
	data  []byte
	clock uint64    // the cache's clock when the lookup started
	at    time.Time // when the lookup started
	elem  *list.Element
	owned bool // made by this client (owned.go), dead once dropped
	dead  bool
}

func newCache(opts Options, owns func(path string) bool) *cache {
	return &cache{timeout: opts.Timeout, maxEntries: opts.MaxEntries, maxBytes: opts.MaxBytes,
		entries: map[string]*entry{}, inodes: map[layer.Gfid]stamp{}, owns: owns}
}

// begin returns the clock, for an entry whose lookup starts now.
func (c *cache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clock
}

// put replaces the entry of e.path by e. e is kept only if it has content
// and nothing changed through the layer while its lookup ran (the content
// may predate the change).
func (c *cache) put(e *entry, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(c.entries[e.path])
	if e.data == nil || e.clock != c.clock || len(e.data) > c.maxBytes {
		return
	}
	for f := c.order.Front(); f != nil && now.Sub(f.Value.(*entry).at) >= c.timeout; f = c.order.Front() {
		c.remove(f.Value.(*entry))
	}
	for len(c.entries) >= c.maxEntries || c.bytes+len(e.data) > c.maxBytes {
		c.remove(c.order.Front().Value.(*entry))
	}
	e.elem = c.order.PushBack(e)
	c.entries[e.path] = e
	c.bytes += len(e.data)
}

// take removes the entry of path and returns it if it is still good to
// serve an open (nil if not): an entry serves one open.
func (c *cache) take(path string, now time.Time) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[path]
	c.remove(e)
	if e == nil || !c.good(e, now) {
		return nil
	}
	return e
}

// fresh reports whether e may still serve reads: younger than the
// timeout, and its inode not changed through the layer since its lookup.
func (c *cache) fresh(e *entry, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.good(e, now)
}

func (c *cache) good(e *entry, now time.Time) bool {
	if e.owned {
		return c.ownedGood(e)
	}
	return now.Sub(e.at) < c.timeout && c.all <= e.clock && c.inodes[e.attr.Gfid].clock <= e.clock
}

func (c *cache) remove(e *entry) {
	if e == nil {
		return
	}
	c.order.Remove(e.elem)
	delete(c.entries, e.path)
	c.bytes -= len(e.data)
}

// dropPaths notes a change to the names paths and forgets their entries.
func (c *cache) dropPaths(paths ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	for _, p := range paths {
		c.remove(c.entries[p])
	}
	c.disownPaths(false, paths...)
}

// dropTrees is dropPaths for names that may be directories (a rename):
// the entries of the names below them go too.
func (c *cache) dropTrees(paths ...string) {
	c.dropPaths(paths...)
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, e := range c.entries {
		for _, p := range paths {
			if below(q, p) {
				c.remove(e)
				break
			}
		}
	}
	c.disownPaths(true, paths...)
}

// below reports whether path q is below directory p.
func below(q, p string) bool {
	return len(q) > len(p) && q[len(p)] == '/' && strings.HasPrefix(q, p)
}

// changedInode notes a change to inode g's content or attributes (zero:
// an inode not known, so any).
func (c *cache) changedInode(g layer.Gfid, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	if g.IsZero() {
		c.changedAll()
		return
	}
	c.disown(c.owned.byGfid[g])
	if len(c.inodes) >= maxStamps {
		for k, s := range c.inodes {
			if now.Sub(s.at) >= c.timeout { // what it guards has timed out anyway
				delete(c.inodes, k)
			}
		}
	}
	if len(c.inodes) >= maxStamps {
		c.changedAll()
		return
	}
	c.inodes[g] = stamp{clock: c.clock, at: now}
}

// changedAll notes a change that may have touched any inode (c.mu held).
func (c *cache) changedAll() {
	c.all = c.clock
	clear(c.inodes)
	c.disownAll()
	if len(c.entries) > 0 {
		clear(c.entries)
		c.order.Init()
		c.bytes = 0
	}
}

// forgetAll notes a change that may have touched anything.
func (c *cache) forgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	c.changedAll()
}

// dropInode notes a change to the inode at path, whose gfid is known
// only if path has an entry: the entry goes, and so does the memory of
// files served from it.
func (c *cache) dropInode(path string, now time.Time) {
	c.mu.Lock()
	e := c.entries[path]
	c.mu.Unlock()
	if e != nil {
		c.changedInode(e.attr.Gfid, now)
	}
	c.dropPaths(path)
}
