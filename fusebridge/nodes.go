package fusebridge

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// node is an inode the kernel knows (or an ancestor of one).
type node struct {
	ino  uint64
	gfid layer.Gfid
	typ  uint32 // S_IFMT bits; they never change for a gfid

	// lookups is the kernel's lookup count: entries replied minus FORGET.
	lookups uint64
	// links are the names of the node, the most recently confirmed first.
	links []link
	// children are the known names inside a directory node.
	children map[string]*node
	// open counts the file handles open on the node; with no name left,
	// GETATTR and SETATTR go through one of them (see handleTable.anyOpen).
	open int
	// touched is the bridge's change sequence number (bridge.seq) when
	// the node's attributes last changed through this mount.
	touched atomic.Uint64
	// mode is the mode last told to the kernel (see killpriv.go).
	mode atomic.Uint32
	// writer is the handle last opened for writing on the node, while
	// open (see writerOf).
	writer atomic.Pointer[handle]
	// target is a symlink's target, once a listing brought it: it never
	// changes for a gfid, so READLINK of the node needs no round trip.
	target atomic.Pointer[string]
}

type link struct {
	parent *node
	name   string
}

// table maps kernel node ids to nodes. A node stays in it while the kernel
// holds it, while it has open handles, or while it is the parent of a node
// that stays: its name is needed for their paths.
type table struct {
	mu    sync.Mutex
	nodes map[uint64]*node
	root  *node
}

func newTable() *table {
	root := &node{ino: 1, gfid: layer.RootGfid, typ: syscall.S_IFDIR, lookups: 1}
	return &table{nodes: map[uint64]*node{1: root}, root: root}
}

// get returns the node with id ino, or nil.
func (t *table) get(ino uint64) *node {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodes[ino]
}

// pathOf returns the node with id ino and its path.
func (t *table) pathOf(ino uint64) (string, error) {
	_, p, err := t.nodePath(ino)
	return p, err
}

// nodePath returns the node with id ino and its path: ESTALE for an
// unknown id, ENOENT for a node that has no name any more.
func (t *table) nodePath(ino uint64) (*node, string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.nodes[ino]
	if n == nil {
		return nil, "", syscall.ESTALE
	}
	p, err := t.pathLocked(n)
	return n, p, err
}

// childPath returns the directory node with id parent and the path of name
// inside it.
func (t *table) childPath(parent uint64, name string) (*node, string, error) {
	if err := layer.CheckName(name); err != nil {
		return nil, "", err
	}
	dir, p, err := t.nodePath(parent)
	if err != nil {
		return nil, "", err
	}
	p = layer.Join(p, name)
	if len(p) > layer.PathMax {
		return nil, "", syscall.ENAMETOOLONG
	}
	return dir, p, nil
}

func (t *table) pathLocked(n *node) (string, error) {
	if n == t.root {
		return "/", nil
	}
	var names []string
	for cur := n; cur != t.root; cur = cur.links[0].parent {
		if len(cur.links) == 0 {
			return "", syscall.ENOENT
		}
		if len(names) > layer.PathMax/2 {
			return "", fmt.Errorf("node %d: path loop: %w", n.ino, syscall.EIO)
		}
		names = append(names, cur.links[0].name)
	}
	var sb strings.Builder
	for i := len(names) - 1; i >= 0; i-- {
		sb.WriteByte('/')
		sb.WriteString(names[i])
	}
	return sb.String(), nil
}

// addEntry records that name in dir is the inode described by a and that
// the kernel got one more reference to it.
func (t *table) addEntry(dir *node, name string, a *layer.Attr) (*node, error) {
	if a.Gfid.IsZero() {
		return nil, fmt.Errorf("%s: no gfid: %w", name, syscall.EIO)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.addEntryLocked(dir, name, a)
	if err == nil {
		n.mode.Store(a.Mode)
	}
	return n, err
}

// addListedEntry is addEntry for an entry of a directory listing taken at
// change sequence number seq. It adds nothing and returns nil if the
// node's attributes changed through this mount since: the kernel would take
// the listing's older attributes (a smaller size...) over its own.
func (t *table) addListedEntry(dir *node, name string, a *layer.Attr, seq uint64) (*node, error) {
	if a.Gfid.IsZero() {
		return nil, fmt.Errorf("%s: no gfid: %w", name, syscall.EIO)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.nodes[a.Gfid.Ino()]; n != nil && n.touched.Load() > seq {
		return nil, nil
	}
	return t.addEntryLocked(dir, name, a)
}

func (t *table) addEntryLocked(dir *node, name string, a *layer.Attr) (*node, error) {
	ino := a.Gfid.Ino()
	n := t.nodes[ino]
	switch {
	case n == nil:
		n = &node{ino: ino, gfid: a.Gfid, typ: a.Mode & syscall.S_IFMT}
		t.nodes[ino] = n
	case n.gfid != a.Gfid:
		return nil, fmt.Errorf("%s: gfid %v and %v share inode number %d: %w", name, a.Gfid, n.gfid, ino, syscall.EIO)
	case n == t.root:
		return nil, fmt.Errorf("%s: root gfid below the root: %w", name, syscall.EIO)
	}
	t.setLinkLocked(dir, name, n)
	n.lookups++
	return n, nil
}

// setLinkLocked makes name in dir a name of n, replacing whatever had it.
func (t *table) setLinkLocked(dir *node, name string, n *node) {
	if old := dir.children[name]; old != nil && old != n {
		t.dropLinkLocked(old, dir, name)
		t.maybeDropLocked(old)
	}
	for i, l := range n.links {
		if l.parent == dir && l.name == name {
			copy(n.links[1:i+1], n.links[:i]) // move it to the front
			n.links[0] = l
			return
		}
	}
	if dir.children == nil {
		dir.children = make(map[string]*node)
	}
	dir.children[name] = n
	n.links = append([]link{{dir, name}}, n.links...)
}

// unlink forgets name in dir and returns the node it named, or nil.
func (t *table) unlink(dir *node, name string) *node {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := dir.children[name]
	t.unlinkLocked(dir, name)
	return n
}

func (t *table) unlinkLocked(dir *node, name string) {
	n := dir.children[name]
	if n == nil {
		return
	}
	t.dropLinkLocked(n, dir, name)
	t.maybeDropLocked(n)
	t.maybeDropLocked(dir)
}

// dropLinkLocked removes name in dir from n's names without dropping nodes.
func (t *table) dropLinkLocked(n, dir *node, name string) {
	if dir.children[name] == n {
		delete(dir.children, name)
	}
	for i, l := range n.links {
		if l.parent == dir && l.name == name {
			n.links = append(n.links[:i], n.links[i+1:]...)
			break
		}
	}
}

// rename moves name oldName in oldDir to newName in newDir, dropping the
// name previously at the target.
func (t *table) rename(oldDir *node, oldName string, newDir *node, newName string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := oldDir.children[oldName]
	target := newDir.children[newName]
	if n != nil && n == target {
		return // two names of one inode: rename(2) does nothing
	}
	if target != nil {
		t.dropLinkLocked(target, newDir, newName)
		t.maybeDropLocked(target)
	}
	if n == nil {
		return
	}
	t.dropLinkLocked(n, oldDir, oldName)
	t.setLinkLocked(newDir, newName, n)
	t.maybeDropLocked(oldDir)
}

// forget drops nlookup kernel references to the node with id ino.
func (t *table) forget(ino, nlookup uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.nodes[ino]
	if n == nil || n == t.root {
		return
	}
	n.lookups -= min(nlookup, n.lookups)
	t.maybeDropLocked(n)
}

// setOpen adjusts the count of open handles on n.
func (t *table) setOpen(n *node, delta int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n.open += delta
	t.maybeDropLocked(n)
}

// maybeDropLocked removes n, and then the ancestors only n kept, once
// nothing needs them.
func (t *table) maybeDropLocked(n *node) {
	for n != t.root && n.lookups == 0 && n.open == 0 && len(n.children) == 0 {
		if t.nodes[n.ino] == n {
			delete(t.nodes, n.ino)
		}
		links := n.links
		n.links = nil
		for _, l := range links {
			if l.parent.children[l.name] == n {
				delete(l.parent.children, l.name)
			}
		}
		if len(links) != 1 {
			for _, l := range links {
				t.maybeDropLocked(l.parent)
			}
			return
		}
		n = links[0].parent
	}
}

// parentIno is the node id of n's parent, for "..".
func (t *table) parentIno(n *node) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(n.links) == 0 {
		return n.ino
	}
	return n.links[0].parent.ino
}

// linked reports whether n still has a name.
func (t *table) linked(n *node) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return n == t.root || len(n.links) > 0
}
