package layer

import (
	"context"
	"syscall"
)

// DataUnlinker is a layer that can remove a name only if it is not a
// distribute pointer file (a name whose data lives on another child):
// distribute removes a file's name on its hashed child in one round trip,
// without first looking up where the data is, and falls back to the
// lookup when the hashed child holds only a pointer (EREMOTE) or nothing
// (ENOENT). The network client, replicate (so disperse) and the brick's
// layers implement it.
type DataUnlinker interface {
	// UnlinkData is Unlink, but fails with EREMOTE, removing nothing,
	// if path names a pointer file.
	UnlinkData(ctx context.Context, path string) error
}

// UnlinkData runs l's UnlinkData, or fails with ENOSYS if l has none.
func UnlinkData(ctx context.Context, l Layer, path string) error {
	if u, ok := l.(DataUnlinker); ok {
		return u.UnlinkData(ctx, path)
	}
	return syscall.ENOSYS
}
