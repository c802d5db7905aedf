package fusebridge

import (
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/mortarfs/mortar/layer"
)

// handle is what a kernel file handle (fh) stands for: an open file or an
// open directory.
type handle struct {
	node *node
	file layer.File // nil for a directory
	dir  *dirHandle // nil for a file
	// released is closed when the kernel releases the file, to end lock
	// waits still running on it.
	released chan struct{}
	// pid is the process that opened it.
	pid uint32
	// gone is set, under mu, when the kernel releases the file: a
	// SETATTR routed through it (writerOf) holds mu for reading, so the
	// file is not released under it. (The kernel sends RELEASE after
	// close(2) has returned: the process may already be on to its next
	// call.)
	mu   sync.RWMutex
	gone bool
}

// handleTable maps fh numbers to handles.
type handleTable struct {
	mu   sync.RWMutex
	next uint64
	m    map[uint64]*handle
}

func (t *handleTable) add(h *handle) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	t.m[t.next] = h
	return t.next
}

func (t *handleTable) get(fh uint64) *handle {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[fh]
}

// file returns the open file with number fh, or nil.
func (t *handleTable) file(fh uint64) *handle {
	if h := t.get(fh); h != nil && h.file != nil {
		return h
	}
	return nil
}

func (t *handleTable) remove(fh uint64) *handle {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.m[fh]
	delete(t.m, fh)
	return h
}

// anyOpen returns an open file of n, or nil.
func (t *handleTable) anyOpen(n *node) layer.File {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, h := range t.m {
		if h.node == n && h.file != nil {
			return h.file
		}
	}
	return nil
}

// fmodeExec is set by the kernel in OPEN flags for execve; it is no open(2)
// flag.
const fmodeExec = 0x20

// openFlags are the open(2) flags passed to the layers; the others are the
// kernel's business (O_CLOEXEC, O_NOFOLLOW...) or not flags at all.
const openFlags = syscall.O_ACCMODE | syscall.O_CREAT | syscall.O_EXCL | syscall.O_TRUNC |
	syscall.O_APPEND | syscall.O_NONBLOCK | syscall.O_DSYNC | syscall.O_SYNC |
	syscall.O_DIRECT | syscall.O_NOATIME

// openFlags are the FOPEN_ flags of every file opened.
func (b *bridge) openFlags() uint32 {
	if b.opts.KeepCache {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// newHandle numbers file f, opened on n with flags by process pid.
func (b *bridge) newHandle(n *node, f layer.File, flags, pid uint32) uint64 {
	b.nodes.setOpen(n, 1)
	h := &handle{node: n, file: f, released: make(chan struct{}), pid: pid}
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		n.writer.Store(h)
	}
	return b.handles.add(h)
}

// setattrThrough runs a SETATTR without a handle through the file that
// process pid has open for writing on n (the last it opened), if there is
// one, and reports whether there was. That is tar's and cp -a's fchown,
// fchmod and futimens (the kernel names no handle for them): through the
// file, the layers can keep the change with its writes not yet sent
// (write-behind). A change of size keeps its own way, and so do callers
// the kernel gives no pid for (outside the mount's pid namespace: they
// cannot be told apart).
func setattrThrough(n *node, pid uint32, s layer.SetattrIn, do func(layer.File) (layer.Attr, error)) (a layer.Attr, through bool, err error) {
	h := n.writer.Load()
	if h == nil || pid == 0 || h.pid != pid || s.Valid&layer.SetSize != 0 {
		return layer.Attr{}, false, nil
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.gone {
		return layer.Attr{}, false, nil
	}
	a, err = do(h.file)
	return a, true, err
}

func (b *bridge) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	dir, p, err := b.nodes.childPath(in.NodeId, name)
	if err != nil {
		return errStatus(err)
	}
	ctx := b.ctx()
	f, a, err := b.top.Create(ctx, p, layer.CreateIn{
		Owner: owner(&in.InHeader),
		Flags: in.Flags&openFlags | syscall.O_CREAT,
		Mode:  in.Mode & 07777,
	})
	if err != nil {
		return b.status("create", p, err)
	}
	n, err := b.nodes.addEntry(dir, name, &a)
	if err != nil {
		b.log.Error("bad entry", "path", p, "err", err)
		f.Release(ctx)
		return errStatus(err)
	}
	b.fillEntry(&out.EntryOut, n.ino, &a)
	out.OpenOut = fuse.OpenOut{Fh: b.newHandle(n, f, in.Flags, in.Caller.Pid), OpenFlags: b.openFlags()}
	return fuse.OK
}

func (b *bridge) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	n, p, err := b.nodes.nodePath(in.NodeId)
	if err != nil {
		return errStatus(err)
	}
	f, err := b.top.Open(b.ctx(), p, in.Flags&openFlags&^syscall.O_CREAT)
	if err != nil {
		return b.status("open", p, err)
	}
	if in.Mode&fuse.OPEN_KILL_SUIDGID != 0 && in.Flags&syscall.O_TRUNC != 0 {
		if err := b.killPriv(n, f); err != nil {
			f.Release(b.ctx())
			return b.status("open", p, err)
		}
	}
	*out = fuse.OpenOut{Fh: b.newHandle(n, f, in.Flags, in.Caller.Pid), OpenFlags: b.openFlags()}
	return fuse.OK
}

func (b *bridge) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	h := b.handles.file(in.Fh)
	if h == nil {
		return nil, fuse.EBADF
	}
	if len(buf) < int(in.Size) {
		buf = make([]byte, in.Size)
	}
	n, err := h.file.Read(b.ctx(), buf[:in.Size], int64(in.Offset))
	if err != nil {
		return nil, b.status("read", "", err)
	}
	return fuse.ReadResultData(buf[:n]), fuse.OK
}

func (b *bridge) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	h := b.handles.file(in.Fh)
	if h == nil {
		return 0, fuse.EBADF
	}
	n, err := h.file.Write(b.ctx(), data, int64(in.Offset))
	b.touch(h.node)
	if err != nil && n == 0 {
		return 0, b.status("write", "", err)
	}
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		if err := b.killPriv(h.node, h.file); err != nil {
			return 0, b.status("write", "", err)
		}
	}
	return uint32(n), fuse.OK // a short write reports what was written
}

// Writev joins a write that arrived in pieces (the File has no vectored
// write).
func (b *bridge) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if len(data) == 1 {
		return b.Write(cancel, in, data[0])
	}
	var size int
	for _, d := range data {
		size += len(d)
	}
	buf := make([]byte, 0, size)
	for _, d := range data {
		buf = append(buf, d...)
	}
	return b.Write(cancel, in, buf)
}

func (b *bridge) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	h := b.handles.file(in.Fh)
	if h == nil {
		return fuse.EBADF
	}
	return b.status("flush", "", h.file.Flush(b.ctx(), in.LockOwner))
}

// Release closes the file; the layers drop every lock taken through it,
// which covers FUSE_RELEASE_FLOCK_UNLOCK.
func (b *bridge) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	h := b.handles.remove(in.Fh)
	if h == nil || h.file == nil {
		return
	}
	close(h.released)
	h.node.writer.CompareAndSwap(h, nil)
	h.mu.Lock()
	h.gone = true
	h.mu.Unlock()
	if err := h.file.Release(b.ctx()); err != nil {
		b.log.Warn("release failed", "ino", h.node.ino, "err", err)
	}
	b.nodes.setOpen(h.node, -1)
}

func (b *bridge) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	h := b.handles.file(in.Fh)
	if h == nil {
		return fuse.EBADF
	}
	return b.status("fsync", "", h.file.Fsync(b.ctx(), in.FsyncFlags&1 != 0))
}

func (b *bridge) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	h := b.handles.file(in.Fh)
	if h == nil {
		return fuse.EBADF
	}
	err := h.file.Fallocate(b.ctx(), in.Mode, int64(in.Offset), int64(in.Length))
	b.touch(h.node)
	return b.status("fallocate", "", err)
}
