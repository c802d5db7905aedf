package layer

import (
	"context"
	"syscall"
)

// Gap is a range of a file that a write leaves as it is: the write's data
// up to At goes at the write's offset, the rest Len bytes further on.
type Gap struct{ At, Len uint32 }

// GapWriter is a brick File that writes around a gap in one request:
// p[:gap.At] at off and p[gap.At:] at off+gap.At+gap.Len, with one Txn
// (the protocol client, and the posix storage). Disperse writes a stripe
// record's header and the few blocks a small write changes so, rather
// than everything in between. n counts the bytes of p written; a short
// count comes with an error.
type GapWriter interface {
	WriteGap(ctx context.Context, p []byte, off int64, gap Gap) (n int, err error)
}

// WriteGap writes through f around gap if f is a GapWriter, and fails
// with ENOSYS if it is not: for layers that wrap a brick's Files.
func WriteGap(ctx context.Context, f File, p []byte, off int64, gap Gap) (int, error) {
	gw, ok := f.(GapWriter)
	if !ok {
		return 0, syscall.ENOSYS
	}
	return gw.WriteGap(ctx, p, off, gap)
}
