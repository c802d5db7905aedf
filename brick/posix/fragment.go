package posix

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// XattrSize holds, on a disperse brick (Options.Disperse), the size of the
// file a fragment belongs to: a fragment's own length is the length of its
// part of the stripes, not the file's size. Lookups report it as the
// regular file's size, so that every layer above sees the file's size.
const XattrSize = "trusted.mortar.size"

// withFileSize replaces a's size by the file size recorded on a disperse
// fragment.
func (s *Store) withFileSize(a *layer.Attr, ino inode) error {
	if !s.disperse || !a.IsReg() || a.Linkto != "" {
		return nil
	}
	n, err := ino.u64(XattrSize)
	a.Size = n
	return err
}

// recordSize records the file size a disperse operation carries (see
// layer.Txn): with exact, as is (a truncate), otherwise raised to at least
// it (a write). The caller holds the inode's mark lock, which orders the
// writes of one brick.
func (s *Store) recordSize(ctx context.Context, ino inode, exact bool) error {
	t := layer.TxnFrom(ctx)
	if !s.disperse || !t.SetSize {
		return nil
	}
	if !exact {
		cur, err := ino.u64(XattrSize)
		if err != nil || cur >= t.Size {
			return err
		}
	}
	return ino.setU64(XattrSize, t.Size)
}

// checkFragmentTruncate refuses, on a disperse brick, a truncate that does
// not say the file's size: the fragment's length alone cannot tell it.
func (s *Store) checkFragmentTruncate(ctx context.Context, in layer.SetattrIn) error {
	if s.disperse && in.Valid&layer.SetSize != 0 && !layer.TxnFrom(ctx).SetSize {
		return unix.EINVAL
	}
	return nil
}

// truncatedFragment forgets the file size of a fragment opened with
// O_TRUNC.
func (s *Store) truncatedFragment(f *file, flags int) error {
	if !s.disperse || flags&unix.O_TRUNC == 0 || f.isDir {
		return nil
	}
	return f.ino().setU64(XattrSize, 0)
}
