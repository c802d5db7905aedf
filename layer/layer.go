// Package layer defines the file-operation contract that every piece of
// mortar's data path implements: the brick's posix storage, the locks layer,
// the network client, distribute, and (later) replicate, disperse and the
// caches. A volume is a stack of layers; the FUSE bridge and the client
// library sit on top of the stack and call into it.
//
// # Paths
//
// Operations address inodes by path, relative to the volume root: "/" is the
// root, "/a/b" a child. Paths are clean (no ".", "..", empty or trailing
// components) and every component is at most NameMax bytes with no NUL or
// '/'. Layers that receive paths from the network must check them with
// CheckPath; the posix storage refuses anything that would resolve outside
// its brick directory whatever the layers above did.
//
// # Errors
//
// Operations return syscall.Errno values (or errors wrapping one) so that the
// FUSE bridge maps them 1:1 with ToErrno. Anything that is not an Errno
// becomes EIO at the edge.
//
// # Open files
//
// Open and Create return a File. A File belongs to the layer that returned
// it; layers that do not need per-file state return their child's File
// unchanged. Release must be called exactly once; after that the File is
// dead.
package layer

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// NameMax is the longest name a path component may have.
const NameMax = 255

// PathMax is the longest path an operation accepts.
const PathMax = 4096

// Gfid is the 128-bit identity of an inode, kept in an xattr on every brick
// that holds the inode. Directories have the same gfid on every brick.
type Gfid [16]byte

// RootGfid is the gfid of every volume's root directory.
var RootGfid = Gfid{15: 1}

// NewGfid returns a random gfid.
func NewGfid() Gfid {
	var g Gfid
	if _, err := rand.Read(g[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return g
}

// IsZero reports whether g is unset.
func (g Gfid) IsZero() bool { return g == Gfid{} }

// Ino folds the gfid into the inode number shown to applications. The root
// is always 1.
func (g Gfid) Ino() uint64 {
	if g == RootGfid {
		return 1
	}
	ino := binary.BigEndian.Uint64(g[:8]) ^ binary.BigEndian.Uint64(g[8:])
	if ino <= 1 {
		ino += 2
	}
	return ino
}

// IDPath is the path by which a brick reaches the inode with gfid g
// wherever its names are (the brick's gfid index): for lookups, opens for
// reading and, for a file, as the source of a link. It lies in the
// bricks' hidden directory, which clients never see listed or find by
// name; a brick without the inode answers ENOENT. A non-directory looked
// up by it has as Nlink the names it has (0 once they are all gone).
func IDPath(g Gfid) string { return "/.mortar/gfid/" + g.String() }

// XattrPath, read (Getxattr) on the IDPath of a directory, is the path
// where the brick holds that directory: heal moves a directory a sink
// holds under another name to the one the good copies give it, rather
// than making a second directory of one gfid. Bricks answer it for
// directories by their id alone (EINVAL for another path, ENOENT for an
// id of no directory they hold); it is never listed or set.
const XattrPath = "trusted.mortar.path"

func (g Gfid) String() string {
	h := hex.EncodeToString(g[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Timespec is a point in time with nanosecond precision.
type Timespec struct {
	Sec  int64
	Nsec uint32
}

// Attr is what stat(2) reports about an inode, plus mortar's own identity.
type Attr struct {
	Gfid    Gfid
	Mode    uint32 // file type bits (S_IFMT) and permission bits, as in stat(2)
	Nlink   uint32
	Uid     uint32
	Gid     uint32
	Rdev    uint64
	Size    uint64
	Blocks  uint64 // 512-byte blocks
	Blksize uint32
	Atime   Timespec
	Mtime   Timespec
	Ctime   Timespec

	// Linkto is set by storage on distribute's pointer files: the id of the
	// brick that holds the data. Distribute resolves and hides these; no
	// other layer should see a non-empty Linkto.
	Linkto string
	// Pending is set by storage: the replicas of the set that this copy
	// knows are behind it (see HealStore). Replicate consumes and clears
	// it; no layer above should see a non-zero Pending.
	Pending uint64
}

// IsDir reports whether a is a directory.
func (a *Attr) IsDir() bool { return a.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// IsReg reports whether a is a regular file.
func (a *Attr) IsReg() bool { return a.Mode&syscall.S_IFMT == syscall.S_IFREG }

// Entry is one directory entry with its attributes (readdirplus).
type Entry struct {
	Name string
	Attr Attr
	// Target is a symbolic link's target when the listing brings it
	// (storage reads it with the entry); "" means unknown: ask Readlink.
	// A symlink's target never changes, so it is good for as long as
	// the inode (Attr.Gfid) is.
	Target string
}

// DirPage is one page of a directory listing. Next is the cookie to pass to
// get the following page; EOF says there is none.
type DirPage struct {
	Entries []Entry
	Next    uint64
	EOF     bool
	// Missing, when not nil, says the listing lacks the names that a part
	// of the volume it cannot reach holds (ENOTCONN of a brick that is
	// down, for distribute): Entries are the reachable ones. ReadDirAll
	// fails with it; ReadDirReachable returns both.
	Missing error
}

// Owner gives a new inode its owner and identity.
type Owner struct {
	Uid, Gid uint32
	// Gfid is the identity to give the new inode. Zero lets the storage
	// choose; distribute sets it so that a directory has one gfid everywhere.
	Gfid Gfid
}

// CreateIn describes a file to create and open.
type CreateIn struct {
	Owner
	Flags uint32 // open(2) flags; O_CREAT is implied
	Mode  uint32 // permission bits
	// Data and Set make a file in one go (create-behind, NameLeaser): the
	// create then writes Data at offset 0 and makes the changes of Set
	// (mode, owner, times), and answers the attributes they leave, in one
	// round trip. An O_EXCL create that fails after making the file
	// removes it. Data is at most MaxCreateData. Only the layers below
	// one that asked OwnsName get them.
	Data []byte
	Set  SetattrIn
}

// MkdirIn describes a directory to create.
type MkdirIn struct {
	Owner
	Mode uint32 // permission bits
}

// MknodIn describes a special file (or an empty regular file) to create.
type MknodIn struct {
	Owner
	Mode uint32 // file type and permission bits
	Rdev uint64
	// Linkto, when set, makes a distribute pointer file naming the brick
	// that holds the data (Mode should be S_IFREG|01000).
	Linkto string
}

// SymlinkIn describes a symbolic link to create.
type SymlinkIn struct {
	Owner
	Target string
}

// Which attributes a SetattrIn changes.
const (
	SetMode = 1 << iota
	SetUid
	SetGid
	SetSize
	SetAtime
	SetMtime
	SetAtimeNow
	SetMtimeNow
	SetCtime
)

// SetattrIn changes the attributes named in Valid.
type SetattrIn struct {
	Valid uint32
	Mode  uint32 // permission bits only
	Uid   uint32
	Gid   uint32
	Size  uint64
	Atime Timespec
	Mtime Timespec
}

// Statfs is what statfs(2) reports, in units of Frsize bytes.
type Statfs struct {
	Blocks, Bfree, Bavail uint64
	Files, Ffree          uint64
	Bsize, Frsize         uint32
	NameLen               uint32
}

// Lock is a POSIX byte-range lock or, with Flock set, a whole-file flock.
// End is inclusive; math.MaxUint64 (or any End < Start on input) means "to
// end of file". Type is syscall.F_RDLCK, F_WRLCK or F_UNLCK.
type Lock struct {
	Type  uint32
	Start uint64
	End   uint64
	Pid   uint32
	Flock bool
	// Domain is the lock's namespace: DomainPosix for applications'
	// locks, DomainInternal for the locks layers take to order their own
	// work (disperse's stripe writes). Locks of different domains never
	// conflict.
	Domain uint8
}

// Lock domains.
const (
	// DomainPosix holds the POSIX locks and flocks of applications.
	DomainPosix uint8 = iota
	// DomainInternal holds byte-range locks that layers take between
	// clients; they behave as POSIX ones (merge, split, released with
	// the File), but no application sees them, Flush does not drop them,
	// and a wait is not checked for deadlock: their takers order them.
	// Getlk of an internal lock that finds no conflict reports in Pid how
	// many requests wait for the inode's internal locks (contention: a
	// holder lets go sooner).
	DomainInternal
)

// Rename flags. RenameNoReplace makes Rename fail with EEXIST if the
// target exists. RenameTakeBack, for a brick's storage only, marks a
// rename that takes back one a replicated set did on too few replicas
// (replicate's undoDirRename): the brick records no removal of the name
// it moves (a record would say the name was removed where a later rename
// gives it again; heal's merges would take it). A brick older than
// 2026-11-28 refuses it (EINVAL): the move back fails, and the rename
// stays done there (recorded, as before).
const (
	RenameNoReplace = 1
	RenameTakeBack  = 2
)

// Layer is the file-operation contract. Every method may be called
// concurrently. Methods that create inodes return the new inode's Attr.
type Layer interface {
	// Lookup returns the attributes of the inode at path (not following a
	// final symlink).
	Lookup(ctx context.Context, path string) (Attr, error)
	// Setattr changes attributes of the inode at path.
	Setattr(ctx context.Context, path string, in SetattrIn) (Attr, error)
	Mknod(ctx context.Context, path string, in MknodIn) (Attr, error)
	Mkdir(ctx context.Context, path string, in MkdirIn) (Attr, error)
	Symlink(ctx context.Context, path string, in SymlinkIn) (Attr, error)
	Readlink(ctx context.Context, path string) (string, error)
	// Unlink removes a non-directory; EISDIR for a directory.
	Unlink(ctx context.Context, path string) error
	// Rmdir removes an empty directory; ENOTEMPTY, ENOTDIR as in rmdir(2).
	Rmdir(ctx context.Context, path string) error
	// Rename has rename(2) semantics, including atomic replacement of an
	// existing target. flags may hold RenameNoReplace.
	Rename(ctx context.Context, oldpath, newpath string, flags uint32) error
	// Link makes newpath another name of the non-directory at oldpath.
	Link(ctx context.Context, oldpath, newpath string) (Attr, error)
	// Create creates and opens a regular file (EEXIST with O_EXCL).
	Create(ctx context.Context, path string, in CreateIn) (File, Attr, error)
	// Open opens an existing file. flags are open(2) flags without O_CREAT.
	Open(ctx context.Context, path string, flags uint32) (File, error)
	// Readdir lists a directory, without "." and "..", starting after
	// cookie (0 = start). max is a hint for the page size; a layer may
	// return more.
	Readdir(ctx context.Context, path string, cookie uint64, max int) (DirPage, error)
	Statfs(ctx context.Context, path string) (Statfs, error)
	// Getxattr returns ENODATA when the attribute does not exist.
	Getxattr(ctx context.Context, path, name string) ([]byte, error)
	// Setxattr flags are XATTR_CREATE / XATTR_REPLACE or 0.
	Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error
	Listxattr(ctx context.Context, path string) ([]string, error)
	Removexattr(ctx context.Context, path, name string) error
}

// File is an open file. Every method may be called concurrently, except
// that nothing may be called after Release.
type File interface {
	// Read reads at off; it returns fewer bytes than len(p) only at end of
	// file, and (0, nil) at or past it.
	Read(ctx context.Context, p []byte, off int64) (int, error)
	// Write writes at off (at the end of file for O_APPEND files).
	Write(ctx context.Context, p []byte, off int64) (int, error)
	Getattr(ctx context.Context) (Attr, error)
	Setattr(ctx context.Context, in SetattrIn) (Attr, error)
	Fsync(ctx context.Context, datasync bool) error
	Fallocate(ctx context.Context, mode uint32, off, length int64) error
	// Flush is called on every close(2) of a descriptor of this file; it
	// releases the POSIX locks that owner holds on the file.
	Flush(ctx context.Context, owner uint64) error
	// Getlk returns the first lock that conflicts with lk, or lk with Type
	// F_UNLCK if none does.
	Getlk(ctx context.Context, owner uint64, lk Lock) (Lock, error)
	// Setlk takes or releases a lock; with wait it blocks until the lock is
	// granted or ctx is done (EINTR), otherwise it fails with EAGAIN.
	Setlk(ctx context.Context, owner uint64, lk Lock, wait bool) error
	// Release closes the file and drops every lock taken through it.
	Release(ctx context.Context) error
}

// ToErrno turns an error from a layer into the errno to show the kernel.
func ToErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return syscall.ETIMEDOUT
	}
	return syscall.EIO
}

// UserErrno is ToErrno for a user of the volume (the kernel, the client
// library): an errno that only passes between bricks and clients
// (ErrFenced) is EIO there.
func UserErrno(err error) syscall.Errno {
	if e := ToErrno(err); e != ErrFenced {
		return e
	}
	return syscall.EIO
}

// CheckName reports whether name is acceptable as one path component.
func CheckName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return syscall.EINVAL
	case len(name) > NameMax:
		return syscall.ENAMETOOLONG
	case strings.ContainsAny(name, "/\x00"):
		return syscall.EINVAL
	}
	return nil
}

// CheckPath reports whether p is a clean absolute volume path: "/" or
// "/c1/c2..." with every component passing CheckName.
func CheckPath(p string) error {
	if len(p) > PathMax {
		return syscall.ENAMETOOLONG
	}
	if p == "/" {
		return nil
	}
	if !strings.HasPrefix(p, "/") {
		return syscall.EINVAL
	}
	for _, c := range strings.Split(p[1:], "/") {
		if err := CheckName(c); err != nil {
			return err
		}
	}
	return nil
}

// Join returns the path of name inside dir.
func Join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// Split returns the parent directory and the last component of p. Split("/")
// returns ("/", "").
func Split(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/", p[i+1:]
	}
	return p[:i], p[i+1:]
}

// ReadDirAll reads every page of a directory listing; a listing that
// lacks what an unreachable part of the volume holds fails (with
// DirPage.Missing).
func ReadDirAll(ctx context.Context, l Layer, path string) ([]Entry, error) {
	all, missing, err := ReadDirReachable(ctx, l, path)
	if err == nil && missing != nil {
		return nil, missing
	}
	return all, err
}

// ReadDirReachable reads every page of a directory listing, and returns
// with the entries what kept some from being listed (DirPage.Missing).
func ReadDirReachable(ctx context.Context, l Layer, path string) (all []Entry, missing, err error) {
	var cookie uint64
	for {
		page, err := l.Readdir(ctx, path, cookie, 1024)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, page.Entries...)
		if missing == nil {
			missing = page.Missing
		}
		if page.EOF {
			return all, missing, nil
		}
		if page.Next == cookie && len(page.Entries) == 0 {
			return nil, nil, fmt.Errorf("readdir %s: no progress at cookie %d: %w", path, cookie, syscall.EIO)
		}
		cookie = page.Next
	}
}

// MarshalText writes the gfid as its string form (in JSON, for instance).
func (g Gfid) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText parses the string form of a gfid.
func (g *Gfid) UnmarshalText(b []byte) error {
	s := strings.ReplaceAll(string(b), "-", "")
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != len(g) {
		return fmt.Errorf("bad gfid %q", b)
	}
	copy(g[:], raw)
	return nil
}
