package posix

import "golang.org/x/sys/unix"

// The reserve (GlusterFS's storage.reserve): a brick refuses with ENOSPC
// what would take new space for data (writes, fallocate, new inodes)
// once the space left on its file system falls below the reserve, and
// keeps that space for what records the state of the volume: pending
// marks, heal and gfid index entries, sizes. Without it, a brick whose
// file system filled could take a write while its peers refused it, and
// then not record that they missed it: copies that differ with no mark.
// Removals and metadata changes go on, so that space can be freed.

// Reserve bounds: 1 % of the file system, at least minReserve, at most
// maxReserve.
const (
	minReserve = 1 << 20
	maxReserve = 1 << 30
)

// reserveOf is the reserve of a file system of total bytes.
func reserveOf(total uint64) uint64 {
	return min(max(total/100, minReserve), maxReserve)
}

// initReserve sets the brick's reserve from its file system's size.
func (s *Store) initReserve() {
	var st unix.Statfs_t
	if unix.Fstatfs(s.rootfd, &st) == nil {
		s.reserve.Store(reserveOf(st.Blocks * uint64(st.Bsize)))
	}
}

// SetReserve sets the free space, in bytes, below which the brick
// refuses what takes new space (0: none; math.MaxUint64 makes the brick
// behave as one whose file system is full, marks and indexes aside: the
// simulation's full disks). It returns the reserve it replaces.
func (s *Store) SetReserve(bytes uint64) uint64 {
	return s.reserve.Swap(bytes)
}

// roomy fails with ENOSPC if the brick's free space is below its reserve.
func (s *Store) roomy() error {
	reserve := s.reserve.Load()
	if reserve == 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(s.rootfd, &st); err != nil {
		return nil // the operation itself will say
	}
	if st.Bavail*uint64(st.Bsize) < reserve {
		return unix.ENOSPC
	}
	return nil
}

// availBeyondReserve is the blocks st says are available less the
// reserve, which callers cannot use (GlusterFS's statfs takes its
// storage.reserve off too): 0 when the brick refuses new data.
func (s *Store) availBeyondReserve(st *unix.Statfs_t) uint64 {
	reserve := s.reserve.Load()
	avail := st.Bavail * uint64(st.Bsize)
	if reserve == 0 || st.Bsize <= 0 {
		return st.Bavail
	}
	if avail < reserve {
		return 0
	}
	return (avail - reserve) / uint64(st.Bsize)
}

// roomyAt is roomy for making the name a: EEXIST, as without the reserve,
// if it is taken.
func (s *Store) roomyAt(a at) error {
	err := s.roomy()
	var st unix.Stat_t
	if err != nil && unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		return unix.EEXIST
	}
	return err
}
