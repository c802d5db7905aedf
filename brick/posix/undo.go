package posix

import (
	"context"
	"os"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// Undo copies (layer.UndoReader). On a disperse brick, a write that
// carries the Dirty mark and asks for it (Txn.KeepUndo) — a disperse
// client's write under its writers' lock, which a dying client can leave
// on too few bricks — first copies what it replaces, within the
// fragment's length, to the same offsets of UndoDir/<gfid>. The copy goes with the inode's Dirty mark (ClearPending),
// with its last name, and at start when its inode is gone. Writes of one
// inode hold its mark lock, which orders them with the copy and its
// removal.
const UndoDir = HiddenDir + "/undo"

// openUndo makes and opens UndoDir.
func openUndo(rootfd int) (int, error) {
	if err := unix.Mkdirat(rootfd, UndoDir, 0o700); err != nil && err != unix.EEXIST {
		return -1, err
	}
	return unix.Openat(rootfd, UndoDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// span is a range of a file a write replaces.
type span struct{ off, len int64 }

// keepsUndo reports whether a write in ctx copies what it replaces first.
func (f *file) keepsUndo(ctx context.Context) bool {
	t := layer.TxnFrom(ctx)
	return f.s.disperse && !f.s.arbiter && t.KeepUndo && t.Pending&layer.Dirty != 0
}

// saveUndo copies what spans of the file hold now, within its length,
// to its undo copy; spans past the end have nothing to keep.
func (f *file) saveUndo(spans ...span) error {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return err
	}
	g, err := readGfid("", f.fd)
	if err != nil {
		return err
	}
	var out int = -1
	defer func() {
		if out >= 0 {
			unix.Close(out)
		}
	}()
	for _, sp := range spans {
		n := min(sp.off+sp.len, st.Size) - sp.off
		if n <= 0 {
			continue
		}
		if out < 0 {
			if out, err = unix.Openat(f.s.undofd, g.String(), unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600); err != nil {
				return err
			}
		}
		if err := f.copyOld(out, sp.off, n); err != nil {
			return err
		}
	}
	return nil
}

// copyOld copies n bytes at off of the file to the same offset of out,
// through memory: copy_file_range would share the extents on XFS, which
// first writes the range out to disk and makes the write that follows
// copy it (5 times slower overwrites, measured).
func (f *file) copyOld(out int, off, n int64) error {
	buf := make([]byte, n)
	got, err := f.readOld(buf, off)
	if err != nil {
		return err
	}
	_, err = pwriteFull(out, buf[:got], off)
	return err
}

// readOld reads p at off for the undo copy, through a reading descriptor
// of the inode if the file was opened write-only.
func (f *file) readOld(p []byte, off int64) (int, error) {
	if f.flags&unix.O_ACCMODE != unix.O_WRONLY {
		return readFull(func(p []byte, off int64) (int, error) { return f.io(unix.Pread, p, off) }, p, off)
	}
	fd, err := unix.Open(procFd(f.fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return readFull(func(p []byte, off int64) (int, error) { return unix.Pread(fd, p, off) }, p, off)
}

// readFull reads len(p) bytes at off with read, fewer only at end of file.
func readFull(read func(p []byte, off int64) (int, error), p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := read(p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}

// pwriteFull writes all of p at off of fd.
func pwriteFull(fd int, p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Pwrite(fd, p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// ReadUndo reads the file's undo copy (layer.UndoReader): n = 0 when the
// brick keeps none.
func (f *file) ReadUndo(ctx context.Context, p []byte, off int64) (int, error) {
	g, err := readGfid("", f.fd)
	if err != nil {
		return 0, err
	}
	fd, err := unix.Openat(f.s.undofd, g.String(), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err == unix.ENOENT {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return readFull(func(p []byte, off int64) (int, error) { return unix.Pread(fd, p, off) }, p, off)
}

// dropUndo removes the undo copy of inode g, if any.
func (s *Store) dropUndo(g layer.Gfid) {
	if g.IsZero() {
		return
	}
	if err := unix.Unlinkat(s.undofd, g.String(), 0); err != nil && err != unix.ENOENT {
		s.log.Warn("undo copy not removed", "brick", s.root, "gfid", g, "err", err)
	}
}

// dropOrphanUndo removes the undo copies whose inode has no index entry
// left: gone while the brick was down, or between its last name and the
// copy's removal.
func (s *Store) dropOrphanUndo() error {
	ents, err := os.ReadDir(procFd(s.undofd))
	if err != nil {
		return err
	}
	for _, e := range ents {
		var g layer.Gfid
		var st unix.Stat_t
		if g.UnmarshalText([]byte(e.Name())) != nil || unix.Fstatat(s.idfd, idName(g), &st, unix.AT_SYMLINK_NOFOLLOW) == unix.ENOENT {
			unix.Unlinkat(s.undofd, e.Name(), 0)
		}
	}
	return nil
}
