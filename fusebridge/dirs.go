package fusebridge

import (
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/mortarfs/mortar/layer"
)

// dirHandle is an open directory. Its listing is a snapshot taken when the
// kernel reads from offset 0 (opendir, rewinddir), so that the offsets
// telldir returns stay valid: entry i ("." and ".." first) has offset i+1.
type dirHandle struct {
	mu      sync.Mutex
	entries []layer.Entry // nil until the first read
	seq     uint64        // bridge.seq when the listing was taken
	// missing: the listing lacks what an unreachable brick holds
	// (layer.DirPage.Missing); a read past its entries fails with it.
	missing error
}

func (b *bridge) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	n, _, err := b.nodes.nodePath(in.NodeId)
	if err != nil {
		return errStatus(err)
	}
	if n.typ != syscall.S_IFDIR {
		return fuse.ENOTDIR
	}
	b.nodes.setOpen(n, 1)
	*out = fuse.OpenOut{Fh: b.handles.add(&handle{node: n, dir: &dirHandle{}})}
	return fuse.OK
}

func (b *bridge) ReleaseDir(in *fuse.ReleaseIn) {
	if h := b.handles.remove(in.Fh); h != nil {
		b.nodes.setOpen(h.node, -1)
	}
}

// FsyncDir sends what the client holds back (layer.Syncer): the names
// made in the directory are then on the bricks. (The bricks' own file
// systems are not asked to sync the directory.)
func (b *bridge) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return b.status("fsyncdir", "", layer.Sync(b.ctx(), b.top))
}

// listing returns the snapshot of an open directory to serve a read at
// offset off, taking a new one at offset 0. A read past the entries of a
// snapshot that lacks some fails with what they lack: the caller got the
// reachable entries, then the error (`ls` shows them and reports it).
func (b *bridge) listing(fh, off uint64) (*handle, []layer.Entry, uint64, fuse.Status) {
	h := b.handles.get(fh)
	if h == nil || h.dir == nil {
		return nil, nil, 0, fuse.EBADF
	}
	d := h.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	if off == 0 || d.entries == nil {
		p, err := b.nodes.pathOf(h.node.ino)
		if err != nil {
			return nil, nil, 0, errStatus(err)
		}
		seq := b.seq.Load()
		entries, missing, err := layer.ReadDirReachable(b.ctx(), b.top, p)
		if err != nil {
			return nil, nil, 0, b.status("readdir", p, err)
		}
		if entries == nil {
			entries = []layer.Entry{}
		}
		d.entries, d.seq, d.missing = entries, seq, missing
	}
	if d.missing != nil && off >= uint64(len(d.entries))+2 {
		return nil, nil, 0, errStatus(d.missing)
	}
	return h, d.entries, d.seq, fuse.OK
}

// dotEntry is entry i < 2 of a listing: "." or "..".
func (b *bridge) dotEntry(n *node, i int) fuse.DirEntry {
	if i == 0 {
		return fuse.DirEntry{Name: ".", Ino: n.ino, Mode: syscall.S_IFDIR, Off: 1}
	}
	return fuse.DirEntry{Name: "..", Ino: b.nodes.parentIno(n), Mode: syscall.S_IFDIR, Off: 2}
}

func dirEntry(e *layer.Entry, i int) fuse.DirEntry {
	return fuse.DirEntry{Name: e.Name, Ino: e.Attr.Gfid.Ino(), Mode: e.Attr.Mode, Off: uint64(i) + 1}
}

func (b *bridge) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	h, entries, _, st := b.listing(in.Fh, in.Offset)
	if !st.Ok() {
		return st
	}
	for i := int(min(in.Offset, uint64(len(entries)+2))); i < len(entries)+2; i++ {
		var de fuse.DirEntry
		if i < 2 {
			de = b.dotEntry(h.node, i)
		} else {
			de = dirEntry(&entries[i-2], i)
		}
		if !out.AddDirEntry(de) {
			break
		}
	}
	return fuse.OK
}

// ReadDirPlus answers entries with their attributes; the kernel takes a
// lookup reference on every entry but "." and "..", so the bridge counts
// exactly the entries that fit. Entries whose node changed through this
// mount since the listing was taken go without attributes (NodeId 0): the
// kernel looks them up itself.
func (b *bridge) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	h, entries, seq, st := b.listing(in.Fh, in.Offset)
	if !st.Ok() {
		return st
	}
	for i := int(min(in.Offset, uint64(len(entries)+2))); i < len(entries)+2; i++ {
		if i < 2 {
			if out.AddDirLookupEntry(b.dotEntry(h.node, i)) == nil {
				break
			}
			continue // NodeId 0: the kernel makes no dentry for it
		}
		e := &entries[i-2]
		eo := out.AddDirLookupEntry(dirEntry(e, i))
		if eo == nil {
			break
		}
		n, err := b.nodes.addListedEntry(h.node, e.Name, &e.Attr, seq)
		if err != nil {
			b.log.Warn("bad directory entry", "name", e.Name, "err", err)
		}
		if n == nil {
			continue // NodeId 0: the kernel looks it up itself
		}
		if e.Target != "" && n.typ == syscall.S_IFLNK {
			t := e.Target // not a pointer into the listing, which it would keep
			n.target.Store(&t)
		}
		b.fillEntry(eo, n.ino, &e.Attr)
	}
	return fuse.OK
}
