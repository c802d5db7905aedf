package posix

import (
	"context"
	"errors"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// openFlags are the open(2) flags callers may pass; the rest (O_CREAT,
// O_PATH, O_TMPFILE, O_ASYNC, ...) are dropped or refused.
const openFlags = unix.O_ACCMODE | unix.O_APPEND | unix.O_TRUNC | unix.O_EXCL |
	unix.O_DIRECT | unix.O_SYNC | unix.O_DSYNC | unix.O_NOATIME | unix.O_DIRECTORY |
	unix.O_LARGEFILE

// alwaysFlags are added to every open: never follow, never block on a fifo,
// never become a controlling terminal.
const alwaysFlags = unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC

// Create creates and opens a regular file. Without O_EXCL an existing file
// is opened (and truncated with O_TRUNC) instead; it keeps its owner and
// gfid.
func (s *Store) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	a, err := s.resolve(path, true)
	if err != nil {
		return nil, layer.Attr{}, err
	}
	defer a.close()
	flags := int(in.Flags) & openFlags
	if a.isRoot() {
		if flags&unix.O_EXCL != 0 {
			return nil, layer.Attr{}, unix.EEXIST
		}
		return nil, layer.Attr{}, unix.EISDIR
	}
	unlock, err := s.pendCreate(ctx, a, path, flags)
	if err != nil {
		return nil, layer.Attr{}, err
	}
	defer unlock()
	for i := 0; ; i++ {
		f, attr, err := s.createNew(a, flags, in)
		if f != nil {
			f.path = path
		}
		if err != unix.EEXIST || flags&unix.O_EXCL != 0 || i == 4 {
			return f, attr, err
		}
		// It exists: open it, unless it vanished meanwhile.
		f, _, err = s.openTrunc(ctx, a, flags)
		if err == unix.ENOENT {
			continue
		}
		if err != nil {
			return nil, layer.Attr{}, err
		}
		if f.isDir {
			f.close()
			return nil, layer.Attr{}, unix.EISDIR
		}
		f.path = path
		if err := s.truncatedFragment(f, flags); err != nil {
			f.close()
			return nil, layer.Attr{}, err
		}
		if attr, err = s.attrFd(f.fd); err != nil {
			f.close()
			return nil, layer.Attr{}, err
		}
		return f, attr, nil
	}
}

// createNew creates a's name exclusively and gives it owner, mode, gfid
// and index entry.
func (s *Store) createNew(a at, flags int, in layer.CreateIn) (*file, layer.Attr, error) {
	if err := s.roomyAt(a); err != nil {
		return nil, layer.Attr{}, err
	}
	o, err := ownerIn(a.dir, in.Owner)
	if err != nil {
		return nil, layer.Attr{}, err
	}
	s.naming.RLock()
	made, final := createMode(in.Mode&07777, false)
	fd, err := unix.Openat(a.dir, a.name,
		flags&^unix.O_DIRECT|unix.O_CREAT|unix.O_EXCL|alwaysFlags, made)
	if err != nil {
		s.naming.RUnlock()
		return nil, layer.Attr{}, err
	}
	f := s.newFile(fd, flags, false)
	var st unix.Stat_t
	err = initFd(fd, o, in.Mode&07777, final)
	if err == nil {
		err = s.idLink(procAt(a.dir, a.name), o.gfid)
	}
	s.naming.RUnlock()
	if err == nil {
		err = statMade(fd, in.Mode&07777, &st)
	}
	if err != nil {
		f.close()
		s.unmake(a, o.gfid)
		return nil, layer.Attr{}, err
	}
	f.mig = s.mig.acquire(keyOf(&st))
	attr := toAttr(&st)
	attr.Gfid = o.gfid
	return f, attr, nil
}

// Open opens an existing regular file or directory (read-only). A file
// opened only to be read may be named by its id (layer.IDPath).
func (s *Store) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	if flags&unix.O_CREAT != 0 {
		return nil, unix.EINVAL
	}
	resolve := s.resolve
	if flags&(unix.O_ACCMODE|unix.O_TRUNC) == unix.O_RDONLY {
		resolve = func(p string, _ bool) (at, error) { return s.resolveSource(p) }
	}
	a, err := resolve(path, false)
	if err != nil {
		return nil, err
	}
	defer a.close()
	if flags&unix.O_TRUNC != 0 {
		unlock, err := s.pend(ctx, self(a, path))
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	f, ptr, err := s.openTrunc(ctx, a, int(flags)&openFlags)
	if err != nil {
		return nil, err
	}
	if err := s.truncatedFragment(f, int(flags)); err != nil {
		f.close()
		return nil, err
	}
	if ptr {
		// A distribute pointer file holds no data: opening it would show
		// an empty file. EREMOTE tells distribute to follow the pointer.
		if v, err := fgetxattr(f.fd, XattrLinkto); err == nil && len(v) > 0 {
			f.close()
			return nil, unix.EREMOTE
		}
	}
	f.path = path
	return f, nil
}

// pendCreate marks what a create changes: the parent's names, and, for
// an O_TRUNC create of a file that exists, the file's data too (a
// replica that misses the create must get the truncation healed, not
// only the name it already has).
func (s *Store) pendCreate(ctx context.Context, a at, path string, flags int) (func(), error) {
	dir := parent(a, path)
	if flags&unix.O_TRUNC == 0 || flags&unix.O_EXCL != 0 || layer.TxnFrom(ctx).Pending == 0 {
		return s.pend(ctx, dir)
	}
	var st unix.Stat_t
	if unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return s.pend(ctx, dir)
	}
	unlock, err := s.pend(ctx, dir, self(a, path))
	if errors.Is(err, unix.ENOENT) { // removed meanwhile: a new file, then
		return s.pend(ctx, dir)
	}
	return unlock, err
}

// openTrunc is openAt, holding the open while the inode is frozen for a
// migration if flags truncate it.
func (s *Store) openTrunc(ctx context.Context, a at, flags int) (*file, bool, error) {
	if flags&unix.O_TRUNC == 0 {
		return s.openAt(a, flags)
	}
	done, err := s.holdPath(ctx, a)
	if err != nil {
		return nil, false, err
	}
	defer done()
	return s.openAt(a, flags)
}

// openAt opens the existing regular file or directory a names, and says
// whether its mode is that of a distribute pointer file. It checks the type
// first so that fifos and devices on the brick are never opened.
func (s *Store) openAt(a at, flags int) (*file, bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, false, err
	}
	isDir := false
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		if flags&unix.O_ACCMODE != unix.O_RDONLY {
			return nil, false, unix.EISDIR
		}
		isDir = true
	case unix.S_IFLNK:
		return nil, false, unix.ELOOP
	default:
		return nil, false, unix.ENXIO
	}
	fd, err := unix.Openat(a.dir, a.name, flags&^unix.O_DIRECT|alwaysFlags, 0)
	if err != nil {
		return nil, false, err
	}
	f := s.newFile(fd, flags, isDir)
	if !isDir {
		f.mig = s.mig.acquire(keyOf(&st))
	}
	return f, isLinkto(st.Mode), nil
}

// file is an open file of the store. With O_DIRECT, I/O that the brick
// file system refuses for alignment goes through a second, buffered
// descriptor opened on first need.
type file struct {
	s      *Store
	fd     int
	flags  int
	direct bool
	isDir  bool
	path   string    // volume path at open, for heal index entries
	mig    *migEntry // the inode's migration state (nil for directories)

	mu  sync.Mutex
	buf int // buffered descriptor, -1 until needed
}

var _ layer.File = (*file)(nil)

// newFile wraps fd; with O_DIRECT in flags it turns direct I/O on if the
// file system supports it (fcntl, so that a refused O_DIRECT never leaves
// a created file behind).
func (s *Store) newFile(fd, flags int, isDir bool) *file {
	f := &file{s: s, fd: fd, flags: flags, isDir: isDir, buf: -1}
	if flags&unix.O_DIRECT != 0 && !isDir {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err == nil {
			_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_DIRECT)
		}
		f.direct = err == nil
		if err != nil {
			s.log.Debug("O_DIRECT refused, using buffered I/O", "brick", s.root, "err", err)
		}
	}
	return f
}

func (f *file) close() {
	f.s.mig.release(f.mig)
	f.mig = nil
	unix.Close(f.fd)
	if f.buf >= 0 {
		unix.Close(f.buf)
	}
}

// buffered returns the buffered descriptor of a direct file.
func (f *file) buffered() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.buf < 0 {
		flags := f.flags&^(unix.O_DIRECT|unix.O_TRUNC|unix.O_EXCL|unix.O_NOFOLLOW) |
			unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
		fd, err := unix.Open(procFd(f.fd), flags, 0)
		if err != nil {
			return -1, err
		}
		f.buf = fd
	}
	return f.buf, nil
}

// aligned reports whether direct I/O of p at off may work (512 is the
// smallest logical block size; larger ones fail with EINVAL and retry).
func aligned(p []byte, off int64) bool {
	const a = 512
	return len(p) > 0 && off%a == 0 && len(p)%a == 0 && uintptr(unsafe.Pointer(&p[0]))%a == 0
}

// io does one pread or pwrite, on the buffered descriptor when direct I/O
// is refused.
func (f *file) io(rw func(int, []byte, int64) (int, error), p []byte, off int64) (int, error) {
	if f.direct && !aligned(p, off) {
		fd, err := f.buffered()
		if err != nil {
			return 0, err
		}
		return rw(fd, p, off)
	}
	n, err := rw(f.fd, p, off)
	if err == unix.EINVAL && f.direct {
		fd, berr := f.buffered()
		if berr != nil {
			return 0, berr
		}
		return rw(fd, p, off)
	}
	return n, err
}

// Read reads len(p) bytes at off, fewer only at end of file.
func (f *file) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if err := f.mig.enter(ctx, opRead); err != nil {
		return 0, err
	}
	defer f.mig.leave()
	return readFull(func(p []byte, off int64) (int, error) { return f.io(unix.Pread, p, off) }, p, off)
}

// ino names the open file for pending marks.
func (f *file) ino() inode { return inode{fd: f.fd, path: f.path} }

// Write writes all of p at off (at the end of file with O_APPEND). An
// arbiter brick drops the data.
func (f *file) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return f.write(ctx, len(p), []span{{off, int64(len(p))}}, func() (int, error) { return f.pwriteAll(p, off) })
}

// WriteGap writes p[:gap.At] at off and p[gap.At:] past the gap, in one
// request (layer.GapWriter): one pending mark, one size recorded.
func (f *file) WriteGap(ctx context.Context, p []byte, off int64, gap layer.Gap) (int, error) {
	if int(gap.At) > len(p) {
		return 0, unix.EINVAL
	}
	spans := []span{{off, int64(gap.At)}, {off + int64(gap.At) + int64(gap.Len), int64(len(p)) - int64(gap.At)}}
	return f.write(ctx, len(p), spans, func() (int, error) {
		n, err := f.pwriteAll(p[:gap.At], off)
		if err != nil {
			return n, err
		}
		m, err := f.pwriteAll(p[gap.At:], off+int64(gap.At)+int64(gap.Len))
		return n + m, err
	})
}

// write runs do, a write of n bytes over spans, with the inode marked for
// the Txn in ctx, keeping what the spans held first where the write asks
// for it (undo.go), and records the file size a disperse write carries.
// An arbiter brick drops the data. A write of no bytes takes no room:
// below the reserve it still records its marks (replicate's Missed marks
// so).
func (f *file) write(ctx context.Context, n int, spans []span, do func() (int, error)) (int, error) {
	if !f.s.arbiter && n > 0 { // refused before anything is marked
		if err := f.s.roomy(); err != nil {
			return 0, err
		}
	}
	if err := f.mig.enter(ctx, opModify); err != nil {
		return 0, err
	}
	defer f.mig.leave()
	unlock, err := f.s.pend(ctx, f.ino())
	if err != nil {
		return 0, err
	}
	defer unlock()
	if f.s.arbiter {
		return n, nil
	}
	if f.keepsUndo(ctx) {
		if err := f.saveUndo(spans...); err != nil {
			return 0, err
		}
	} else {
		for _, sp := range spans {
			f.s.cutUndo(f.fd, sp.off, sp.off+sp.len)
		}
	}
	w, err := do()
	if err != nil {
		return w, err
	}
	return w, f.s.recordSize(ctx, f.ino(), false)
}

// pwriteAll writes all of p at off.
func (f *file) pwriteAll(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := f.io(unix.Pwrite, p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, unix.EIO
		}
		n += m
	}
	return n, nil
}

// Getattr answers also for a file moved away by a migration: it is a
// pointer now, and says so (Linkto).
func (f *file) Getattr(ctx context.Context) (layer.Attr, error) {
	if err := f.mig.enter(ctx, opStat); err != nil {
		return layer.Attr{}, err
	}
	defer f.mig.leave()
	return f.s.attrFd(f.fd)
}

// Setattr changes attributes through the descriptor.
func (f *file) Setattr(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	if err := f.mig.enter(ctx, opModify); err != nil {
		return layer.Attr{}, err
	}
	defer f.mig.leave()
	unlock, err := f.s.pend(ctx, f.ino())
	if err != nil {
		return layer.Attr{}, err
	}
	defer unlock()
	if err := f.s.checkFragmentTruncate(ctx, in); err != nil {
		return layer.Attr{}, err
	}
	if f.s.arbiter {
		in.Valid &^= layer.SetSize
	}
	if in.Valid&(layer.SetUid|layer.SetGid) != 0 {
		uid, gid := chownArgs(in)
		if err := unix.Fchown(f.fd, uid, gid); err != nil {
			return layer.Attr{}, err
		}
	}
	if in.Valid&layer.SetMode != 0 {
		if err := unix.Fchmod(f.fd, in.Mode&07777); err != nil {
			return layer.Attr{}, err
		}
	}
	if in.Valid&layer.SetSize != 0 {
		if err := f.truncate(in.Size); err != nil {
			return layer.Attr{}, err
		}
		if err := f.s.recordSize(ctx, f.ino(), true); err != nil {
			return layer.Attr{}, err
		}
	}
	if ts := utimes(in); ts != nil {
		if err := futimens(f.fd, ts); err != nil {
			return layer.Attr{}, err
		}
	}
	return f.s.attrFd(f.fd)
}

// truncate sets the size, also when the file was opened read-only (the
// client kernel has checked permissions already).
func (f *file) truncate(size uint64) error {
	if f.isDir {
		return unix.EISDIR
	}
	if int64(size) < 0 {
		return unix.EFBIG
	}
	f.s.cutUndo(f.fd, int64(size), -1)
	err := unix.Ftruncate(f.fd, int64(size))
	if (err != unix.EINVAL && err != unix.EBADF) || f.flags&unix.O_ACCMODE != unix.O_RDONLY {
		return err
	}
	fd, err := unix.Open(procFd(f.fd), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Ftruncate(fd, int64(size))
}

func (f *file) Fsync(ctx context.Context, datasync bool) error {
	if err := f.mig.enter(ctx, opRead); err != nil {
		return err
	}
	defer f.mig.leave()
	if datasync {
		return unix.Fdatasync(f.fd)
	}
	return unix.Fsync(f.fd)
}

func (f *file) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	if mode&unix.FALLOC_FL_PUNCH_HOLE == 0 && !f.s.arbiter {
		if err := f.s.roomy(); err != nil {
			return err
		}
	}
	if err := f.mig.enter(ctx, opModify); err != nil {
		return err
	}
	defer f.mig.leave()
	unlock, err := f.s.pend(ctx, f.ino())
	if err != nil {
		return err
	}
	defer unlock()
	if f.s.arbiter {
		return nil
	}
	return unix.Fallocate(f.fd, mode, off, length)
}

// Flush does nothing: storage keeps no locks.
func (f *file) Flush(ctx context.Context, owner uint64) error { return nil }

// Getlk fails: the locks layer above implements locks.
func (f *file) Getlk(ctx context.Context, owner uint64, lk layer.Lock) (layer.Lock, error) {
	return layer.Lock{}, unix.ENOLCK
}

// Setlk fails: the locks layer above implements locks.
func (f *file) Setlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool) error {
	return unix.ENOLCK
}

func (f *file) Release(ctx context.Context) error {
	f.close()
	return nil
}
