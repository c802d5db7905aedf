package brick

import (
	"context"
	"errors"
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

// Abandoned changes of names. A client that dies between sending a
// create, removal or rename to one brick of a replicated set and to
// another leaves the directory's copies with different names and nothing
// marked, like an abandoned write. A brick cannot tell which of the
// changes a connection made are the ones still on their way elsewhere,
// but they are among its last: a client waits for every brick before it
// goes on, so only the operations it has under way (a few hundred at
// most) can be half done. The brick keeps the last maxTouched directories
// whose names a connection changed and, when the connection ends without
// a goodbye (OpGoodbye, which a client sends only with nothing under
// way), marks them layer.Dirty; the healer compares their copies' names
// once quiet and gives every copy the names any has (heal/abandoned.go).
// Only clients of goodbyeVersion and later are tracked: an older client
// never says goodbye.

// goodbyeVersion is the first protocol version with OpGoodbye.
const goodbyeVersion = 9

// maxTouched bounds the directories a connection remembers.
const maxTouched = 1024

// touchedDirs are the directories whose names a connection changed, the
// least recent first to go.
type touchedDirs struct {
	on    bool // tracked at all (a replicated brick, a client that says goodbye)
	mu    sync.Mutex
	seq   uint64
	dirs  map[string]uint64 // directory → when last touched (seq)
	clean bool              // the client said goodbye
}

// changesNames lists the operations that change names, and so their
// parents' entries.
var changesNames = map[uint8]bool{
	wire.OpCreate: true, wire.OpMake: true, wire.OpMknod: true, wire.OpMkdir: true, wire.OpSymlink: true,
	wire.OpLink: true, wire.OpUnlink: true, wire.OpUnlinkData: true, wire.OpRmdir: true, wire.OpRename: true,
}

// touch notes the directories request r (its paths checked) changes the
// names of, before it runs: the client may die while it does.
func (t *touchedDirs) touch(r *wire.Request) {
	if !t.on || !changesNames[r.Op] {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clean = false
	switch r.Op {
	case wire.OpLink:
		t.add(r.Path2)
	case wire.OpRename:
		t.add(r.Path)
		t.add(r.Path2)
	default:
		t.add(r.Path)
	}
}

// add notes the parent of path; the oldest goes when there are too many.
func (t *touchedDirs) add(path string) {
	dir, _ := layer.Split(path)
	if t.dirs == nil {
		t.dirs = map[string]uint64{}
	}
	t.seq++
	t.dirs[dir] = t.seq
	if len(t.dirs) <= maxTouched {
		return
	}
	oldest, at := "", uint64(math.MaxUint64)
	for d, s := range t.dirs {
		if s < at {
			oldest, at = d, s
		}
	}
	delete(t.dirs, oldest)
}

// goodbye records that the client ends the connection cleanly.
func (t *touchedDirs) goodbye() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clean, t.dirs = true, nil
}

// abandoned returns the directories to mark as the connection ends.
func (t *touchedDirs) abandoned() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.clean {
		return nil
	}
	dirs := make([]string, 0, len(t.dirs))
	for d := range t.dirs {
		dirs = append(dirs, d)
	}
	t.dirs = nil
	return dirs
}

// markDirs marks layer.Dirty the directories the connection changed last
// if it ended without a goodbye.
func (c *conn) markDirs() {
	dirs := c.names.abandoned()
	hs, ok := c.l.(layer.HealStore)
	if len(dirs) == 0 || !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	marked := 0
	for _, d := range dirs {
		err := hs.MarkPending(ctx, d, layer.Gfid{}, layer.Dirty)
		switch {
		case err == nil:
			marked++
		case !errors.Is(err, syscall.ENOENT):
			c.log.Warn("a directory changed by a client that went away could not be marked for heal", "path", d, "err", err)
		}
	}
	c.log.Info("a client went away without a goodbye: the directories it changed last marked for heal", "count", marked)
}
