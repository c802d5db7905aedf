package fusebridge

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/mortarfs/mortar/layer"
)

// fillAttr converts a layer attribute for the kernel; ino is the node id.
func fillAttr(out *fuse.Attr, a *layer.Attr, ino uint64) {
	*out = fuse.Attr{
		Ino:       ino,
		Size:      a.Size,
		Blocks:    a.Blocks,
		Atime:     uint64(a.Atime.Sec),
		Atimensec: a.Atime.Nsec,
		Mtime:     uint64(a.Mtime.Sec),
		Mtimensec: a.Mtime.Nsec,
		Ctime:     uint64(a.Ctime.Sec),
		Ctimensec: a.Ctime.Nsec,
		Mode:      a.Mode,
		Nlink:     a.Nlink,
		Owner:     fuse.Owner{Uid: a.Uid, Gid: a.Gid},
		Rdev:      encodeDev(a.Rdev),
		Blksize:   a.Blksize,
	}
}

// encodeDev packs a dev_t into the kernel's 32-bit new_encode_dev format.
func encodeDev(rdev uint64) uint32 {
	major := uint32((rdev>>8)&0xfff) | uint32(rdev>>32)&^0xfff
	minor := uint32(rdev&0xff) | uint32(rdev>>12)&^0xff
	return minor&0xff | major<<8 | (minor&^0xff)<<12
}

// decodeDev unpacks the kernel's 32-bit device number into a dev_t.
func decodeDev(dev uint32) uint64 {
	major := uint64(dev&0xfff00) >> 8
	minor := uint64(dev&0xff) | uint64(dev>>12)&^0xff
	return minor&0xff | (major&0xfff)<<8 | (minor&^0xff)<<12 | (major&^0xfff)<<32
}

// entry records name in dir as the inode a and fills the kernel's entry.
func (b *bridge) entry(dir *node, name string, a *layer.Attr, out *fuse.EntryOut) fuse.Status {
	n, err := b.nodes.addEntry(dir, name, a)
	if err != nil {
		b.log.Error("bad entry", "name", name, "err", err)
		return errStatus(err)
	}
	b.fillEntry(out, n.ino, a)
	return fuse.OK
}

func (b *bridge) fillEntry(out *fuse.EntryOut, ino uint64, a *layer.Attr) {
	out.NodeId = ino
	out.Generation = generation
	out.SetEntryTimeout(b.opts.EntryTimeout)
	out.SetAttrTimeout(b.opts.AttrTimeout)
	fillAttr(&out.Attr, a, ino)
}

func (b *bridge) Lookup(cancel <-chan struct{}, in *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	dir, p, err := b.nodes.childPath(in.NodeId, name)
	if err != nil {
		return errStatus(err)
	}
	a, err := b.top.Lookup(b.ctx(), p)
	if layer.ToErrno(err) == syscall.ENOENT {
		b.nodes.unlink(dir, name) // gone, maybe through another client
		// A negative entry, which the kernel caches.
		*out = fuse.EntryOut{}
		out.SetEntryTimeout(b.opts.NegativeTimeout)
		return fuse.OK
	}
	if err != nil {
		return b.status("lookup", p, err)
	}
	return b.entry(dir, name, &a, out)
}

func (b *bridge) Forget(nodeid, nlookup uint64) {
	b.nodes.forget(nodeid, nlookup)
}

func (b *bridge) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	ctx := b.ctx()
	if in.Flags()&fuse.FUSE_GETATTR_FH != 0 {
		if h := b.handles.file(in.Fh()); h != nil {
			a, err := h.file.Getattr(ctx)
			return b.attrOut(out, h.node.ino, &a, "fgetattr", err)
		}
	}
	n, p, err := b.nodes.nodePath(in.NodeId)
	if n == nil {
		return errStatus(err)
	}
	var a layer.Attr
	if err == nil {
		a, err = b.top.Lookup(ctx, p)
		if err == nil && n.ino != 1 && a.Gfid != n.gfid {
			err = syscall.ESTALE // the name now holds another inode
		}
	}
	if err != nil {
		// An unlinked or replaced file the kernel still has open.
		if f := b.handles.anyOpen(n); f != nil {
			a, err = f.Getattr(ctx)
		}
	}
	return b.attrOut(out, n.ino, &a, "getattr", err)
}

func (b *bridge) attrOut(out *fuse.AttrOut, ino uint64, a *layer.Attr, op string, err error) fuse.Status {
	if err != nil {
		return b.status(op, "", err)
	}
	if n := b.nodes.get(ino); n != nil {
		n.mode.Store(a.Mode)
	}
	out.SetTimeout(b.opts.AttrTimeout)
	fillAttr(&out.Attr, a, ino)
	return fuse.OK
}

// setattrIn converts the kernel's SETATTR into the layer's.
func setattrIn(in *fuse.SetAttrIn) layer.SetattrIn {
	var s layer.SetattrIn
	v := in.Valid
	if v&fuse.FATTR_MODE != 0 {
		s.Valid |= layer.SetMode
		s.Mode = in.Mode & 07777
	}
	if v&fuse.FATTR_UID != 0 {
		s.Valid |= layer.SetUid
		s.Uid = in.Uid
	}
	if v&fuse.FATTR_GID != 0 {
		s.Valid |= layer.SetGid
		s.Gid = in.Gid
	}
	if v&fuse.FATTR_SIZE != 0 {
		s.Valid |= layer.SetSize
		s.Size = in.Size
	}
	switch {
	case v&fuse.FATTR_ATIME_NOW != 0:
		s.Valid |= layer.SetAtimeNow
	case v&fuse.FATTR_ATIME != 0:
		s.Valid |= layer.SetAtime
		s.Atime = layer.Timespec{Sec: int64(in.Atime), Nsec: in.Atimensec}
	}
	switch {
	case v&fuse.FATTR_MTIME_NOW != 0:
		s.Valid |= layer.SetMtimeNow
	case v&fuse.FATTR_MTIME != 0:
		s.Valid |= layer.SetMtime
		s.Mtime = layer.Timespec{Sec: int64(in.Mtime), Nsec: in.Mtimensec}
	}
	return s
}

func (b *bridge) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	ctx := b.ctx()
	s := setattrIn(in)
	if fh, ok := in.GetFh(); ok {
		if h := b.handles.file(fh); h != nil {
			killIn(&s, in, h.node)
			a, err := h.file.Setattr(ctx, s)
			b.touch(h.node)
			return b.attrOut(out, h.node.ino, &a, "fsetattr", err)
		}
	}
	n, p, err := b.nodes.nodePath(in.NodeId)
	if n == nil {
		return errStatus(err)
	}
	killIn(&s, in, n)
	a, through, ferr := setattrThrough(n, in.Caller.Pid, s, func(f layer.File) (layer.Attr, error) { return f.Setattr(ctx, s) })
	if through {
		err = ferr
	} else if err == nil {
		a, err = b.top.Setattr(ctx, p, s)
	} else if f := b.handles.anyOpen(n); f != nil {
		a, err = f.Setattr(ctx, s) // fchmod, futimens... on an unlinked file
	}
	b.touch(n)
	return b.attrOut(out, n.ino, &a, "setattr", err)
}
