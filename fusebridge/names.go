package fusebridge

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/mortarfs/mortar/layer"
)

// newInode finishes an operation that created name in dir.
func (b *bridge) newInode(op, p string, dir *node, name string, a layer.Attr, err error, out *fuse.EntryOut) fuse.Status {
	if err != nil {
		return b.status(op, p, err)
	}
	return b.entry(dir, name, &a, out)
}

func (b *bridge) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	dir, p, err := b.nodes.childPath(in.NodeId, name)
	if err != nil {
		return errStatus(err)
	}
	a, err := b.top.Mkdir(b.ctx(), p, layer.MkdirIn{Owner: owner(&in.InHeader), Mode: in.Mode & 07777})
	return b.newInode("mkdir", p, dir, name, a, err, out)
}

func (b *bridge) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	dir, p, err := b.nodes.childPath(in.NodeId, name)
	if err != nil {
		return errStatus(err)
	}
	a, err := b.top.Mknod(b.ctx(), p, layer.MknodIn{
		Owner: owner(&in.InHeader),
		Mode:  in.Mode,
		Rdev:  decodeDev(in.Rdev),
	})
	return b.newInode("mknod", p, dir, name, a, err, out)
}

func (b *bridge) Symlink(cancel <-chan struct{}, in *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	dir, p, err := b.nodes.childPath(in.NodeId, name)
	if err != nil {
		return errStatus(err)
	}
	if len(target) >= layer.PathMax {
		return fuse.Status(syscall.ENAMETOOLONG)
	}
	a, err := b.top.Symlink(b.ctx(), p, layer.SymlinkIn{Owner: owner(in), Target: target})
	return b.newInode("symlink", p, dir, name, a, err, out)
}

func (b *bridge) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	old, err := b.nodes.pathOf(in.Oldnodeid)
	if err != nil {
		return errStatus(err)
	}
	dir, p, err := b.nodes.childPath(in.NodeId, name)
	if err != nil {
		return errStatus(err)
	}
	a, err := b.top.Link(b.ctx(), old, p)
	b.touch(b.nodes.get(in.Oldnodeid))
	return b.newInode("link", p, dir, name, a, err, out)
}

// Readlink answers a symlink's target from its node when a listing
// brought it (node.target), else asks the layers.
func (b *bridge) Readlink(cancel <-chan struct{}, in *fuse.InHeader) ([]byte, fuse.Status) {
	if n := b.nodes.get(in.NodeId); n != nil {
		if t := n.target.Load(); t != nil {
			return []byte(*t), fuse.OK
		}
	}
	p, err := b.nodes.pathOf(in.NodeId)
	if err != nil {
		return nil, errStatus(err)
	}
	target, err := b.top.Readlink(b.ctx(), p)
	if err != nil {
		return nil, b.status("readlink", p, err)
	}
	return []byte(target), fuse.OK
}

func (b *bridge) Unlink(cancel <-chan struct{}, in *fuse.InHeader, name string) fuse.Status {
	return b.remove(in, name, "unlink", b.top.Unlink)
}

func (b *bridge) Rmdir(cancel <-chan struct{}, in *fuse.InHeader, name string) fuse.Status {
	return b.remove(in, name, "rmdir", b.top.Rmdir)
}

func (b *bridge) remove(in *fuse.InHeader, name, op string, rm func(context.Context, string) error) fuse.Status {
	dir, p, err := b.nodes.childPath(in.NodeId, name)
	if err != nil {
		return errStatus(err)
	}
	if err := rm(b.ctx(), p); err != nil {
		return b.status(op, p, err)
	}
	b.touch(b.nodes.unlink(dir, name)) // its nlink changed
	return fuse.OK
}

// Flags of RENAME_IN.
const (
	renameNoReplace = 1 << 0
	renameExchange  = 1 << 1
	renameWhiteout  = 1 << 2
)

func (b *bridge) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	var flags uint32
	switch in.Flags {
	case 0:
	case renameNoReplace:
		flags = layer.RenameNoReplace
	default: // RENAME_EXCHANGE, RENAME_WHITEOUT
		return fuse.EINVAL
	}
	oldDir, oldPath, err := b.nodes.childPath(in.NodeId, oldName)
	if err != nil {
		return errStatus(err)
	}
	newDir, newPath, err := b.nodes.childPath(in.Newdir, newName)
	if err != nil {
		return errStatus(err)
	}
	if err := b.top.Rename(b.ctx(), oldPath, newPath, flags); err != nil {
		return b.status("rename", oldPath, err)
	}
	b.nodes.rename(oldDir, oldName, newDir, newName)
	return fuse.OK
}
