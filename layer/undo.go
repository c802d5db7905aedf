package layer

import (
	"context"
	"syscall"
)

// UndoReader is a brick File that reads its inode's undo copy (the
// protocol client, and the posix storage of a disperse brick). A
// disperse brick, before a write that carries the Dirty mark and
// Txn.KeepUndo, keeps what the write is about to replace, within the
// file's length, at the same offsets of the copy; the copy goes with the
// inode's Dirty mark. So at each offset it holds what the latest such
// write replaced there, zeros where none did, and a read that overlaps
// nothing kept answers n = 0. Heal puts a disperse stripe that a dying
// client's write left on too few bricks back as it was from it.
type UndoReader interface {
	ReadUndo(ctx context.Context, p []byte, off int64) (n int, err error)
}

// ReadUndo reads f's undo copy if f is an UndoReader, and fails with
// ENOSYS if it is not: for layers that wrap a brick's Files.
func ReadUndo(ctx context.Context, f File, p []byte, off int64) (int, error) {
	ur, ok := f.(UndoReader)
	if !ok {
		return 0, syscall.ENOSYS
	}
	return ur.ReadUndo(ctx, p, off)
}
