// Package posix is the storage at the bottom of every brick: a layer.Layer
// over a plain local directory. Files live at their own paths with their own
// contents, so an operator can still read a brick with ls and cp.
//
// # Safety
//
// Every path is checked with layer.CheckPath, its parent directory is opened
// with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS)
// from a descriptor of the brick root, and the final name is handled with
// *at system calls that never follow a symlink. The brick never follows a
// symlink at all: the client kernel resolves them.
//
// # Mortar's own state
//
// Each inode carries its gfid in the xattr trusted.mortar.gfid; the brick
// root carries the volume id in trusted.mortar.volume-id (see Mark);
// distribute's pointer files carry trusted.mortar.linkto. The directory
// .mortar at the brick root holds mortar's private state (the heal index,
// HealDir, the gfid index, IDDir, and the removal records, RemovedDir)
// and is invisible through the Layer: lookups get ENOENT, creations EPERM, listings skip it, except that
// lookups, reading opens and links may name an inode by its id
// (layer.IDPath, files and directories). Callers may only see and change
// xattrs of the user. namespace.
package posix

import (
	"fmt"
	"hash/maphash"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// Names of mortar's own xattrs and of the hidden directory.
const (
	XattrGfid     = "trusted.mortar.gfid"
	XattrVolumeID = "trusted.mortar.volume-id"
	XattrLinkto   = "trusted.mortar.linkto"
	HiddenDir     = ".mortar"
)

// linktoMode is the mode of distribute's pointer files.
const linktoMode = unix.S_IFREG | 01000

// Options configure a Store.
type Options struct {
	// VolumeID is the volume the brick must belong to (see Mark).
	VolumeID string
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// Arbiter makes an arbiter brick: names, metadata and heal records,
	// but writes of file data are accepted and dropped.
	Arbiter bool
	// Disperse makes a brick of a disperse set: its regular files are
	// fragments, and their size is the file's size recorded with each
	// write and truncate (XattrSize), not the fragment's length.
	Disperse bool
	// Reserve is the space the brick keeps for marks and indexes
	// (reserve.go; the volume's storage.reserve).
	Reserve Reserve
	// FreezeTimeout bounds a migration freeze that is never thawed
	// (default DefaultFreezeTimeout; see XattrMigrate).
	FreezeTimeout time.Duration
}

// Store is the posix storage of one brick. It implements layer.Layer.
type Store struct {
	root   string
	rootfd int // O_PATH|O_DIRECTORY
	// indexing orders index entries written by marks (shared) with a
	// rename's listing of the index (reindex): see pathNow.
	indexing sync.RWMutex
	// realRoot is the root's path as the kernel shows descriptors in it
	// (symbolic links resolved): pathNow takes it off their paths.
	realRoot  string
	healfd    int           // the heal index directory, O_PATH|O_DIRECTORY
	idfd      int           // the gfid index directory (IDDir), O_PATH|O_DIRECTORY
	removedfd int           // the removal records (RemovedDir), O_PATH|O_DIRECTORY
	ids       markLocks     // orders the changes of one gfid's index entry
	swept     chan struct{} // closed when the start's orphan sweep is done
	stop      chan struct{} // closed by Close
	stopOnce  sync.Once
	log       *slog.Logger
	arbiter   bool
	disperse  bool
	marks     markLocks
	undo      undoKeeper // what a disperse brick's Dirty writes replaced (undo.go)
	mig       migRegistry
	reserve   atomic.Uint64 // free bytes kept for marks and indexes (reserve.go)
	// naming is held shared while a new inode is made and given its
	// gfid, and exclusively to give a gfid to an inode found without one:
	// a lookup racing a create must not take the new inode for one made
	// on the brick by hand and give it a gfid of its own.
	naming sync.RWMutex
}

var _ layer.Layer = (*Store)(nil)

// New opens the brick at root, which must be a directory marked (by Mark)
// as a brick of volume opts.VolumeID.
func New(root string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	switch err {
	case nil:
	case unix.ENOENT:
		return nil, fmt.Errorf("brick %s does not exist: %w", root, err)
	case unix.ENOTDIR:
		return nil, fmt.Errorf("brick %s is not a directory: %w", root, err)
	default:
		return nil, fmt.Errorf("open brick %s: %w", root, err)
	}
	vol, err := getxattrString(procFd(fd), XattrVolumeID, true)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("read volume id of brick %s: %w", root, err)
	}
	switch {
	case vol == "":
		err = fmt.Errorf("%s is not a brick of any volume", root)
	case vol != opts.VolumeID:
		err = fmt.Errorf("brick %s belongs to volume %s, not %s", root, vol, opts.VolumeID)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Mkdirat(fd, HiddenDir, 0o700); err != nil && err != unix.EEXIST {
		unix.Close(fd)
		return nil, fmt.Errorf("brick %s: create %s: %w", root, HiddenDir, err)
	}
	g := layer.RootGfid
	err = unix.Setxattr(procFd(fd), XattrGfid, g[:], unix.XATTR_CREATE)
	if err != nil && err != unix.EEXIST {
		unix.Close(fd)
		return nil, fmt.Errorf("brick %s: set root gfid: %w", root, err)
	}
	if err := unix.Mkdirat(fd, HealDir, 0o700); err != nil && err != unix.EEXIST {
		unix.Close(fd)
		return nil, fmt.Errorf("brick %s: create %s: %w", root, HealDir, err)
	}
	healfd, err := unix.Openat(fd, HealDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("brick %s: open %s: %w", root, HealDir, err)
	}
	idfd, err := openIDs(fd)
	if err != nil {
		unix.Close(healfd)
		unix.Close(fd)
		return nil, fmt.Errorf("brick %s: open %s: %w", root, IDDir, err)
	}
	removedfd, err := openRemoved(fd)
	if err != nil {
		unix.Close(idfd)
		unix.Close(healfd)
		unix.Close(fd)
		return nil, fmt.Errorf("brick %s: open %s: %w", root, RemovedDir, err)
	}
	s := &Store{root: root, rootfd: fd, healfd: healfd, idfd: idfd, removedfd: removedfd, log: log, arbiter: opts.Arbiter, disperse: opts.Disperse,
		swept: make(chan struct{}), stop: make(chan struct{})}
	s.realRoot, _ = os.Readlink(procFd(fd)) // "": pathNow keeps operations' paths
	s.marks.seed = maphash.MakeSeed()
	s.ids.seed = maphash.MakeSeed()
	if err := s.checkIDsAtStart(); err != nil {
		s.Close()
		return nil, err
	}
	s.ApplyReserve(opts.Reserve)
	s.mig.freezeTimeout = opts.FreezeTimeout
	if s.mig.freezeTimeout <= 0 {
		s.mig.freezeTimeout = DefaultFreezeTimeout
	}
	return s, nil
}

// Root returns the brick directory.
func (s *Store) Root() string { return s.root }

// Close releases the brick root. Files still open stay usable.
func (s *Store) Close() error {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.swept
	unix.Close(s.healfd)
	unix.Close(s.idfd)
	unix.Close(s.removedfd)
	return unix.Close(s.rootfd)
}

// procFd is the /proc path of an open descriptor; following it reaches the
// descriptor's inode (also for O_PATH descriptors).
func procFd(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// procAt is the /proc path of name inside the directory open as dirfd; use
// it with the l*xattr calls, which do not follow a final symlink.
func procAt(dirfd int, name string) string { return procFd(dirfd) + "/" + name }

// toAttr converts a stat result; Gfid and Linkto are filled by the caller.
// A non-directory's link in the gfid index is not a name: it is not
// counted (see IDDir).
func toAttr(st *unix.Stat_t) layer.Attr {
	nlink := uint32(st.Nlink)
	if nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		nlink--
	}
	return layer.Attr{
		Mode:    st.Mode,
		Nlink:   nlink,
		Uid:     st.Uid,
		Gid:     st.Gid,
		Rdev:    st.Rdev,
		Size:    uint64(st.Size),
		Blocks:  uint64(st.Blocks),
		Blksize: uint32(st.Blksize),
		Atime:   layer.Timespec{Sec: st.Atim.Sec, Nsec: uint32(st.Atim.Nsec)},
		Mtime:   layer.Timespec{Sec: st.Mtim.Sec, Nsec: uint32(st.Mtim.Nsec)},
		Ctime:   layer.Timespec{Sec: st.Ctim.Sec, Nsec: uint32(st.Ctim.Nsec)},
	}
}

// isLinkto reports whether a stat result looks like a distribute pointer
// file, whose linkto xattr is then worth reading.
func isLinkto(mode uint32) bool { return mode == linktoMode }
