package posix

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// newOwner is who a new inode in a directory belongs to.
type newOwner struct {
	uid, gid int
	sgid     bool // the parent is set-group-ID: new directories inherit it
	gfid     layer.Gfid
	// made is the owner the kernel gives an inode the brick makes there:
	// the brick's own, in a set-group-ID directory with its group.
	madeUid, madeGid int
}

// ownerIn applies Linux's rules for a new inode of o in directory dir: in a
// set-group-ID directory the group is the directory's.
func ownerIn(dir int, o layer.Owner) (newOwner, error) {
	var st unix.Stat_t
	if err := unix.Fstat(dir, &st); err != nil {
		return newOwner{}, err
	}
	no := newOwner{uid: int(o.Uid), gid: int(o.Gid), gfid: o.Gfid, madeUid: os.Geteuid(), madeGid: os.Getegid()}
	if st.Mode&unix.S_ISGID != 0 {
		no.gid, no.sgid, no.madeGid = int(st.Gid), true, int(st.Gid)
	}
	if no.gfid.IsZero() {
		no.gfid = layer.NewGfid()
	}
	return no, nil
}

// made reports whether an inode the brick makes already has the owner o
// gives it.
func (o newOwner) made() bool { return o.uid == o.madeUid && o.gid == o.madeGid }

// createMode is the mode to make a new inode with, and whether that is
// already mode (no chmod needed): mode itself when no bit of it is one
// another user could use in the moment before the owner is set (group or
// other write, set-ID, sticky) nor one the umask takes away; else 0600
// (0700 for a directory), and the chmod follows the chown.
func createMode(mode uint32, dir bool) (uint32, bool) {
	if mode&^0o755 == 0 && mode&processUmask() == 0 {
		return mode, true
	}
	if dir {
		return 0o700, false
	}
	return 0o600, false
}

// processUmask is the brick process's umask, read once (from
// /proc/self/status: umask(2) would change it to read it).
var processUmask = sync.OnceValue(func() uint32 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0o777 // unknown: every new inode is chmodded
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return uint32(m)
			}
		}
	}
	return 0o777
})

// refuseRoot is the error for creating the root: it exists.
func refuseRoot(a at) error {
	if a.isRoot() {
		return unix.EEXIST
	}
	return nil
}

// Mknod creates a special file or an empty regular file. With in.Linkto it
// creates a distribute pointer file: mode S_IFREG|01000 and the linkto
// xattr.
func (s *Store) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	mode := in.Mode
	if in.Linkto != "" {
		mode = linktoMode
	} else if mode&unix.S_IFMT == 0 {
		mode |= unix.S_IFREG
	}
	return s.makeAt(ctx, path, in.Owner, mode&07777, in.Linkto, func(a at) error {
		switch mode & unix.S_IFMT {
		case unix.S_IFREG, unix.S_IFIFO, unix.S_IFCHR, unix.S_IFBLK, unix.S_IFSOCK:
		default:
			return unix.EINVAL
		}
		return unix.Mknodat(a.dir, a.name, mode&^07777|0o600, int(in.Rdev))
	})
}

// Symlink creates a symbolic link; its target is stored as given.
func (s *Store) Symlink(ctx context.Context, path string, in layer.SymlinkIn) (layer.Attr, error) {
	return s.makeAt(ctx, path, in.Owner, noChmod, "", func(a at) error {
		return unix.Symlinkat(in.Target, a.dir, a.name)
	})
}

// makeAt creates the non-directory inode at path with mk, then gives it its
// owner, mode, gfid and linkto (initAt); if that fails the inode is removed
// again.
func (s *Store) makeAt(ctx context.Context, path string, owner layer.Owner, mode uint32, linkto string, mk func(at) error) (layer.Attr, error) {
	a, err := s.resolve(path, true)
	if err != nil {
		return layer.Attr{}, err
	}
	defer a.close()
	if err := refuseRoot(a); err != nil {
		return layer.Attr{}, err
	}
	if linkto == "" { // a pointer is a name's, which the reserve keeps room for
		if err := s.roomyAt(a); err != nil {
			return layer.Attr{}, err
		}
	}
	unlock, err := s.pend(ctx, parent(a, path))
	if err != nil {
		return layer.Attr{}, err
	}
	defer unlock()
	o, err := ownerIn(a.dir, owner)
	if err != nil {
		return layer.Attr{}, err
	}
	s.naming.RLock()
	defer s.naming.RUnlock()
	if err := mk(a); err != nil {
		return layer.Attr{}, err
	}
	attr, err := s.initAt(a, o, mode, linkto)
	if err != nil {
		s.unmake(a, o.gfid)
	}
	return attr, err
}

// noChmod tells initAt to leave the mode alone (symlinks have none).
const noChmod = ^uint32(0)

// initAt gives the inode just created at a its owner, mode, gfid, linkto
// and index entry, never following it, and returns its attributes.
func (s *Store) initAt(a at, o newOwner, mode uint32, linkto string) (layer.Attr, error) {
	if err := unix.Fchownat(a.dir, a.name, o.uid, o.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return layer.Attr{}, err
	}
	if mode != noChmod {
		if err := chmodAt(a.dir, a.name, mode); err != nil {
			return layer.Attr{}, err
		}
	}
	path := procAt(a.dir, a.name)
	if err := unix.Lsetxattr(path, XattrGfid, o.gfid[:], 0); err != nil {
		return layer.Attr{}, err
	}
	if linkto != "" {
		if err := unix.Lsetxattr(path, XattrLinkto, []byte(linkto), 0); err != nil {
			return layer.Attr{}, err
		}
	}
	if err := s.idLink(path, o.gfid); err != nil {
		return layer.Attr{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return layer.Attr{}, err
	}
	attr := toAttr(&st)
	attr.Gfid, attr.Linkto = o.gfid, linkto
	return attr, nil
}

// Mkdir creates a directory. In a set-group-ID parent it gets the parent's
// group and is itself set-group-ID.
func (s *Store) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	a, err := s.resolve(path, true)
	if err != nil {
		return layer.Attr{}, err
	}
	defer a.close()
	if err := refuseRoot(a); err != nil {
		return layer.Attr{}, err
	}
	if err := s.roomyAt(a); err != nil {
		return layer.Attr{}, err
	}
	unlock, err := s.pend(ctx, parent(a, path))
	if err != nil {
		return layer.Attr{}, err
	}
	defer unlock()
	o, err := ownerIn(a.dir, in.Owner)
	if err != nil {
		return layer.Attr{}, err
	}
	pg, err := s.parentGfid(a)
	if err != nil {
		return layer.Attr{}, err
	}
	s.naming.RLock()
	defer s.naming.RUnlock()
	if err := s.heldElsewhere(in.Owner.Gfid); err != nil {
		return layer.Attr{}, err
	}
	mode := in.Mode & 07777
	if o.sgid {
		mode |= unix.S_ISGID
	}
	made, final := createMode(mode, true)
	if err := unix.Mkdirat(a.dir, a.name, made); err != nil {
		return layer.Attr{}, err
	}
	attr, err := s.initDir(a, o, mode, final)
	if err == nil {
		err = s.idDir(o.gfid, pg, a.name)
	}
	if err != nil {
		unix.Unlinkat(a.dir, a.name, unix.AT_REMOVEDIR)
	}
	return attr, err
}

// heldElsewhere refuses (EEXIST) a mkdir given gfid g of a directory the
// brick holds: a directory has one name. A client made a half-renamed
// directory again under its old name on a replica that held it under the
// new one, and the brick held two directories of one gfid (sim
// disperse2+1x2-dirs seed 62). Only a given gfid is looked up (one
// readlink of its index entry).
func (s *Store) heldElsewhere(g layer.Gfid) error {
	if !indexed(g) {
		return nil
	}
	a, _, err := s.dirAt(g)
	if err != nil {
		return nil
	}
	a.close()
	return unix.EEXIST
}

func (s *Store) initDir(a at, o newOwner, mode uint32, final bool) (layer.Attr, error) {
	fd, err := unix.Openat(a.dir, a.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return layer.Attr{}, err
	}
	defer unix.Close(fd)
	if err := initFd(fd, o, mode, final); err != nil {
		return layer.Attr{}, err
	}
	var st unix.Stat_t
	if err := statMade(fd, mode, &st); err != nil {
		return layer.Attr{}, err
	}
	attr := toAttr(&st)
	attr.Gfid = o.gfid
	return attr, nil
}

// statMade reads the attributes of a new inode open as fd, which must
// have mode: one made with its final mode (createMode) may have been
// given another by a default ACL of its directory, set on the brick by
// hand; it is then chmodded.
func statMade(fd int, mode uint32, st *unix.Stat_t) error {
	if err := unix.Fstat(fd, st); err != nil || st.Mode&07777 == mode {
		return err
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return err
	}
	return unix.Fstat(fd, st)
}

// initFd gives a new inode open as fd, made with a mode that is final
// or not (createMode), its owner, exact mode and gfid. chown comes first:
// it clears set-user-ID bits that chmod then sets (a final mode has none).
func initFd(fd int, o newOwner, mode uint32, final bool) error {
	if !o.made() {
		if err := unix.Fchown(fd, o.uid, o.gid); err != nil {
			return err
		}
	}
	if !final {
		if err := unix.Fchmod(fd, mode); err != nil {
			return err
		}
	}
	return unix.Fsetxattr(fd, XattrGfid, o.gfid[:], 0)
}
