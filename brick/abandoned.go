package brick

import (
	"context"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// Abandoned writes. A replicated client sends each change to every brick
// of the set at once and learns of a brick that missed it only from the
// answers; a brick that failed is then marked as pending on the others.
// A client that dies (or loses its connections) between sending a write
// to one brick and to another learns nothing and marks nothing: the
// copies may differ with no mark blaming any. What a brick does know is
// that a connection ended with a file open that it had written to (or
// truncated opening it, or made with its data in one request). With
// BrickOptions.MarkAbandoned it marks such a file layer.Dirty (a pending
// mark that blames no replica) as it releases it, in its heal index like
// any mark, and the healer compares the copies (heal's Options.Quiet).
// A clean close (Release) marks nothing, and a write costs nothing more.

// changesData are the requests on an open file that change its data.
var changesData = map[uint8]bool{
	wire.OpWrite: true, wire.OpWriteGap: true, wire.OpFallocate: true, wire.OpFsetattr: true,
}

// changes reports whether request r changes the data of its open file
// on a brick that marks abandoned files (noted before it runs: a client
// may die while it does).
func (c *conn) changes(r *wire.Request) bool {
	return c.markAbandoned && changesData[r.Op] && (r.Op != wire.OpFsetattr || r.Setattr.Valid&layer.SetSize != 0)
}

// markTimeout bounds the marking of one file (a file frozen by a
// migration waits for its thaw).
const markTimeout = 5 * time.Second

// markDirty marks the open file f layer.Dirty: an empty write carrying
// the mark reaches the inode wherever it was renamed meanwhile.
func (c *conn) markDirty(f layer.File) error {
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	if _, err := f.Write(layer.WithTxn(ctx, layer.Txn{Pending: layer.Dirty}), nil, 0); err != nil {
		c.log.Warn("a file written by a client that went away could not be marked for heal", "err", err)
		return err
	}
	c.log.Info("a client went away with a file it wrote open: marked for heal")
	return nil
}
