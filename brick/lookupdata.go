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
// between the lookup and a getattr of the file opened, and given only if
// the file did not change in between (same gfid, size, mtime and ctime);
// the answer carries the getattr's attributes, and without content if it
// changed: the client reads as usual. With wire.LookupFragment, the
// content is the file as it lies here, whole, if at most r.Max bytes long
// (a disperse fragment, whose length the size reported does not tell).
func (c *conn) lookupData(ctx context.Context, r *wire.Request, e *wire.Enc) error {
	a, err := c.l.Lookup(ctx, r.Path)
	if err != nil {
		return err
	}
	limit := uint64(min(r.Max, maxLookupData))
	if !a.IsReg() || a.Linkto != "" || a.Size > limit {
		e.LookupData(&a, nil)
		return nil
	}
	whole := r.Flags&wire.LookupFragment != 0
	want := a.Size
	if whole {
		want = limit
	}
	buf := wire.GetBuf(int(want) + 1) // one more: a file that grew is seen
	defer wire.PutBuf(buf)            // the answer copies what it sends
	n, b, err := c.readSmall(ctx, r.Path, buf)
	if err != nil {
		e.LookupData(&a, nil) // the lookup stands; the read is the client's again
		return nil
	}
	var data []byte
	if unchanged(a, b) && (uint64(n) == b.Size || whole && uint64(n) <= limit) {
		data = buf[:n]
	}
	e.LookupData(&b, data)
	return nil
}

// readSmall reads the file at path from its start into p, through the
// brick's own layers (so that it sees what their locks and caches see),
// and returns the open file's attributes after the read. It leaves the
// atime alone: a lookup must not change what stat shows.
func (c *conn) readSmall(ctx context.Context, path string, p []byte) (int, layer.Attr, error) {
	f, err := c.l.Open(ctx, path, syscall.O_RDONLY|syscall.O_NOATIME)
	if err != nil {
		return 0, layer.Attr{}, err
	}
	defer f.Release(context.WithoutCancel(ctx))
	n, err := f.Read(ctx, p, 0) // short only at end of file
	if err != nil {
		return 0, layer.Attr{}, err
	}
	a, err := f.Getattr(ctx)
	return n, a, err
}

// unchanged reports whether two looks at a file saw the same content: the
// same inode with the same size, mtime and ctime.
func unchanged(a, b layer.Attr) bool {
	return a.Gfid == b.Gfid && a.Size == b.Size && a.Mtime == b.Mtime && a.Ctime == b.Ctime
}
