package posix

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// Pending marks (see layer.HealStore). An inode that some replicas of its
// set are known to miss carries XattrPending, a little-endian uint64 mask
// of those replicas, and has an entry in the heal index: a file named by
// its gfid in HealDir whose content is the inode's path when it was
// marked, rewritten when the inode or a directory above it is renamed
// (reindex).
//
// A modifying operation with pending replicas marks its inode (the inode
// itself for attribute, xattr and data changes; the parent directory, or
// both parents for a rename, for changes of names) before it runs, and
// holds the inode's mark lock until it is done. ClearPending takes the same
// lock and clears only if the inode's ctime is the one the healer saw, so a
// change that lands while the healer copies is never lost.

// XattrPending holds an inode's pending mask.
const XattrPending = "trusted.mortar.pending"

// HealDir is the heal index, inside the hidden directory.
const HealDir = HiddenDir + "/heal"

// markLocks serialises marking against clearing, per inode.
type markLocks struct {
	seed  maphash.Seed
	locks [64]sync.Mutex
}

func (m *markLocks) of(g layer.Gfid) *sync.Mutex {
	return &m.locks[maphash.Bytes(m.seed, g[:])%uint64(len(m.locks))]
}

// lockBoth locks the mark locks of two inodes in a fixed order and returns
// the unlock function.
func (m *markLocks) lockBoth(a, b layer.Gfid) func() {
	la, lb := m.of(a), m.of(b)
	if la == lb {
		la.Lock()
		return la.Unlock
	}
	if uintptrOf(la) > uintptrOf(lb) {
		la, lb = lb, la
	}
	la.Lock()
	lb.Lock()
	return func() { lb.Unlock(); la.Unlock() }
}

func noop() {}

func uintptrOf(m *sync.Mutex) uintptr { return uintptr(unsafe.Pointer(m)) }

// inode names an inode for marking, by its /proc path (which reaches it
// without following a final symlink through the l* calls) or, if fd >= 0,
// by an open descriptor; path is its volume path.
type inode struct {
	proc string
	fd   int
	path string
}

func (ino inode) gfid(s *Store) (layer.Gfid, error) { return s.gfidOf(ino.proc, ino.fd) }

// pending reads the inode's mask (0 if unmarked).
func (ino inode) pending() (uint64, error) { return ino.u64(XattrPending) }

// setPending writes the inode's mask, removing the xattr for 0.
func (ino inode) setPending(m uint64) error { return ino.setU64(XattrPending, m) }

// u64 reads a little-endian uint64 xattr of the inode (0 if it has none,
// or one that is not 8 bytes long: not ours).
func (ino inode) u64(name string) (uint64, error) {
	var b [8]byte
	var n int
	var err error
	if ino.fd >= 0 {
		n, err = unix.Fgetxattr(ino.fd, name, b[:])
	} else {
		n, err = unix.Lgetxattr(ino.proc, name, b[:])
	}
	switch {
	case err == unix.ENODATA || err == unix.ERANGE:
		return 0, nil
	case err != nil:
		return 0, err
	case n != 8:
		return 0, nil
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// setU64 writes a little-endian uint64 xattr of the inode, removing it
// for 0.
func (ino inode) setU64(name string, v uint64) error {
	if v == 0 {
		var err error
		if ino.fd >= 0 {
			err = unix.Fremovexattr(ino.fd, name)
		} else {
			err = unix.Lremovexattr(ino.proc, name)
		}
		if err == unix.ENODATA {
			return nil
		}
		return err
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	if ino.fd >= 0 {
		return unix.Fsetxattr(ino.fd, name, b[:], 0)
	}
	return unix.Lsetxattr(ino.proc, name, b[:], 0)
}

// markLocked adds mask to the marks of ino, whose gfid is g, and lists it
// in the heal index. The caller holds g's mark lock.
func (s *Store) markLocked(ino inode, g layer.Gfid, mask uint64) error {
	cur, err := ino.pending()
	if err != nil {
		return err
	}
	if cur|mask != cur {
		if err := ino.setPending(cur | mask); err != nil {
			return err
		}
	}
	s.indexing.RLock() // see reindex
	defer s.indexing.RUnlock()
	return s.indexAdd(g, func() string { return s.pathNow(ino, g) }, cur != 0)
}

// pathNow is where inode g is in the brick now: the path its operation
// resolved, unless a rename moved it (or a directory above it) since. The
// kernel knows where a descriptor's inode is (/proc/self/fd): the
// operation's own descriptor, or one opened on the name it resolved
// (which must still hold g: an inode renamed away from it is left to the
// rename's reindex). Marks and reindex order themselves with s.indexing.
// The operation's path stands when the kernel's cannot be had.
func (s *Store) pathNow(ino inode, g layer.Gfid) string {
	fdPath, rest := ino.proc, ""
	if ino.fd >= 0 {
		fdPath = procFd(ino.fd)
	} else if i := strings.Index(ino.proc, "/fd/"); i >= 0 {
		if j := strings.IndexByte(ino.proc[i+4:], '/'); j >= 0 {
			fdPath, rest = ino.proc[:i+4+j], ino.proc[i+4+j+1:]
		}
	}
	if rest != "" && rest != "." { // a name in a directory: the inode's own descriptor
		dirfd, err := strconv.Atoi(fdPath[strings.LastIndexByte(fdPath, '/')+1:])
		if err != nil {
			return ino.path
		}
		fd, err := unix.Openat(dirfd, rest, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return ino.path
		}
		defer unix.Close(fd)
		var got layer.Gfid
		if n, err := unix.Getxattr(procFd(fd), XattrGfid, got[:]); err != nil || n != len(got) || got != g {
			return ino.path
		}
		fdPath, rest = procFd(fd), ""
	}
	if fdPath == "" {
		return ino.path
	}
	target, err := os.Readlink(fdPath)
	root := s.realRoot
	switch {
	case err != nil || root == "" || strings.HasSuffix(target, " (deleted)"):
		return ino.path
	case target == root:
		target = "/"
	case strings.HasPrefix(target, root+"/"):
		target = target[len(root):]
	default:
		return ino.path // not in the brick (a bind mount, a chroot...)
	}
	if layer.CheckPath(target) != nil {
		return ino.path
	}
	return target
}

// indexAdd lists g in the heal index, at the path path tells (asked
// only when an entry is written). If it was marked already its entry
// exists (or is being rewritten by the healer) and only a missing one is
// made; a stale entry from before is given the current path.
func (s *Store) indexAdd(g layer.Gfid, path func() string, marked bool) error {
	name := hex.EncodeToString(g[:])
	if marked {
		var st unix.Stat_t
		if err := unix.Fstatat(s.healfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			return nil
		}
	}
	return s.writeEntry(name, path())
}

// entryTmp numbers the files index entries are written to before they
// take their names.
var entryTmp atomic.Uint64

// writeEntry makes the index entry name record path, atomically: a
// reader never sees it empty or half written (the healer drops an entry
// without a path, and the inode's marks would then wait for a full heal).
func (s *Store) writeEntry(name, path string) error {
	tmp := fmt.Sprintf("%s.tmp%d", name, entryTmp.Add(1)) // not a gfid: HealIndex skips it
	fd, err := unix.Openat(s.healfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = unix.Write(fd, []byte(path))
	unix.Close(fd)
	if err == nil {
		err = unix.Renameat(s.healfd, tmp, s.healfd, name)
	}
	if err != nil {
		unix.Unlinkat(s.healfd, tmp, 0)
	}
	return err
}

// pend marks the inodes an operation changes for the Txn in ctx, and
// returns the function that unlocks them when the operation is done. With
// no pending replicas it costs nothing.
func (s *Store) pend(ctx context.Context, inodes ...inode) (func(), error) {
	mask := layer.TxnFrom(ctx).Pending
	if mask == 0 {
		return noop, nil
	}
	gfids := make([]layer.Gfid, len(inodes))
	for i, ino := range inodes {
		g, err := ino.gfid(s)
		if err != nil {
			return noop, err
		}
		gfids[i] = g
	}
	var unlock func()
	switch len(inodes) {
	case 1:
		l := s.marks.of(gfids[0])
		l.Lock()
		unlock = l.Unlock
	case 2:
		unlock = s.marks.lockBoth(gfids[0], gfids[1])
	default:
		panic("pend: one or two inodes")
	}
	for i, ino := range inodes {
		if err := s.markLocked(ino, gfids[i], mask); err != nil {
			unlock()
			return noop, err
		}
	}
	return unlock, nil
}

// holdSelf holds the inode a names (at path) for a change of it: while a
// migration's freeze of it is over (holdPath), and marked for the
// operation's pending replicas (pend). release lets both go.
func (s *Store) holdSelf(ctx context.Context, a at, path string) (release func(), err error) {
	done, err := s.holdPath(ctx, a)
	if err != nil {
		return nil, err
	}
	unlock, err := s.pend(ctx, self(a, path))
	if err != nil {
		done()
		return nil, err
	}
	return func() { unlock(); done() }, nil
}

// self is the inode a names, for operations that change it.
func self(a at, path string) inode { return inode{proc: procAt(a.dir, a.name), fd: -1, path: path} }

// parent is the directory holding a's name, for operations that change
// names in it.
func parent(a at, path string) inode {
	dir, _ := layer.Split(path)
	if a.isRoot() {
		dir = "/"
	}
	return inode{proc: procFd(a.dir) + "/.", fd: -1, path: dir}
}

// HealIndex lists up to max entries of the heal index after gfid after.
func (s *Store) HealIndex(ctx context.Context, after layer.Gfid, max int) ([]layer.HealEntry, error) {
	names, err := s.indexNames()
	if err != nil {
		return nil, err
	}
	start := ""
	if !after.IsZero() {
		start = hex.EncodeToString(after[:])
	}
	var out []layer.HealEntry
	for _, name := range names {
		if name <= start && start != "" {
			continue
		}
		var g layer.Gfid
		if b, err := hex.DecodeString(name); err != nil || len(b) != len(g) {
			continue // not ours
		} else {
			copy(g[:], b)
		}
		e := layer.HealEntry{Gfid: g, Path: s.indexPath(name)}
		e.Pending = s.currentMark(e.Path, g)
		out = append(out, e)
		if len(out) >= max {
			break
		}
	}
	return out, nil
}

func (s *Store) indexNames() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.root, HealDir))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// indexPath reads the path an index entry records ("" if unreadable).
func (s *Store) indexPath(name string) string {
	fd, err := unix.Openat(s.healfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	buf := make([]byte, layer.PathMax+1)
	n, err := unix.Read(fd, buf)
	if err != nil || n > layer.PathMax || layer.CheckPath(string(buf[:n])) != nil {
		return ""
	}
	return string(buf[:n])
}

// currentMark returns the marks of the inode at path if it still is g.
func (s *Store) currentMark(path string, g layer.Gfid) uint64 {
	if path == "" {
		return 0
	}
	a, err := s.resolve(path, false)
	if err != nil {
		return 0
	}
	defer a.close()
	ino := self(a, path)
	if cur, err := ino.gfid(s); err != nil || cur != g {
		return 0
	}
	m, _ := ino.pending()
	return m
}

// inodeAt resolves path for MarkPending and ClearPending: the inode must
// have gfid g (any if g is zero), or ESTALE. The caller closes the at.
func (s *Store) inodeAt(path string, g layer.Gfid) (at, inode, layer.Gfid, error) {
	a, err := s.resolve(path, false)
	if err != nil {
		return at{}, inode{}, layer.Gfid{}, err
	}
	ino := self(a, path)
	cur, err := ino.gfid(s)
	if err == nil && !g.IsZero() && cur != g {
		err = unix.ESTALE
	}
	if err != nil {
		a.close()
		return at{}, inode{}, layer.Gfid{}, err
	}
	return a, ino, cur, nil
}

// MarkPending adds mask to the marks of the inode at path.
func (s *Store) MarkPending(ctx context.Context, path string, g layer.Gfid, mask uint64) error {
	a, ino, cur, err := s.inodeAt(path, g)
	if err != nil {
		return err
	}
	defer a.close()
	l := s.marks.of(cur)
	l.Lock()
	defer l.Unlock()
	return s.markLocked(ino, cur, mask)
}

// ClearPending removes mask from the marks of the inode at path if it is
// still g with ctime ctime.
func (s *Store) ClearPending(ctx context.Context, path string, g layer.Gfid, mask uint64, ctime layer.Timespec) error {
	if g.IsZero() {
		return unix.EINVAL
	}
	a, ino, _, err := s.inodeAt(path, g)
	if err != nil {
		return err
	}
	defer a.close()
	l := s.marks.of(g)
	l.Lock()
	defer l.Unlock()
	var st unix.Stat_t
	if err := unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Ctim.Sec != ctime.Sec || uint32(st.Ctim.Nsec) != ctime.Nsec {
		return unix.ESTALE
	}
	m, err := ino.pending()
	if err != nil {
		return err
	}
	left := m &^ mask
	if err := ino.setPending(left); err != nil {
		return err
	}
	if m&layer.Dirty != 0 && left&layer.Dirty == 0 {
		s.dropUndo(g) // what its writes replaced is no longer needed
	}
	if left != 0 {
		return nil
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		s.dropRemovals(g)
	}
	return s.dropEntryLocked(g, "")
}

// reindex keeps the heal index in line with the rename of inode g (a
// directory if dir) from oldpath to newpath. Index entries record the path
// at marking time and the healer finds inodes by path: an entry naming a
// path a rename took away loses its inode, which keeps its marks but is
// healed by nothing short of a full crawl. So the renamed inode's entry,
// and a directory's entries under it, are given the new path. Best effort:
// an entry left with the old path is what it was before.
func (s *Store) reindex(g layer.Gfid, dir bool, oldpath, newpath string) {
	var names []string
	var lerr error
	if dir {
		// A mark whose entry is written after this barrier took its path
		// after the rename (pathNow); one written before it is listed.
		s.indexing.Lock()
		names, lerr = s.indexNames()
		s.indexing.Unlock()
	}
	if err := s.repath(g, oldpath, newpath, false); err != nil {
		s.log.Warn("heal index entry not moved", "brick", s.root, "gfid", g, "from", oldpath, "to", newpath, "err", err)
	}
	if !dir {
		return
	}
	if lerr != nil {
		s.log.Warn("heal index unreadable", "brick", s.root, "err", lerr)
		return
	}
	for _, name := range names {
		var c layer.Gfid
		if b, err := hex.DecodeString(name); err != nil || len(b) != len(c) {
			continue // not an entry
		} else {
			copy(c[:], b)
		}
		if c == g {
			continue
		}
		if err := s.repath(c, oldpath, newpath, true); err != nil {
			s.log.Warn("heal index entry not moved", "brick", s.root, "gfid", c, "from", oldpath, "to", newpath, "err", err)
		}
	}
}

// repath rewrites g's index entry if it records oldpath (or, with under,
// a path under oldpath) to the same place under newpath. It holds g's mark
// lock, as marking and clearing do, and replaces the entry atomically: a
// scan never reads half a path.
func (s *Store) repath(g layer.Gfid, oldpath, newpath string, under bool) error {
	l := s.marks.of(g)
	l.Lock()
	defer l.Unlock()
	name := hex.EncodeToString(g[:])
	cur := s.indexPath(name)
	var p string
	switch {
	case cur == "":
		return nil // no entry (the common case), or an unreadable one
	case !under && cur == oldpath:
		p = newpath
	case under && strings.HasPrefix(cur, oldpath+"/"):
		p = newpath + cur[len(oldpath):]
	default:
		return nil
	}
	if layer.CheckPath(p) != nil {
		return nil // too long: left as it was
	}
	return s.writeEntry(name, p)
}

// DropHealEntry removes g's heal index entry if it still records path
// (any if path is empty), under g's mark lock: a rename's reindex may
// have moved it since the healer read it.
func (s *Store) DropHealEntry(ctx context.Context, g layer.Gfid, path string) error {
	l := s.marks.of(g)
	l.Lock()
	defer l.Unlock()
	return s.dropEntryLocked(g, path)
}

// dropEntryLocked is DropHealEntry with g's mark lock held.
func (s *Store) dropEntryLocked(g layer.Gfid, path string) error {
	name := hex.EncodeToString(g[:])
	if path != "" && s.indexPath(name) != path {
		return nil // moved meanwhile (or gone)
	}
	err := unix.Unlinkat(s.healfd, name, 0)
	if err == unix.ENOENT {
		return nil
	}
	return err
}
