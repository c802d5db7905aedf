package posix

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// at names an inode as a name inside an open directory. The brick root is
// (rootfd, ".").
type at struct {
	dir  int
	name string
	own  bool // dir must be closed
}

func (a at) close() {
	if a.own {
		unix.Close(a.dir)
	}
}

func (a at) isRoot() bool { return a.name == "." }

// isHidden reports whether p is the hidden directory or inside it.
func isHidden(p string) bool {
	return strings.HasPrefix(p, "/"+HiddenDir) &&
		(len(p) == len(HiddenDir)+1 || p[len(HiddenDir)+1] == '/')
}

// resolve checks p and opens its parent directory beneath the brick root
// without following any symlink. creating says that the caller will create
// (or rename onto) the final name: the hidden directory is then EPERM
// rather than ENOENT.
func (s *Store) resolve(p string, creating bool) (at, error) {
	if err := layer.CheckPath(p); err != nil {
		return at{}, err
	}
	if p == "/" {
		return at{dir: s.rootfd, name: "."}, nil
	}
	if isHidden(p) {
		if creating && len(p) == len(HiddenDir)+1 {
			return at{}, unix.EPERM
		}
		return at{}, unix.ENOENT
	}
	dir, name := layer.Split(p)
	if dir == "/" {
		return at{dir: s.rootfd, name: name}, nil
	}
	fd, err := s.openBeneath(dir[1:], unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return at{}, err
	}
	return at{dir: fd, name: name, own: true}, nil
}

// openBeneath opens rel (relative to the brick root) refusing anything that
// would leave the brick or cross a symlink.
func (s *Store) openBeneath(rel string, flags int) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(s.rootfd, rel, &how)
		if (err == unix.EAGAIN || err == unix.EINTR) && i < 8 {
			continue // a concurrent rename raced the lookup
		}
		return fd, err
	}
}

// openDir opens the directory at p for reading.
func (s *Store) openDir(p string) (int, error) {
	if err := layer.CheckPath(p); err != nil {
		return -1, err
	}
	if isHidden(p) {
		return -1, unix.ENOENT
	}
	rel := "."
	if p != "/" {
		rel = p[1:]
	}
	return s.openBeneath(rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
}

// attrAt stats the inode a names (never following it) with its identity.
func (s *Store) attrAt(a at) (layer.Attr, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return layer.Attr{}, err
	}
	attr, err := s.fillAt(a.dir, a.name, &st)
	if err == nil {
		attr.Pending, err = self(a, "").pending()
	}
	if a.dir == s.idfd && !attr.IsDir() {
		// Reached by its id: the index entry is not a name, so an
		// inode whose names are all gone (parked) has none.
		attr.Nlink = uint32(st.Nlink) - 1
	}
	return attr, err
}

// fillAt converts st, the stat of name in dir, and adds its gfid (assigning
// one if it has none) and, for pointer files, its linkto.
func (s *Store) fillAt(dir int, name string, st *unix.Stat_t) (layer.Attr, error) {
	attr := toAttr(st)
	path := procAt(dir, name)
	var err error
	if attr.Gfid, err = s.gfidOf(path, -1); err != nil {
		return layer.Attr{}, err
	}
	if isLinkto(st.Mode) {
		if attr.Linkto, err = getxattrString(path, XattrLinkto, false); err != nil {
			return layer.Attr{}, err
		}
	}
	if err := s.withFileSize(&attr, inode{proc: path, fd: -1}); err != nil {
		return layer.Attr{}, err
	}
	return attr, nil
}

// attrFd stats an open (not O_PATH) descriptor with its identity.
func (s *Store) attrFd(fd int) (layer.Attr, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return layer.Attr{}, err
	}
	attr := toAttr(&st)
	var err error
	if attr.Gfid, err = s.gfidOf("", fd); err != nil {
		return layer.Attr{}, err
	}
	if isLinkto(st.Mode) {
		v, err := fgetxattr(fd, XattrLinkto)
		if err != nil && err != unix.ENODATA {
			return layer.Attr{}, err
		}
		attr.Linkto = string(v)
	}
	if attr.Pending, err = (inode{fd: fd}).pending(); err != nil {
		return layer.Attr{}, err
	}
	return attr, s.withFileSize(&attr, inode{fd: fd})
}

// gfidOf reads the gfid of path (not following it) or, when fd >= 0, of fd.
// An inode without one (made by an operator on the brick) gets one, once
// the inodes being created meanwhile have theirs (naming).
func (s *Store) gfidOf(path string, fd int) (layer.Gfid, error) {
	g, err := readGfid(path, fd)
	if err != unix.ENODATA {
		return g, err
	}
	s.naming.Lock()
	defer s.naming.Unlock()
	for i := 0; i < 2; i++ {
		g, err = readGfid(path, fd)
		if err != unix.ENODATA {
			return g, err
		}
		g = layer.NewGfid()
		err = setGfid(path, fd, g, unix.XATTR_CREATE)
		if err == nil {
			s.log.Debug("assigned gfid", "brick", s.root, "path", path, "gfid", g)
			s.indexFound(path, g)
			return g, nil
		}
		if err != unix.EEXIST {
			return layer.Gfid{}, err
		}
		// Someone else assigned one meanwhile: read theirs.
	}
	return layer.Gfid{}, unix.EIO
}

// readGfid reads the gfid xattr of path or fd: ENODATA if there is none.
func readGfid(path string, fd int) (layer.Gfid, error) {
	var g layer.Gfid
	var n int
	var err error
	if fd >= 0 {
		n, err = unix.Fgetxattr(fd, XattrGfid, g[:])
	} else {
		n, err = unix.Lgetxattr(path, XattrGfid, g[:])
	}
	switch {
	case err == nil && n == len(g):
		return g, nil
	case err == nil || err == unix.ERANGE:
		return g, fmt.Errorf("%s: corrupt gfid xattr (%d bytes): %w", path, n, unix.EIO)
	}
	return g, err
}

func setGfid(path string, fd int, g layer.Gfid, flags int) error {
	if fd >= 0 {
		return unix.Fsetxattr(fd, XattrGfid, g[:], flags)
	}
	return unix.Lsetxattr(path, XattrGfid, g[:], flags)
}
