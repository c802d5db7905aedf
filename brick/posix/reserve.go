package posix

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The reserve (GlusterFS's storage.reserve): a brick refuses with ENOSPC
// what would take new space for data (writes, fallocate, new inodes)
// once the space left on its file system falls below the reserve, and
// keeps that space for what records the state of the volume: pending
// marks, heal and gfid index entries, sizes. Without it, a brick whose
// file system filled could take a write while its peers refused it, and
// then not record that they missed it: copies that differ with no mark.
// Removals and metadata changes go on, so that space can be freed.

// Reserve bounds: by default 1 % of the file system, at most maxReserve;
// whatever the volume's storage.reserve, at least minReserve (the room
// the marks need).
const (
	minReserve = 1 << 20
	maxReserve = 1 << 30
)

// Reserve is a brick's reserve as the volume option storage.reserve sets
// it: a percentage of its file system, or a number of bytes. The zero
// Reserve is the default.
type Reserve struct {
	Percent float64 // of the file system's size, when Bytes is 0
	Bytes   uint64
	Set     bool // false: the default
}

// ParseReserve reads storage.reserve: a percentage of the brick's file
// system ("2", "2%", "0.5"; 0 to 100) or a size ("500MB", "10GB", "1TB";
// powers of 1024), as GlusterFS takes it.
func ParseReserve(v string) (Reserve, error) {
	v = strings.TrimSpace(v)
	for i, unit := range []string{"KB", "MB", "GB", "TB"} {
		if num, ok := strings.CutSuffix(strings.ToUpper(v), unit); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(num), 10, 64)
			if err != nil || n > 1<<20 {
				return Reserve{}, fmt.Errorf("want a whole number of %s (at most 1048576)", unit)
			}
			return Reserve{Bytes: n << (10 * (i + 1)), Set: true}, nil
		}
	}
	p, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil || p < 0 || p > 100 {
		return Reserve{}, errors.New("want a percentage of the brick's file system (0 to 100) or a size such as 10GB")
	}
	return Reserve{Percent: p, Set: true}, nil
}

// of is the reserve, in bytes, on a file system of total bytes.
func (r Reserve) of(total uint64) uint64 {
	switch {
	case !r.Set:
		return min(max(total/100, minReserve), maxReserve)
	case r.Bytes > 0:
		return max(r.Bytes, minReserve)
	}
	return max(uint64(float64(total)*r.Percent/100), minReserve)
}

// ApplyReserve sets the brick's reserve to r, of its file system's size
// (the volume's storage.reserve changed while the brick runs).
func (s *Store) ApplyReserve(r Reserve) {
	var st unix.Statfs_t
	if unix.Fstatfs(s.rootfd, &st) == nil {
		s.reserve.Store(r.of(st.Blocks * uint64(st.Bsize)))
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
