package posix

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// The gfid index (GlusterFS's .glusterfs idea): every non-directory inode
// of the brick has, besides its names, a hard link IDDir/xx/<gfid>, xx
// being the gfid's first byte in hex; a directory has a symlink there
// instead (see dirTarget). With it an inode is reachable by its id
// wherever its names are (layer.IDPath): heal links a hard link made in
// another directory to the inode the brick already has instead of making
// a second one, and lookups by id need no path.
//
// The entry is made right after the inode (a crash in between leaves an
// inode without one, which a Link of it or CheckIDs adds) and removed when
// the inode's last name goes (a crash in between leaves an orphan entry,
// which the next start removes). A heal that removes a stale name of an
// inode the good copies still hold parks it instead (a rename onto its
// id), so that the heal of the directory it moved to can link it back (a
// crash or a restart in between only costs a copy). The entry is not a
// name: the attributes report one link fewer than the file system counts
// (toAttr).
const IDDir = HiddenDir + "/gfid"

// xattrIDsVersion, on IDDir, says that every inode of the brick was
// indexed once (CheckIDs): bricks made before the index get theirs when
// they first start with it.
const xattrIDsVersion = "trusted.mortar.gfid-index"

// idPrefix is how layer.IDPath paths begin.
var idPrefix = "/" + IDDir + "/"

// openIDs makes the index directory and its 256 fan-out directories if
// they are missing and opens it.
func openIDs(rootfd int) (int, error) {
	if err := unix.Mkdirat(rootfd, IDDir, 0o700); err != nil && err != unix.EEXIST {
		return -1, err
	}
	fd, err := unix.Openat(rootfd, IDDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for i := 0; i < 256; i++ {
		if err := unix.Mkdirat(fd, fmt.Sprintf("%02x", i), 0o700); err != nil && err != unix.EEXIST {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// idName is the index entry of g, relative to IDDir.
func idName(g layer.Gfid) string {
	s := g.String()
	return s[:2] + "/" + s
}

// indexed reports whether g gets an index entry (the root does not).
func indexed(g layer.Gfid) bool { return !g.IsZero() && g != layer.RootGfid }

// idLink gives the non-directory inode at path (never followed; a /proc
// path of a name in an open directory, or an absolute one) the index
// entry of its gfid g. An entry of another inode with the same gfid (a
// migration's new copy next to the pointer it replaces, an inode a heal
// replaced) gives way to this one, the newer.
func (s *Store) idLink(path string, g layer.Gfid) error {
	if !indexed(g) {
		return nil
	}
	l := s.ids.of(g)
	l.Lock()
	defer l.Unlock()
	name := idName(g)
	err := unix.Linkat(unix.AT_FDCWD, path, s.idfd, name, 0)
	if err != unix.EEXIST {
		return err
	}
	var have, want unix.Stat_t
	if err := unix.Fstatat(s.idfd, name, &have, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if err := unix.Lstat(path, &want); err != nil {
		return err
	}
	if have.Ino == want.Ino && have.Dev == want.Dev {
		return nil
	}
	tmp := name + ".new"
	unix.Unlinkat(s.idfd, tmp, 0)
	if err := unix.Linkat(unix.AT_FDCWD, path, s.idfd, tmp, 0); err != nil {
		return err
	}
	return unix.Renameat(s.idfd, tmp, s.idfd, name)
}

// idDrop removes the index entry of g (and its undo copy) if it is inode
// ino's and no name of that inode is left. Callers call it after removing
// a name of an inode that had at most one other name besides the entry.
func (s *Store) idDrop(g layer.Gfid, ino uint64) {
	if !indexed(g) {
		return
	}
	l := s.ids.of(g)
	l.Lock()
	defer l.Unlock()
	var st unix.Stat_t
	name := idName(g)
	if unix.Fstatat(s.idfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Ino != ino || st.Nlink > 1 {
		return
	}
	if err := unix.Unlinkat(s.idfd, name, 0); err != nil && err != unix.ENOENT {
		s.log.Warn("gfid index entry not removed", "brick", s.root, "gfid", g, "err", err)
	}
	s.dropUndo(g) // the inode is gone with its last name
}

// gone is what a removal needs to know of the inode a name held, to drop
// its index entry when the name was its last (see dropIfLast).
type gone struct {
	gfid  layer.Gfid
	ino   uint64
	nlink uint64
	dir   bool
}

// goneAt reads what dropIfLast needs of the inode at a, before its name
// is removed; ok is false if there is nothing to read (no such name).
func goneAt(a at) (g gone, ok bool) {
	var st unix.Stat_t
	if unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return g, false
	}
	g = gone{ino: st.Ino, nlink: uint64(st.Nlink), dir: st.Mode&unix.S_IFMT == unix.S_IFDIR}
	gfid, err := readGfid(procAt(a.dir, a.name), -1)
	g.gfid = gfid
	return g, err == nil
}

// dropIfLast removes the index entry of the inode g describes if the name
// just removed was its last.
func (s *Store) dropIfLast(g gone) {
	switch {
	case g.dir:
		s.idDirDrop(g.gfid)
	case g.nlink <= 2:
		s.idDrop(g.gfid, g.ino)
	}
}

// indexFound gives an inode found on the brick without a gfid (made by
// hand), just given g, its index entry; one found through a descriptor
// (path "") gets it from Link (a file) or the next CheckIDs.
func (s *Store) indexFound(path string, g layer.Gfid) {
	var st unix.Stat_t
	if path == "" || unix.Lstat(path, &st) != nil {
		return
	}
	var err error
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		var pg layer.Gfid
		if _, err = unix.Getxattr(filepath.Dir(path), XattrGfid, pg[:]); err == nil {
			err = s.idDir(g, pg, filepath.Base(path))
		}
	} else {
		err = s.idLink(path, g)
	}
	if err != nil {
		s.log.Warn("gfid index entry not made", "brick", s.root, "path", path, "err", err)
	}
}

// unmake removes the inode with gfid g that the brick just made at a and
// failed to finish, with its index entry if it got one.
func (s *Store) unmake(a at, g layer.Gfid) {
	var st unix.Stat_t
	if unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return
	}
	if unix.Unlinkat(a.dir, a.name, 0) == nil {
		s.idDrop(g, st.Ino)
	}
}

// names is how many names the non-directory inode st describes has: its
// links, less its index entry if it has one.
func (s *Store) names(st *unix.Stat_t, g layer.Gfid) uint64 {
	n := uint64(st.Nlink)
	var e unix.Stat_t
	if n > 0 && indexed(g) && unix.Fstatat(s.idfd, idName(g), &e, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		e.Ino == st.Ino && e.Dev == st.Dev {
		n--
	}
	return n
}

// idPath resolves a layer.IDPath to the index entry it names (for a
// directory, to the directory where it is): ok is false for any other
// path, and the error ENOENT for an id the brick does not hold (or a
// malformed one).
func (s *Store) idPath(p string) (a at, ok bool, err error) {
	g, ok, err := idOf(p)
	if !ok || err != nil {
		return at{}, ok, err
	}
	if _, dir := s.dirEntry(g); dir {
		a, err := s.dirByID(g)
		return a, true, err
	}
	return at{dir: s.idfd, name: idName(g)}, true, nil
}

// idOf parses a layer.IDPath: ok is false for any other path, and the
// error ENOENT for a malformed id.
func idOf(p string) (g layer.Gfid, ok bool, err error) {
	rest, ok := strings.CutPrefix(p, idPrefix)
	if !ok {
		return g, false, nil
	}
	if g.UnmarshalText([]byte(rest)) != nil || !indexed(g) || rest != g.String() {
		return g, true, unix.ENOENT
	}
	return g, true, nil
}

// dirPathOf answers layer.XattrPath: the path of the directory p names
// by its id, checked to hold it.
func (s *Store) dirPathOf(p string) ([]byte, error) {
	g, ok, err := idOf(p)
	if !ok {
		return nil, unix.EINVAL
	}
	if err != nil {
		return nil, err
	}
	a, dp, err := s.dirAt(g)
	if err != nil {
		return nil, err
	}
	a.close()
	return []byte(dp), nil
}

// park removes the name at a of the non-directory inode with gfid g but
// keeps the inode by its index entry (Rename onto layer.IDPath(g)), for a
// heal to link it again; the brick's next start removes it if none does.
func (s *Store) park(a at, g layer.Gfid) error {
	var st unix.Stat_t
	if err := unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return unix.EISDIR
	}
	cur, err := readGfid(procAt(a.dir, a.name), -1)
	if err != nil {
		return err
	}
	if cur != g || s.names(&st, g) == uint64(st.Nlink) {
		return unix.EXDEV // another inode, or one without its entry
	}
	return unix.Unlinkat(a.dir, a.name, 0)
}

// resolveSource is resolve for an existing inode that may also be named
// by its id (layer.IDPath): lookups, reading opens and a link's source.
func (s *Store) resolveSource(p string) (at, error) {
	if a, ok, err := s.idPath(p); ok {
		return a, err
	}
	return s.resolve(p, false)
}

// CheckIDs makes the gfid index whole: every non-directory inode of the
// brick gets its entry, and entries of inodes without a name (orphans,
// left by a crash between a removal and its entry's) are removed. It
// reports how many entries it added and removed. New runs it once on a
// brick made before the index.
func (s *Store) CheckIDs() (added, removed int, err error) {
	root := s.realRoot
	if root == "" {
		root = s.root
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == filepath.Join(root, HiddenDir) {
				return filepath.SkipDir
			}
			if path == root {
				return nil
			}
			n, err := s.checkDirID(path)
			added += n
			return err
		}
		n, err := s.checkID(path)
		added += n
		return err
	})
	if err != nil {
		return added, 0, err
	}
	removed, err = s.dropOrphans()
	return added, removed, err
}

// checkID gives the inode at path its index entry if it lacks one; it
// reports 1 if it added one.
func (s *Store) checkID(path string) (int, error) {
	g, err := s.gfidOf(path, -1)
	if errors.Is(err, unix.ENOENT) {
		return 0, nil // removed meanwhile
	}
	if err != nil {
		return 0, err
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return 0, nil
	}
	if s.names(&st, g) < uint64(st.Nlink) {
		return 0, nil
	}
	if err := s.idLink(path, g); err != nil && err != unix.ENOENT {
		return 0, fmt.Errorf("index %s: %w", path, err)
	}
	return 1, nil
}

// sweepOrphans is dropOrphans run beside the brick's work, until Close.
func (s *Store) sweepOrphans() {
	defer close(s.swept)
	removed, err := s.dropOrphans()
	switch {
	case err != nil && !s.closing():
		s.log.Warn("orphan gfid index entries: sweep failed", "brick", s.root, "removed", removed, "err", err)
	case removed > 0:
		s.log.Info("orphan gfid index entries removed", "brick", s.root, "removed", removed)
	}
}

// Swept is closed once the brick has removed the orphan entries of its
// gfid index that it found at its start.
func (s *Store) Swept() <-chan struct{} { return s.swept }

func (s *Store) closing() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// checkDirID gives the directory at path its index entry if it lacks it
// or the entry is not where the directory is; it reports 1 if it did.
func (s *Store) checkDirID(path string) (int, error) {
	g, err := s.gfidOf(path, -1)
	if errors.Is(err, unix.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	pg, err := s.gfidOf(filepath.Dir(path), -1)
	if err != nil {
		return 0, err
	}
	want := dirTarget(pg, filepath.Base(path))
	if t, ok := s.dirEntry(g); ok && t == want {
		return 0, nil
	}
	if err := s.idDir(g, pg, filepath.Base(path)); err != nil {
		return 0, fmt.Errorf("index %s: %w", path, err)
	}
	return 1, nil
}

// dropOrphans removes the index entries whose inode has no other name.
func (s *Store) dropOrphans() (int, error) {
	n := 0
	for i := 0; i < 256 && !s.closing(); i++ {
		sub := fmt.Sprintf("%02x", i)
		ents, err := os.ReadDir(procFd(s.idfd) + "/" + sub)
		if err != nil {
			return n, err
		}
		for _, e := range ents {
			var g layer.Gfid
			if g.UnmarshalText([]byte(e.Name())) != nil {
				unix.Unlinkat(s.idfd, sub+"/"+e.Name(), 0) // a crashed idLink's .new
				continue
			}
			if _, dir := s.dirEntry(g); dir {
				if a, err := s.dirByID(g); err == nil {
					a.close()
				} else {
					s.idDirDrop(g)
					n++
				}
				continue
			}
			var st unix.Stat_t
			if unix.Fstatat(s.idfd, idName(g), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Nlink == 1 {
				s.idDrop(g, st.Ino)
				n++
			}
		}
	}
	return n, nil
}

// checkIDsAtStart runs CheckIDs on a brick that has never been indexed
// whole, then records that it was; on others it removes orphans in the
// background (Swept says when that is done).
func (s *Store) checkIDsAtStart() error {
	p := procFd(s.idfd)
	if v, err := getxattrString(p, xattrIDsVersion, true); err == nil && v == "1" {
		go s.sweepOrphans()
		return nil
	}
	defer close(s.swept)
	added, removed, err := s.CheckIDs()
	if err != nil {
		return fmt.Errorf("brick %s: index the gfids: %w", s.root, err)
	}
	if added+removed > 0 {
		s.log.Info("gfid index made whole", "brick", s.root, "added", added, "removed", removed)
	}
	return unix.Setxattr(p, xattrIDsVersion, []byte("1"), 0)
}

// Directories have index entries too, but not hard links (a directory has
// one name): a symlink IDDir/xx/<gfid> → "<parent gfid>/<name>", as in
// GlusterFS, kept by mkdir, rename and rmdir. A directory's path is found
// by following the entries of its ancestors up to the root (dirPath), so
// a rename of a directory changes one entry, not those below it.

// dirTarget is a directory entry's content: its parent's gfid and name.
func dirTarget(parent layer.Gfid, name string) string { return parent.String() + "/" + name }

// parseDirTarget splits a directory entry's content; ok is false for
// anything else (the hard link of a symlink file, whose target is the
// user's).
func parseDirTarget(t string) (parent layer.Gfid, name string, ok bool) {
	ps, name, found := strings.Cut(t, "/")
	if !found || layer.CheckName(name) != nil || parent.UnmarshalText([]byte(ps)) != nil || ps != parent.String() {
		return parent, "", false
	}
	return parent, name, true
}

// parentGfid reads the gfid of the directory a's name is in, giving it
// one if it has none (made on the brick by hand); the caller must not
// hold naming.
func (s *Store) parentGfid(a at) (layer.Gfid, error) {
	fd, err := unix.Openat(a.dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return layer.Gfid{}, err
	}
	defer unix.Close(fd)
	return s.gfidOf("", fd)
}

// idDir points the entry of directory g at its parent pg and its name.
func (s *Store) idDir(g, pg layer.Gfid, name string) error {
	if !indexed(g) {
		return nil
	}
	l := s.ids.of(g)
	l.Lock()
	defer l.Unlock()
	tmp := idName(g) + ".new"
	unix.Unlinkat(s.idfd, tmp, 0)
	if err := unix.Symlinkat(dirTarget(pg, name), s.idfd, tmp); err != nil {
		return err
	}
	return unix.Renameat(s.idfd, tmp, s.idfd, idName(g))
}

// idDirAt points the entry of the directory at a, whose gfid is g, at
// where a is; the caller must not hold naming.
func (s *Store) idDirAt(a at, g layer.Gfid) error {
	pg, err := s.parentGfid(a)
	if err != nil {
		return err
	}
	return s.idDir(g, pg, a.name)
}

// idDirDrop removes the entry of directory g (removed).
func (s *Store) idDirDrop(g layer.Gfid) {
	if !indexed(g) {
		return
	}
	l := s.ids.of(g)
	l.Lock()
	defer l.Unlock()
	if _, ok := s.dirEntry(g); ok {
		unix.Unlinkat(s.idfd, idName(g), 0)
	}
}

// dirEntry reads the entry of g if it is a directory's.
func (s *Store) dirEntry(g layer.Gfid) (target string, ok bool) {
	var st unix.Stat_t
	if unix.Fstatat(s.idfd, idName(g), &st, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFLNK || st.Nlink != 1 {
		return "", false
	}
	buf := make([]byte, 2*layer.NameMax)
	n, err := unix.Readlinkat(s.idfd, idName(g), buf)
	if err != nil || n == len(buf) {
		return "", false
	}
	_, _, ok = parseDirTarget(string(buf[:n]))
	return string(buf[:n]), ok
}

// dirPath is the path of directory g, following the entries of its
// ancestors.
func (s *Store) dirPath(g layer.Gfid) (string, error) {
	var names []string
	for depth := 0; g != layer.RootGfid; depth++ {
		t, ok := s.dirEntry(g)
		if !ok || depth > layer.PathMax/2 {
			return "", unix.ENOENT
		}
		pg, name, _ := parseDirTarget(t)
		names = append(names, name)
		g = pg
	}
	p := ""
	for i := len(names) - 1; i >= 0; i-- {
		p += "/" + names[i]
	}
	if p == "" {
		p = "/"
	}
	return p, nil
}

// dirByID resolves directory g to where it is, checking that what is
// there is g.
func (s *Store) dirByID(g layer.Gfid) (at, error) {
	a, _, err := s.dirAt(g)
	return a, err
}

// dirAt is dirByID, with the path it resolved.
func (s *Store) dirAt(g layer.Gfid) (at, string, error) {
	p, err := s.dirPath(g)
	if err != nil {
		return at{}, "", err
	}
	a, err := s.resolve(p, false)
	if err != nil {
		return at{}, "", unix.ENOENT
	}
	cur, err := readGfid(procAt(a.dir, a.name), -1)
	if err != nil || cur != g {
		a.close()
		return at{}, "", unix.ENOENT
	}
	return a, p, nil
}
