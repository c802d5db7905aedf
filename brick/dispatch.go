package brick

import (
	"context"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// maxXattrName bounds xattr names (XATTR_NAME_MAX).
const maxXattrName = 255

// dispatch runs a request on the brick's layer and encodes its result.
func (c *conn) dispatch(ctx context.Context, r *wire.Request, e *wire.Enc) (err error) {
	if isHealOp(r.Op) {
		return c.healOp(ctx, r, e)
	}
	if r.Pending != 0 || r.Size != 0 || r.KeepUndo {
		t := layer.Txn{Pending: r.Pending, KeepUndo: r.KeepUndo}
		if r.Size != 0 {
			t.SetSize, t.Size = true, r.Size-1
		}
		ctx = layer.WithTxn(ctx, t)
	}
	if isFileOp(r.Op) {
		return c.fileOp(ctx, r, e)
	}
	switch r.Op {
	case wire.OpWatch:
		return c.watch(r.Flags)
	case wire.OpDirLeaseReturn:
		c.dirLeases.giveBack(c, r.Cookie)
		return nil
	case wire.OpGoodbye:
		c.touched.goodbye()
		return nil
	}
	if err := checkPaths(r); err != nil {
		return err
	}
	c.touched.touch(r)
	leave, err := c.dirLeases.enter(ctx, c, r)
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil { // guard answers it: nothing is granted
			leave(syscall.EIO)
			panic(p)
		}
		if id := leave(err); id != 0 && err == nil {
			e.U64(id) // a mkdir's answer: the attributes, then the lease
		}
	}()
	return c.pathOp(ctx, r, e)
}

// pathOp runs an operation on a path (r's paths are checked, and no
// other client holds a lease it conflicts with).
func (c *conn) pathOp(ctx context.Context, r *wire.Request, e *wire.Enc) error {
	if r.Op == wire.OpEntrylk {
		return c.entrylk(r)
	}
	if err := c.waitEntries(ctx, r); err != nil {
		return err
	}
	// After the waits (another client's lease, a healer's hold): the
	// fence may have gone up meanwhile (fence.go).
	if err := c.fenced(r.Op); err != nil {
		return err
	}
	switch r.Op {
	case wire.OpMake:
		return c.make(ctx, r, e)
	case wire.OpCreate:
		f, a, err := c.l.Create(ctx, r.Path, layer.CreateIn{Owner: r.Owner, Flags: r.Flags, Mode: r.Mode})
		if err != nil {
			return err
		}
		e.U64(c.addFile(f, r.Path, r.Flags&syscall.O_TRUNC != 0))
		e.Attr(&a)
		return nil
	case wire.OpOpen:
		f, err := c.l.Open(ctx, r.Path, r.Flags)
		if err != nil {
			return err
		}
		e.U64(c.addFile(f, r.Path, r.Flags&syscall.O_TRUNC != 0))
		return nil
	case wire.OpReaddir:
		page, err := c.l.Readdir(ctx, r.Path, r.Cookie, int(min(r.Max, 4096)))
		if err == nil {
			e.DirPage(&page, r.Flags&wire.ReaddirTargets != 0)
		}
		return err
	case wire.OpStatfs:
		st, err := c.l.Statfs(ctx, r.Path)
		if err == nil {
			e.Statfs(&st)
		}
		return err
	case wire.OpReadlink:
		target, err := c.l.Readlink(ctx, r.Path)
		e.Str(target)
		return err
	case wire.OpUnlink:
		return c.l.Unlink(ctx, r.Path)
	case wire.OpUnlinkData:
		return layer.UnlinkData(ctx, c.l, r.Path)
	case wire.OpRmdir:
		return c.l.Rmdir(ctx, r.Path)
	case wire.OpRename:
		return layer.RenameSource(ctx, c.l, r.Path, r.Path2, r.Flags, r.Gfid)
	case wire.OpLookupData:
		return c.lookupData(ctx, r, e)
	}
	if isXattrOp(r.Op) {
		return c.xattrOp(ctx, r, e)
	}
	return c.attrOp(ctx, r, e)
}

// make creates a file, writes its first bytes and changes its attributes
// in one go (wire.OpMake); a file it made is removed again if a later
// step fails.
func (c *conn) make(ctx context.Context, r *wire.Request, e *wire.Enc) error {
	f, a, err := c.l.Create(ctx, r.Path, layer.CreateIn{Owner: r.Owner, Flags: r.Flags, Mode: r.Mode})
	if err != nil {
		return err
	}
	if a, err = layer.Fill(ctx, f, r.Data, r.Setattr, a); err != nil {
		f.Release(context.WithoutCancel(ctx))
		if r.Flags&syscall.O_EXCL != 0 { // it made the file
			if uerr := c.l.Unlink(context.WithoutCancel(ctx), r.Path); uerr != nil {
				c.log.Warn("a file made in one go that failed is left behind", "path", r.Path, "err", err, "unlink", uerr)
			}
		}
		return err
	}
	e.U64(c.addFile(f, r.Path, true))
	e.Attr(&a)
	return nil
}

// attrOp runs the path operations that answer with an Attr.
func (c *conn) attrOp(ctx context.Context, r *wire.Request, e *wire.Enc) error {
	var a layer.Attr
	var err error
	switch r.Op {
	case wire.OpLookup:
		a, err = c.l.Lookup(ctx, r.Path)
	case wire.OpSetattr:
		a, err = c.l.Setattr(ctx, r.Path, r.Setattr)
	case wire.OpMknod:
		a, err = c.l.Mknod(ctx, r.Path, layer.MknodIn{Owner: r.Owner, Mode: r.Mode, Rdev: r.Rdev, Linkto: r.Linkto})
	case wire.OpMkdir:
		a, err = c.l.Mkdir(ctx, r.Path, layer.MkdirIn{Owner: r.Owner, Mode: r.Mode})
	case wire.OpSymlink:
		a, err = c.l.Symlink(ctx, r.Path, layer.SymlinkIn{Owner: r.Owner, Target: r.Target})
	case wire.OpLink:
		a, err = c.l.Link(ctx, r.Path, r.Path2)
	default:
		return syscall.ENOSYS
	}
	if err == nil {
		e.Attr(&a)
	}
	return err
}

func (c *conn) xattrOp(ctx context.Context, r *wire.Request, e *wire.Enc) error {
	if len(r.Name) > maxXattrName {
		return syscall.ERANGE
	}
	switch r.Op {
	case wire.OpGetxattr:
		v, err := c.l.Getxattr(ctx, r.Path, r.Name)
		e.B = append(e.B, v...)
		return err
	case wire.OpSetxattr:
		return c.l.Setxattr(ctx, r.Path, r.Name, r.Value, r.Flags)
	case wire.OpListxattr:
		names, err := c.l.Listxattr(ctx, r.Path)
		e.Strs(names)
		return err
	case wire.OpRemovexattr:
		return c.l.Removexattr(ctx, r.Path, r.Name)
	}
	return syscall.ENOSYS
}

// fileOp runs an operation on an open file.
func (c *conn) fileOp(ctx context.Context, r *wire.Request, e *wire.Enc) error {
	if r.Op == wire.OpRelease {
		f, err := c.takeFile(r.Fh)
		if err != nil {
			return err
		}
		return f.Release(ctx)
	}
	f, err := c.fileOf(r)
	if err != nil {
		return err
	}
	switch r.Op {
	case wire.OpWrite:
		if r.Off < 0 {
			return syscall.EINVAL
		}
		n, err := f.Write(ctx, r.Data, r.Off)
		e.U32(uint32(n))
		return err
	case wire.OpWriteGap:
		return writeGap(ctx, f, r, e)
	case wire.OpFgetattr, wire.OpFsetattr:
		var a layer.Attr
		if r.Op == wire.OpFgetattr {
			a, err = f.Getattr(ctx)
		} else {
			a, err = f.Setattr(ctx, r.Setattr)
		}
		e.Attr(&a)
		return err
	case wire.OpFsync:
		return f.Fsync(ctx, r.Flags&1 != 0)
	case wire.OpFallocate:
		return f.Fallocate(ctx, r.Mode, r.Off, r.Len)
	case wire.OpFlush:
		return f.Flush(ctx, c.owner(r.LockOwner))
	case wire.OpGetlk:
		lk, err := f.Getlk(ctx, c.owner(r.LockOwner), r.Lock)
		e.Lock(lk)
		return err
	case wire.OpSetlk:
		return c.setlk(ctx, f, r, e)
	case wire.OpLeaseReturn:
		return c.returnLease(ctx, f, r)
	}
	return syscall.ENOSYS
}

// writeGap writes around a gap (layer.GapWriter), answered as a write.
func writeGap(ctx context.Context, f layer.File, r *wire.Request, e *wire.Enc) error {
	if r.Off < 0 || int(r.Gap.At) > len(r.Data) {
		return syscall.EINVAL
	}
	n, err := layer.WriteGap(ctx, f, r.Data, r.Off, r.Gap)
	e.U32(uint32(n))
	return err
}

// setlk takes or releases a lock; one asked with wire.SetlkLease may come
// back with a lease (answered with its id).
func (c *conn) setlk(ctx context.Context, f layer.File, r *wire.Request, e *wire.Enc) error {
	lf, ok := f.(layer.LockLeaser)
	if !ok || r.Wait || r.Flags&wire.SetlkLease == 0 {
		return f.Setlk(ctx, c.owner(r.LockOwner), r.Lock, r.Wait)
	}
	id, err := lf.SetlkLease(ctx, c.owner(r.LockOwner), r.Lock, leaseHolder{c, r.Fh})
	if err == nil && id != 0 {
		e.U64(id)
	}
	return err
}

// returnLease ends a lease the client held through f, taking over the
// locks it reports.
func (c *conn) returnLease(ctx context.Context, f layer.File, r *wire.Request) error {
	lf, ok := f.(layer.LockLeaser)
	if !ok {
		return syscall.ENOSYS
	}
	for i := range r.Locks {
		r.Locks[i].Owner = c.owner(r.Locks[i].Owner)
	}
	return lf.ReturnLease(ctx, r.Cookie, r.Locks, r.Flags&wire.LeaseKeep != 0)
}

// leaseHolder is a client connection holding a lease through file fh.
type leaseHolder struct {
	c  *conn
	fh uint64
}

// Recall sends the recall frame (without waiting: the locks layer calls
// it with its table locked).
func (h leaseHolder) Recall(id uint64) {
	var e wire.Enc
	e.U64(h.fh)
	go func() {
		if err := h.c.w.Send(wire.Header{Kind: wire.KindRecall, ID: id}, e.B); err != nil {
			h.c.nc.Close()
		}
	}()
}

// Revoke closes the connection of a client that kept a recalled lease.
func (h leaseHolder) Revoke() {
	h.c.log.Warn("client did not return a recalled lock lease in time: disconnecting it", "fh", h.fh)
	h.c.nc.Close()
}

func isFileOp(op uint8) bool {
	return op >= wire.OpRead && op <= wire.OpRelease || op == wire.OpLeaseReturn || op == wire.OpWriteGap || op == wire.OpReadUndo
}

func isXattrOp(op uint8) bool { return op >= wire.OpGetxattr && op <= wire.OpRemovexattr }

func checkPaths(r *wire.Request) error {
	if err := layer.CheckPath(r.Path); err != nil {
		return err
	}
	if r.Op == wire.OpRename || r.Op == wire.OpLink {
		return layer.CheckPath(r.Path2)
	}
	return nil
}

func isHealOp(op uint8) bool {
	return op >= wire.OpHealIndex && op <= wire.OpDropHealEntry || op == wire.OpRemoved
}

// maxHealIndex bounds one HealIndex answer.
const maxHealIndex = 4096

// healOp runs replicate's bookkeeping operations (layer.HealStore).
func (c *conn) healOp(ctx context.Context, r *wire.Request, e *wire.Enc) error {
	h, ok := c.l.(layer.HealStore)
	if !ok {
		return syscall.ENOTSUP
	}
	if r.Op != wire.OpHealIndex && (r.Op != wire.OpDropHealEntry || r.Path != "") {
		if err := layer.CheckPath(r.Path); err != nil {
			return err
		}
	}
	switch r.Op {
	case wire.OpHealIndex:
		entries, err := h.HealIndex(ctx, r.Gfid, int(min(max(r.Max, 1), maxHealIndex)))
		if err != nil {
			return err
		}
		entries = fitHealIndex(entries, wire.MaxPayload-4)
		e.U32(uint32(len(entries)))
		for _, en := range entries {
			e.Gfid(en.Gfid)
			e.Str(en.Path)
			e.U64(en.Pending)
		}
		return nil
	case wire.OpMarkPending:
		return h.MarkPending(ctx, r.Path, r.Gfid, r.Pending)
	case wire.OpClearPending:
		return h.ClearPending(ctx, r.Path, r.Gfid, r.Pending, r.Ctime)
	case wire.OpDropHealEntry:
		return h.DropHealEntry(ctx, r.Gfid, r.Path)
	case wire.OpRemoved:
		rs, err := h.Removed(ctx, r.Path)
		if err != nil {
			return err
		}
		rs = fitRemovals(rs, wire.MaxPayload-4)
		e.U32(uint32(len(rs)))
		for _, rm := range rs {
			e.Gfid(rm.Gfid)
			e.Str(rm.Name)
		}
		return nil
	}
	return syscall.ENOSYS
}

// fitRemovals keeps the latest of rs that encode in room bytes: a merge
// missing the oldest records brings their names back, as without them.
func fitRemovals(rs []layer.Removal, room int) []layer.Removal {
	for i := len(rs) - 1; i >= 0; i-- {
		room -= 16 + 4 + len(rs[i].Name)
		if room < 0 {
			return rs[i+1:]
		}
	}
	return rs
}

// fitHealIndex cuts entries to what encodes in room bytes (one at least):
// long paths must not make an answer too large for a frame. The client
// asks again after the last gfid it got.
func fitHealIndex(entries []layer.HealEntry, room int) []layer.HealEntry {
	for i, en := range entries {
		room -= 16 + 4 + len(en.Path) + 8
		if room < 0 && i > 0 {
			return entries[:i]
		}
	}
	return entries
}
