package posix

import (
	"context"
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// Removals (layer.HealStore.Removed). A name removed from a directory by
// an operation some replicas miss (its Txn has pending replicas: unlink,
// rmdir, a rename's source, the inode a rename replaced) is recorded in
// RemovedDir, in a file named after the directory's gfid: records of the
// removed inode's gfid (16 bytes), the name's length (2 bytes, little
// endian) and the name, appended. When copies of the directory blame
// each other, their names are merged: the records tell a name another
// copy holds because it missed its removal from one made there since
// (without them a merge brings removed names back). The file goes with
// the directory's last mark (ClearPending) and with the directory.
// Recording is best effort: a name whose record failed (a full disk) is
// merged back, as it was before records.
const RemovedDir = HiddenDir + "/removed"

// maxRemovedFile bounds what Removed reads of one directory's records.
const maxRemovedFile = 16 << 20

// openRemoved makes and opens RemovedDir.
func openRemoved(rootfd int) (int, error) {
	if err := unix.Mkdirat(rootfd, RemovedDir, 0o700); err != nil && err != unix.EEXIST {
		return -1, err
	}
	return unix.Openat(rootfd, RemovedDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// recordRemoval records that name, inode g, left directory dir, if the
// operation in ctx is one some replicas miss, or the directory's copies
// already differ (it blames a replica): a replica sent the operation may
// yet be found to have missed it only from its answer (it lacked the
// name: replicate's goneAlready, sourceMissed), and is marked after the
// fact, when nothing records the removal any more (sim disperse2+1 seed
// 85: a rename over a name one brick lacked the source of; the replaced
// inode came back in a merge).
func (s *Store) recordRemoval(ctx context.Context, dir inode, name string, g layer.Gfid) {
	if g.IsZero() {
		return
	}
	if layer.TxnFrom(ctx).Pending&^layer.Dirty == 0 { // Dirty blames no replica
		if m, err := dir.pending(); err != nil || m&^layer.Dirty == 0 {
			return
		}
	}
	dg, err := dir.gfid(s)
	if err == nil {
		err = s.appendRemoval(dg, name, g)
	}
	if err != nil {
		s.log.Warn("removal not recorded: a merge of the directory's copies may bring the name back", "brick", s.root, "dir", dir.path, "name", name, "err", err)
	}
}

// appendRemoval appends one record to directory dg's file.
func (s *Store) appendRemoval(dg layer.Gfid, name string, g layer.Gfid) error {
	fd, err := unix.Openat(s.removedfd, dg.String(), unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	rec := make([]byte, 0, 18+len(name))
	rec = append(rec, g[:]...)
	rec = binary.LittleEndian.AppendUint16(rec, uint16(len(name)))
	rec = append(rec, name...)
	n, err := unix.Write(fd, rec)
	if err == nil && n != len(rec) {
		err = unix.EIO
	}
	return err
}

// dropRemovals forgets directory dg's records.
func (s *Store) dropRemovals(dg layer.Gfid) {
	if err := unix.Unlinkat(s.removedfd, dg.String(), 0); err != nil && err != unix.ENOENT {
		s.log.Warn("removal records not dropped", "brick", s.root, "gfid", dg, "err", err)
	}
}

// Removed lists the names recorded as removed from directory dir while
// some replicas missed it, oldest first.
func (s *Store) Removed(ctx context.Context, dir string) ([]layer.Removal, error) {
	a, err := s.resolve(dir, false)
	if err != nil {
		return nil, err
	}
	defer a.close()
	dg, err := readGfid(procAt(a.dir, a.name), -1)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Openat(s.removedfd, dg.String(), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err == unix.ENOENT {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf, err := readAllFd(fd, maxRemovedFile)
	if err != nil {
		return nil, err
	}
	return parseRemovals(buf), nil
}

// readAllFd reads fd from its start, at most limit bytes.
func readAllFd(fd int, limit int) ([]byte, error) {
	var buf []byte
	chunk := make([]byte, 64<<10)
	for len(buf) < limit {
		n, err := unix.Read(fd, chunk)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		buf = append(buf, chunk[:n]...)
	}
	return buf, nil
}

// parseRemovals decodes records; a record cut short (a crash mid-append)
// ends them.
func parseRemovals(b []byte) []layer.Removal {
	var out []layer.Removal
	for len(b) >= 18 {
		n := int(binary.LittleEndian.Uint16(b[16:18]))
		if len(b) < 18+n {
			break
		}
		var r layer.Removal
		copy(r.Gfid[:], b[:16])
		r.Name = string(b[18 : 18+n])
		out = append(out, r)
		b = b[18+n:]
	}
	return out
}
