package posix

import (
	"bytes"
	"context"
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// Layout of struct linux_dirent64.
const (
	direntOff    = 8  // d_off, int64
	direntReclen = 16 // d_reclen, uint16
	direntName   = 19 // d_name, NUL-terminated
)

// defaultMax is the page size when the caller gives none.
const defaultMax = 1024

// Readdir lists one page of the directory at path with each entry's
// attributes, and a symlink's target. It keeps no state between calls:
// cookie is the d_off the brick's file system gave for the last entry of
// the previous page.
func (s *Store) Readdir(ctx context.Context, path string, cookie uint64, limit int) (layer.DirPage, error) {
	fd, err := s.openDir(path)
	if err != nil {
		return layer.DirPage{}, err
	}
	defer unix.Close(fd)
	if limit <= 0 {
		limit = defaultMax
	}
	if cookie != 0 {
		if _, err := unix.Seek(fd, int64(cookie), 0); err != nil {
			return layer.DirPage{}, err
		}
	}
	buf := make([]byte, min(max(4096, limit*64), 64<<10))
	page := layer.DirPage{Next: cookie}
	atRoot := path == "/"
	for len(page.Entries) < limit {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return layer.DirPage{}, err
		}
		if n == 0 {
			page.EOF = true
			break
		}
		if err := s.parseDirents(fd, buf[:n], atRoot, limit, &page); err != nil {
			return layer.DirPage{}, err
		}
	}
	return page, nil
}

// parseDirents adds the entries of one getdents buffer to page, up to
// limit entries, advancing page.Next past every entry it consumed.
func (s *Store) parseDirents(fd int, buf []byte, atRoot bool, limit int, page *layer.DirPage) error {
	for len(buf) >= direntName && len(page.Entries) < limit {
		reclen := int(binary.NativeEndian.Uint16(buf[direntReclen:]))
		if reclen < direntName || reclen > len(buf) {
			return unix.EIO
		}
		off := binary.NativeEndian.Uint64(buf[direntOff:])
		name := buf[direntName:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		buf = buf[reclen:]
		page.Next = off
		if skipName(name, atRoot) {
			continue
		}
		e := layer.Entry{Name: string(name)}
		var st unix.Stat_t
		err := unix.Fstatat(fd, e.Name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil {
			e.Attr, err = s.fillAt(fd, e.Name, &st)
		}
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			e.Target, err = targetOf(fd, e.Name, &st)
		}
		if err == unix.ENOENT {
			continue // removed since getdents
		}
		if err != nil {
			return err
		}
		page.Entries = append(page.Entries, e)
	}
	return nil
}

// targetOf returns the target of the symlink name in dir whose stat is
// st, or "" if the name no longer is that inode (a client replaced it
// since; an inode number may come back at once, its change time not): a
// target goes with its inode's gfid, and is kept as long.
func targetOf(dir int, name string, st *unix.Stat_t) (string, error) {
	target, err := readlinkAt(dir, name)
	if err == unix.ENOENT {
		return "", err // removed since: not listed
	}
	if err != nil {
		return "", nil // replaced by a file since
	}
	var again unix.Stat_t
	if err := unix.Fstatat(dir, name, &again, unix.AT_SYMLINK_NOFOLLOW); err != nil || again.Ino != st.Ino || again.Ctim != st.Ctim {
		return "", nil
	}
	return target, nil
}

func skipName(name []byte, atRoot bool) bool {
	switch string(name) {
	case ".", "..":
		return true
	case HiddenDir:
		return atRoot
	}
	return false
}
