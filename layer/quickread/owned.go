package quickread

import (
	"container/list"

	"github.com/mortarfs/mortar/layer"
)

// Files this client made in one go — a create carrying all their content
// (layer.CreateIn.Data, write-behind's create-behind) — in a directory
// whose names it leases (layer.NameLeaser) are *owned*: no other client
// reaches such a name (a lookup, an open, a rename, a link, a heal of it)
// before the brick recalls the lease, so their content and attributes,
// as the make answered them, serve lookups and opens for as long as the
// name is still the client's (OwnsName), without the timeout and without
// a round trip. `echo > f` then `cat f` reads from memory. Every change
// through the layer drops them as it drops lookups' entries; a file open
// from an owned entry that the layer sees change turns to the child.

// ownedPerEntry is how many owned entries the cache keeps per entry of
// MaxEntries (owned entries are kept, not taken by one open): with the
// default, 16384 small files a client wrote last read from memory. Their
// bytes count against MaxBytes on their own.
const ownedPerEntry = 16

// owned holds the owned entries, by path and by inode, oldest first.
type owned struct {
	byPath map[string]*entry
	byGfid map[layer.Gfid]*entry
	order  list.List // of *entry
	bytes  int
}

// own keeps e, the entry of a file just made in one go, if nothing
// changed through the layer since clock e.clock (c.mu not held).
func (c *cache) own(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.clock != c.clock || len(e.data) > c.maxBytes {
		return
	}
	o := &c.owned
	if o.byPath == nil {
		o.byPath, o.byGfid = map[string]*entry{}, map[layer.Gfid]*entry{}
	}
	c.disown(o.byPath[e.path])
	c.disown(o.byGfid[e.attr.Gfid])
	for len(o.byPath) >= ownedPerEntry*c.maxEntries || o.bytes+len(e.data) > c.maxBytes {
		c.disown(o.order.Front().Value.(*entry))
	}
	e.owned = true
	e.elem = o.order.PushBack(e)
	o.byPath[e.path], o.byGfid[e.attr.Gfid] = e, e
	o.bytes += len(e.data)
}

// ownedEntry returns the owned entry of path if the client still owns
// the name (c.mu not held).
func (c *cache) ownedEntry(path string) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.owned.byPath[path]
	if e == nil || !c.ownedGood(e) {
		c.disown(e)
		return nil
	}
	return e
}

// ownedGood reports whether owned entry e may serve: nothing changed it
// through the layer, and the name is still the client's (c.mu held).
func (c *cache) ownedGood(e *entry) bool {
	return !e.dead && c.all <= e.clock && c.inodes[e.attr.Gfid].clock <= e.clock && c.owns(e.path)
}

// disown drops owned entry e (nil: none); files open from it turn to the
// child (c.mu held).
func (c *cache) disown(e *entry) {
	if e == nil || !e.owned || e.dead {
		return
	}
	e.dead = true
	o := &c.owned
	o.order.Remove(e.elem)
	delete(o.byPath, e.path)
	delete(o.byGfid, e.attr.Gfid)
	o.bytes -= len(e.data)
}

// disownPaths drops the owned entries of paths and, with trees, of the
// names below them (c.mu held).
func (c *cache) disownPaths(trees bool, paths ...string) {
	for _, p := range paths {
		c.disown(c.owned.byPath[p])
	}
	if !trees {
		return
	}
	for q, e := range c.owned.byPath {
		for _, p := range paths {
			if below(q, p) {
				c.disown(e)
				break
			}
		}
	}
}

// disownAll drops every owned entry (c.mu held).
func (c *cache) disownAll() {
	for _, e := range c.owned.byPath {
		c.disown(e)
	}
}
