package brick

import (
	"context"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// maxLookupData caps the content one LookupData answer carries, whatever
// the client asks: small files only, and well under a frame.
const maxLookupData = 1 << 20

// lookupData answers OpLookupData (see layer.DataLooker): the attributes
// of the inode at r.Path and, for a regular file of at most r.Max bytes
// that is not a distribute pointer, its content. The content is read
// between two lookups and given only if the file did not change in
// between (same gfid, size, mtime and ctime); otherwise the second
// lookup's attributes go alone, and the client reads as usual.
func (c *conn) lookupData(ctx context.Context, r *wire.Request, e *wire.Enc) error {
	a, err := c.l.Lookup(ctx, r.Path)
	if err != nil {
		return err
	}
	if !a.IsReg() || a.Linkto != "" || a.Size > uint64(min(r.Max, maxLookupData)) {
		e.LookupData(&a, nil)
		return nil
	}
	buf := make([]byte, a.Size+1) // one more: a file that grew is seen
	n, err := c.readSmall(ctx, r.Path, buf)
	if err != nil {
		e.LookupData(&a, nil) // the lookup stands; the read is the client's again
		return nil
	}
	b, err := c.l.Lookup(ctx, r.Path)
	if err != nil {
		return err
	}
	var data []byte
	if unchanged(a, b) && uint64(n) == b.Size {
		data = buf[:n]
	}
	e.LookupData(&b, data)
	return nil
}

// readSmall reads the file at path from its start into p, through the
// brick's own layers (so that it sees what their locks and caches see),
// without touching its atime: a lookup must not change what stat shows.
func (c *conn) readSmall(ctx context.Context, path string, p []byte) (int, error) {
	f, err := c.l.Open(ctx, path, syscall.O_RDONLY|syscall.O_NOATIME)
	if err != nil {
		return 0, err
	}
	defer f.Release(context.WithoutCancel(ctx))
	return f.Read(ctx, p, 0) // short only at end of file
}

// unchanged reports whether two lookups of one name saw the same content:
// the same inode with the same size, mtime and ctime.
func unchanged(a, b layer.Attr) bool {
	return a.Gfid == b.Gfid && a.Size == b.Size && a.Mtime == b.Mtime && a.Ctime == b.Ctime
}
