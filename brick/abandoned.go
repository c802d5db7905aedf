package brick

import (
	"context"
	"errors"
	"maps"
	"math"
	"sync"
	"syscall"
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

// Abandoned changes of names and metadata. A client that dies between
// sending a create, removal or rename (or a chmod, truncate or setxattr
// by path) to one brick of a replicated set and to another leaves the
// copies different and nothing marked, like an abandoned write. A brick
// cannot tell which of the changes a connection made are the ones still
// on their way elsewhere, but they are among its last: a client waits
// for every brick before it goes on, so only the operations it has under
// way (a few hundred at most) can be half done. The brick keeps the last
// maxTouched inodes a connection changed this way (the parent directory
// of a name changed, the inode itself for metadata) and, when the
// connection ends without a goodbye (OpGoodbye, which a client sends
// only with nothing under way), marks them layer.Dirty; the healer
// compares their copies once quiet (heal/abandoned.go). A brick of a
// dispersed set tracks the changes of names only (a file's fragments
// have the disperse writers' own marks). Only clients of goodbyeVersion
// and later are tracked: an older client never says goodbye.

// goodbyeVersion is the first protocol version with OpGoodbye.
const goodbyeVersion = 9

// maxTouched bounds the inodes a connection remembers.
const maxTouched = 1024

// changedInodes are the paths of the inodes a connection changed, the least
// recent first to go.
type changedInodes struct {
	on    bool // tracked at all (a replicated or dispersed brick, a client that says goodbye)
	meta  bool // metadata changes too (a replicated brick)
	mu    sync.Mutex
	seq   uint64
	paths map[string]uint64 // path → when last touched (seq)
	clean bool              // the client said goodbye
}

// makesNames lists the operations that make a name (a rename moves one
// to where its target is); changesNames those and the ones that remove
// names: they change their parents' entries; changesMeta those that
// change the inode at their path.
var (
	makesNames = map[uint8]bool{
		wire.OpCreate: true, wire.OpMake: true, wire.OpMknod: true, wire.OpMkdir: true, wire.OpSymlink: true,
		wire.OpLink: true, wire.OpRename: true,
	}
	changesNames = withOps(makesNames, wire.OpUnlink, wire.OpUnlinkData, wire.OpRmdir)
	changesMeta  = map[uint8]bool{wire.OpSetattr: true, wire.OpSetxattr: true, wire.OpRemovexattr: true}
)

// withOps returns a copy of set with ops added.
func withOps(set map[uint8]bool, ops ...uint8) map[uint8]bool {
	out := maps.Clone(set)
	for _, op := range ops {
		out[op] = true
	}
	return out
}

// touch notes the inodes request r (its paths checked) changes, before
// it runs: the client may die while it does.
func (t *changedInodes) touch(r *wire.Request) {
	if !t.on || !changesNames[r.Op] && !(t.meta && changesMeta[r.Op]) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clean = false
	switch r.Op {
	case wire.OpSetattr, wire.OpSetxattr, wire.OpRemovexattr:
		t.add(r.Path)
	case wire.OpLink:
		t.addParent(r.Path2)
	case wire.OpRename:
		t.addParent(r.Path)
		t.addParent(r.Path2)
	default:
		t.addParent(r.Path)
	}
}

func (t *changedInodes) addParent(path string) {
	dir, _ := layer.Split(path)
	t.add(dir)
}

// add notes path; the oldest goes when there are too many.
func (t *changedInodes) add(path string) {
	if t.paths == nil {
		t.paths = map[string]uint64{}
	}
	t.seq++
	t.paths[path] = t.seq
	if len(t.paths) <= maxTouched {
		return
	}
	oldest, at := "", uint64(math.MaxUint64)
	for p, s := range t.paths {
		if s < at {
			oldest, at = p, s
		}
	}
	delete(t.paths, oldest)
}

// goodbye records that the client ends the connection cleanly.
func (t *changedInodes) goodbye() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clean, t.paths = true, nil
}

// abandoned returns the paths to mark as the connection ends.
func (t *changedInodes) abandoned() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.clean {
		return nil
	}
	paths := make([]string, 0, len(t.paths))
	for p := range t.paths {
		paths = append(paths, p)
	}
	t.paths = nil
	return paths
}

// markTouched marks layer.Dirty the inodes the connection changed last
// if it ended without a goodbye.
func (c *conn) markTouched() {
	paths := c.touched.abandoned()
	hs, ok := c.l.(layer.HealStore)
	if len(paths) == 0 || !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	marked := 0
	for _, p := range paths {
		err := hs.MarkPending(ctx, p, layer.Gfid{}, layer.Dirty)
		switch {
		case err == nil:
			marked++
		case !errors.Is(err, syscall.ENOENT):
			c.log.Warn("an inode changed by a client that went away could not be marked for heal", "path", p, "err", err)
		}
	}
	c.log.Info("a client went away without a goodbye: what it changed last marked for heal", "count", marked)
}
