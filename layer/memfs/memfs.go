// Package memfs is a bottom layer that keeps a whole volume in memory: a
// layer.Layer with no disk under it, so that a layer, or a stack of
// layers, can be tested in one process without brick directories
// (issue 16). A fresh FS is an empty volume whose root directory has
// the gfid layer.RootGfid, mode 0755 and owner 0:0.
//
// # What it keeps
//
// It is a plain POSIX store, and answers as brick/posix does wherever a
// layer above can tell: the same errors for the same mistakes, Attr filled
// the same way (a gfid per inode, stable for its life and given by
// Owner.Gfid when set; Nlink counting names, and for a directory 2 plus
// its subdirectories; Blocks in 512-byte units of the 4 KiB blocks a file
// holds, so sparse files are cheap; directories of size 4096), times
// kept as Linux keeps them (relatime for reads), set-group-ID
// directories handing on their group, unlinked files readable through
// the Files still open on them, and readdir cookies that survive changes
// to the directory between pages. Paths never pass through a symlink
// (ELOOP), as posix's do not: the client kernel follows them.
//
// Of mortar's own contract beyond POSIX it keeps what travels in the
// layer package's types: distribute's pointer files (MknodIn.Linkto,
// Attr.Linkto, EREMOTE from Open and Setattr), layer.DataUnlinker,
// layer.SourceRenamer, and creates made in one go (CreateIn.Data and
// Set, written as the brick's server writes them).
//
// # What it does not keep
//
// None of the state brick/posix keeps in trusted.mortar.* xattrs and in
// its hidden directory: no pending marks and no layer.Txn read from the
// context, no heal index, no gfid index (so no layer.IDPath and no
// layer.XattrPath), no rename or removal records (layer.XattrRenamed),
// no fragment sizes of a disperse brick, no migrations, no arbiter mode,
// no reserve. As on a brick, only xattrs of the user. namespace may be
// used; any other name fails with EOPNOTSUPP. Like posix it keeps no
// locks (Getlk and Setlk fail with ENOLCK): put layer/locks above it.
//
// It therefore suits the layers that keep to the plain contract: the
// client-side caches and transforms (mdcache, nlcache, quickread,
// readdirahead, writebehind, crypt), the brick-side readahead and
// locks, and distribute or
// replicate in tests that do not rely on posix's marks, records and
// gfid index (healing does: heal and disperse want real bricks).
//
// # Space and concurrency
//
// Statfs reports a fixed 1 TiB, less the blocks files hold; only
// fallocate is refused (ENOSPC) beyond it, since the bytes of a write are
// in memory already. Every method may be called concurrently: one mutex
// guards the whole volume, so every operation is atomic, as a rename on
// a disk is.
package memfs

import (
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// blockSize is the unit of space: files hold data in blocks of it, and
// Statfs counts them.
const blockSize = 4096

// capacity (in blocks) and maxFiles are the size Statfs reports.
const (
	capacity = 1 << 28 // 1 TiB
	maxFiles = 1 << 24
)

// linktoMode is the mode of distribute's pointer files, as on a brick.
const linktoMode = syscall.S_IFREG | 01000

// FS is a volume held in memory. It implements layer.Layer.
type FS struct {
	// mu guards the whole tree, every inode and open file, and the
	// counters: each operation holds it throughout.
	mu    sync.Mutex
	root  *inode
	files int64 // inodes alive: with a name, or open
	used  int64 // blocks held by files' data
}

var (
	_ layer.Layer         = (*FS)(nil)
	_ layer.DataUnlinker  = (*FS)(nil)
	_ layer.SourceRenamer = (*FS)(nil)
)

// New returns an empty volume.
func New() *FS {
	fs := &FS{}
	fs.root = fs.newInode(nil, layer.Owner{Gfid: layer.RootGfid}, syscall.S_IFDIR|0o755)
	return fs
}

// inode is a regular file, directory, symlink or special file.
type inode struct {
	gfid     layer.Gfid
	mode     uint32 // file type and permission bits
	nlink    uint32
	uid, gid uint32
	rdev     uint64
	atime    layer.Timespec
	mtime    layer.Timespec
	ctime    layer.Timespec
	linkto   string // a pointer file's data brick (MknodIn.Linkto)
	target   string // a symlink's target
	data     *data  // a regular file's content
	dir      *dir   // a directory's entries
	xattrs   map[string][]byte
	// opens counts the Files open on the inode: it outlives its last
	// name until they are released.
	opens int
}

func (ino *inode) kind() uint32 { return ino.mode & syscall.S_IFMT }

func (ino *inode) isDir() bool { return ino.dir != nil }

// pointer reports whether ino is a distribute pointer file: its data is
// on another brick, so opening or changing it here would be wrong.
func (ino *inode) pointer() bool { return ino.mode == linktoMode && ino.linkto != "" }

// newInode makes an inode of mode (type and permission bits) for o in
// parent (nil for the root), with one name (a directory: its own and
// "."). As on Linux, in a set-group-ID directory it takes the
// directory's group, and a new directory is set-group-ID itself.
func (fs *FS) newInode(parent *inode, o layer.Owner, mode uint32) *inode {
	t := now()
	ino := &inode{gfid: o.Gfid, mode: mode, nlink: 1, uid: o.Uid, gid: o.Gid, atime: t, mtime: t, ctime: t}
	if ino.gfid.IsZero() {
		ino.gfid = layer.NewGfid()
	}
	if parent != nil && parent.mode&syscall.S_ISGID != 0 {
		ino.gid = parent.gid
		if ino.kind() == syscall.S_IFDIR {
			ino.mode |= syscall.S_ISGID
		}
	}
	switch ino.kind() {
	case syscall.S_IFDIR:
		ino.dir, ino.nlink = newDir(), 2
	case syscall.S_IFREG:
		ino.data = &data{used: &fs.used}
	}
	fs.files++
	return ino
}

// attr is what Lookup says of ino.
func (ino *inode) attr() layer.Attr {
	a := layer.Attr{Gfid: ino.gfid, Mode: ino.mode, Nlink: ino.nlink, Uid: ino.uid, Gid: ino.gid,
		Rdev: ino.rdev, Blksize: blockSize, Atime: ino.atime, Mtime: ino.mtime, Ctime: ino.ctime}
	switch {
	case ino.data != nil:
		a.Size, a.Blocks = uint64(ino.data.size), uint64(len(ino.data.blocks))*blockSize/512
	case ino.dir != nil:
		a.Size, a.Blocks = blockSize, blockSize/512
	case ino.kind() == syscall.S_IFLNK:
		a.Size = uint64(len(ino.target))
	}
	if ino.mode == linktoMode {
		a.Linkto = ino.linkto
	}
	return a
}

// named checks path and resolves it to the directory holding its last
// component, that component, and the inode it names (nil if none). The
// root is (nil, "", root).
func (fs *FS) named(path string) (dir *inode, name string, ino *inode, err error) {
	if err := layer.CheckPath(path); err != nil {
		return nil, "", nil, err
	}
	if path == "/" {
		return nil, "", fs.root, nil
	}
	dir = fs.root
	names := strings.Split(path[1:], "/")
	for _, c := range names[:len(names)-1] {
		if dir, err = step(dir, c); err != nil {
			return nil, "", nil, err
		}
	}
	name = names[len(names)-1]
	return dir, name, dir.dir.get(name), nil
}

// step goes from dir to its subdirectory name. It never goes through a
// symlink (ELOOP), as posix, which resolves with RESOLVE_NO_SYMLINKS.
func step(dir *inode, name string) (*inode, error) {
	next := dir.dir.get(name)
	switch {
	case next == nil:
		return nil, syscall.ENOENT
	case next.isDir():
		return next, nil
	case next.kind() == syscall.S_IFLNK:
		return nil, syscall.ELOOP
	}
	return nil, syscall.ENOTDIR
}

// find returns the inode at path.
func (fs *FS) find(path string) (*inode, error) {
	_, _, ino, err := fs.named(path)
	if err == nil && ino == nil {
		err = syscall.ENOENT
	}
	return ino, err
}

// free returns the directory and name where a new inode would be made
// at path: EEXIST if something is there (the root always is).
func (fs *FS) free(path string) (*inode, string, error) {
	dir, name, ino, err := fs.named(path)
	if err == nil && ino != nil {
		err = syscall.EEXIST
	}
	return dir, name, err
}

// on runs fn on the inode at path, holding the lock.
func on[T any](fs *FS, path string, fn func(*inode) (T, error)) (T, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ino, err := fs.find(path)
	if err != nil {
		var zero T
		return zero, err
	}
	return fn(ino)
}

// put gives ino the name name in dir. A subdirectory's ".." is a link
// of dir.
func put(dir *inode, name string, ino *inode, t layer.Timespec) {
	dir.dir.add(name, ino)
	if ino.isDir() {
		dir.nlink++
	}
	dir.mtime, dir.ctime = t, t
}

// take removes the name name of ino from dir.
func take(dir *inode, name string, ino *inode, t layer.Timespec) {
	dir.dir.remove(name)
	if ino.isDir() {
		dir.nlink--
	}
	dir.mtime, dir.ctime = t, t
}

// unlinked counts one name of ino fewer (a directory has but one) and
// forgets ino if that was its last.
func (fs *FS) unlinked(ino *inode, t layer.Timespec) {
	if ino.isDir() {
		ino.nlink = 0
	} else {
		ino.nlink--
	}
	ino.ctime = t
	fs.forget(ino)
}

// forget frees what ino holds once it has neither a name nor an open
// File. It is called when either count drops, so once per inode.
func (fs *FS) forget(ino *inode) {
	if ino.nlink > 0 || ino.opens > 0 {
		return
	}
	fs.files--
	if ino.data != nil {
		ino.data.free()
	}
}

// now is the current time as a Timespec.
func now() layer.Timespec {
	t := time.Now()
	return layer.Timespec{Sec: t.Unix(), Nsec: uint32(t.Nanosecond())}
}

// after reports whether a is later than b.
func after(a, b layer.Timespec) bool {
	return a.Sec > b.Sec || a.Sec == b.Sec && a.Nsec > b.Nsec
}
