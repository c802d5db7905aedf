package brick

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// Directory leases (layer.NameLeaser): a client that makes a directory
// with wire.MkdirLease is leased its names when no other connection
// touched the directory meanwhile. From then on, an operation of another
// connection on a name in the directory, on the directory itself or
// below it (any path operation whose path or whose parent is the
// directory, a rename of it or of a directory above it) first recalls the
// lease (a KindRecallDir frame) and waits until the holder returns it
// (OpDirLeaseReturn, after sending what it held back), its connection
// ends, or Limits.RecallTimeout passes: the holder is then cut off. A lease
// asked for a directory someone else's operation touches while it is
// being made is not granted: the client must know every name in it.
type dirLeases struct {
	mu     sync.Mutex
	byPath map[string]*dirLease
	byID   map[uint64]*dirLease
	held   map[*conn]int  // leases (and registrations) per connection
	busy   map[string]int // operations under way per directory they touch
	// renaming counts the renames under way by their source path (a
	// directory's moves its whole subtree); under counts the leases at
	// or below each path, so that a rename of a path with none below it
	// looks at no lease.
	renaming map[string]int
	under    map[string]int
	nextID   uint64
}

// dirLease is one directory's lease.
type dirLease struct {
	id      uint64 // 0 until granted
	path    string
	holder  *conn
	spoiled bool // another connection touched it before the grant
	recall  bool // a recall was sent
	ended   chan struct{}
}

// maxDirLeases bounds the leases one connection holds; past it, a mkdir
// is made without one.
const maxDirLeases = 4096

func newDirLeases() *dirLeases {
	return &dirLeases{byPath: map[string]*dirLease{}, byID: map[uint64]*dirLease{},
		held: map[*conn]int{}, busy: map[string]int{}, renaming: map[string]int{}, under: map[string]int{}}
}

// touched returns the directories whose leases request r conflicts with
// (the name it names in its parent, and the inode at its path), and
// whether it moves a subtree (a rename: leases below its source too).
func touched(r *wire.Request) (dirs []string, subtree bool) {
	switch {
	case r.Op == wire.OpRename:
		return append(pathDirs(r.Path), pathDirs(r.Path2)...), true
	case r.Op == wire.OpLink:
		return append(pathDirs(r.Path), pathDirs(r.Path2)...), false
	case r.Op == wire.OpEntrylk:
		return []string{r.Path}, false
	case isFileOp(r.Op), r.Op == wire.OpWatch, r.Op == wire.OpHealIndex,
		r.Op == wire.OpDropHealEntry, r.Op == wire.OpRemoved, r.Op == wire.OpDirLeaseReturn, r.Op == wire.OpHandshake:
		return nil, false
	}
	return pathDirs(r.Path), false
}

// pathDirs are the directories an operation on path touches: its parent
// and itself.
func pathDirs(path string) []string {
	if path == "/" {
		return []string{path}
	}
	dir, _ := layer.Split(path)
	return []string{dir, path}
}

// enter returns once no other connection holds a lease that r conflicts
// with, recalling them, and counts r in; leave counts it out, given r's
// outcome, and returns the id of the lease r was granted (a mkdir that
// asked for one), else 0. A lease asked with r is registered here.
func (t *dirLeases) enter(ctx context.Context, c *conn, r *wire.Request) (leave func(error) uint64, err error) {
	dirs, subtree := touched(r)
	if t == nil || dirs == nil {
		return func(error) uint64 { return 0 }, nil
	}
	for {
		t.mu.Lock()
		l := t.conflict(c, dirs, r, subtree)
		if l == nil {
			t.count(c, r, dirs, subtree, 1)
			t.mu.Unlock()
			return func(err error) uint64 { return t.leave(c, r, dirs, subtree, err) }, nil
		}
		t.recallLocked(l)
		t.mu.Unlock()
		if err := c.parked(func() error { return t.await(ctx, l) }); err != nil {
			return nil, err
		}
	}
}

// conflict spoils the registrations of others r touches, and returns a
// granted lease of another connection it must wait for (nil: none).
// t.mu is held.
func (t *dirLeases) conflict(c *conn, dirs []string, r *wire.Request, subtree bool) *dirLease {
	if len(t.byPath) == 0 {
		return nil
	}
	var wait *dirLease
	check := func(l *dirLease) {
		switch {
		case l == nil || l.holder == c:
		case l.id == 0:
			l.spoiled = true
		case wait == nil:
			wait = l
		}
	}
	for _, d := range dirs {
		check(t.byPath[d])
	}
	if subtree {
		t.eachBelow(r.Path, check)
	}
	return wait
}

// eachBelow calls fn for every lease strictly below path. t.mu is held.
func (t *dirLeases) eachBelow(path string, fn func(*dirLease)) {
	if t.under[path] == 0 || t.under[path] == 1 && t.byPath[path] != nil {
		return
	}
	prefix := strings.TrimSuffix(path, "/") + "/"
	for p, l := range t.byPath {
		if strings.HasPrefix(p, prefix) {
			fn(l)
		}
	}
}

// counted adds n to the leases counted at and above path. t.mu is held.
func (t *dirLeases) counted(path string, n int) {
	for p := path; ; p, _ = layer.Split(p) {
		if t.under[p] += n; t.under[p] == 0 {
			delete(t.under, p)
		}
		if p == "/" {
			return
		}
	}
}

// count counts r in (n = 1) or out (n = -1), and registers the lease a
// mkdir asks for. t.mu is held.
func (t *dirLeases) count(c *conn, r *wire.Request, dirs []string, subtree bool, n int) {
	if n > 0 && r.Op == wire.OpMkdir && r.Flags&wire.MkdirLease != 0 {
		t.register(c, r.Path)
	}
	for _, d := range dirs {
		if t.busy[d] += n; t.busy[d] == 0 {
			delete(t.busy, d)
		}
	}
	if subtree {
		if t.renaming[r.Path] += n; t.renaming[r.Path] == 0 {
			delete(t.renaming, r.Path)
		}
	}
}

// register records the lease c asks for on the directory at path, about
// to be made; spoiled at once if something is under way there or a
// rename of it or of a directory above it. A connection shutting down is
// given none (its leases are released, or about to be). t.mu is held.
func (t *dirLeases) register(c *conn, path string) {
	if t.byPath[path] != nil || t.held[c] >= maxDirLeases || c.ctx.Err() != nil {
		return
	}
	l := &dirLease{path: path, holder: c, ended: make(chan struct{}),
		spoiled: t.busy[path] > 0 || t.renamingAbove(path)}
	t.byPath[path] = l
	t.held[c]++
	t.counted(path, 1)
}

// renamingAbove reports whether a rename of path or of a directory above
// it is under way. t.mu is held.
func (t *dirLeases) renamingAbove(path string) bool {
	if len(t.renaming) == 0 {
		return false
	}
	for p := path; ; p, _ = layer.Split(p) {
		if t.renaming[p] > 0 {
			return true
		}
		if p == "/" {
			return false
		}
	}
}

// leave counts r out. A mkdir's lease is granted (its id returned) if
// its directory was made and nobody else touched it; a holder's own rmdir
// or rename ends the leases on what it removed or moved.
func (t *dirLeases) leave(c *conn, r *wire.Request, dirs []string, subtree bool, err error) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.count(c, r, dirs, subtree, -1)
	switch {
	case r.Op == wire.OpMkdir && r.Flags&wire.MkdirLease != 0:
		return t.grant(c, r.Path, err)
	case err != nil:
	case r.Op == wire.OpRmdir:
		t.dropOwn(c, r.Path, false)
	case r.Op == wire.OpRename:
		t.dropOwn(c, r.Path, true)
		t.dropOwn(c, r.Path2, false)
	}
	return 0
}

// grant grants the lease c registered on path, if its mkdir (which ended
// with err) made the directory and nobody else touched it; else drops it.
// t.mu is held.
func (t *dirLeases) grant(c *conn, path string, err error) uint64 {
	l := t.byPath[path]
	if l == nil || l.holder != c || l.id != 0 {
		return 0
	}
	if err != nil || l.spoiled || c.ctx.Err() != nil || c.fenced(wire.OpMkdir) != nil {
		t.dropLocked(l)
		return 0
	}
	t.nextID++
	l.id = t.nextID
	t.byID[l.id] = l
	return l.id
}

// dropOwn ends c's lease on path (and below it, with subtree). t.mu is
// held.
func (t *dirLeases) dropOwn(c *conn, path string, subtree bool) {
	if l := t.byPath[path]; l != nil && l.holder == c {
		t.dropLocked(l)
	}
	if subtree {
		t.eachBelow(path, func(l *dirLease) {
			if l.holder == c {
				t.dropLocked(l)
			}
		})
	}
}

// recallLocked sends l's recall once, and cuts its holder off if it is
// not returned in time. t.mu is held.
func (t *dirLeases) recallLocked(l *dirLease) {
	if l.recall {
		return
	}
	l.recall = true
	h := l.holder
	go func() {
		if err := h.w.Send(wire.Header{Kind: wire.KindRecallDir, ID: l.id}); err != nil {
			h.nc.Close() // the holder is gone: so is its lease
			t.mu.Lock()
			t.dropLocked(l)
			t.mu.Unlock()
		}
	}()
	time.AfterFunc(h.limits.RecallTimeout, func() {
		select {
		case <-l.ended:
			return
		default:
		}
		h.log.Warn("client did not return a recalled directory lease in time: disconnecting it", "dir", l.path)
		h.nc.Close()
		t.mu.Lock()
		t.dropLocked(l)
		t.mu.Unlock()
	})
}

// await waits until l ends or ctx is done.
func (t *dirLeases) await(ctx context.Context, l *dirLease) error {
	select {
	case <-l.ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// giveBack ends the lease id if c holds it (OpDirLeaseReturn); an unknown
// lease is no error (it ended otherwise).
func (t *dirLeases) giveBack(c *conn, id uint64) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.byID[id]; l != nil && l.holder == c {
		t.dropLocked(l)
	}
}

// release ends every lease c holds (its connection ended).
func (t *dirLeases) release(c *conn) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held[c] == 0 {
		return
	}
	for _, l := range t.byPath {
		if l.holder == c {
			t.dropLocked(l)
		}
	}
}

// dropLocked ends l, waking whoever waits for it. t.mu is held.
func (t *dirLeases) dropLocked(l *dirLease) {
	if t.byPath[l.path] != l {
		return // ended already
	}
	delete(t.byPath, l.path)
	delete(t.byID, l.id)
	if t.held[l.holder]--; t.held[l.holder] <= 0 {
		delete(t.held, l.holder)
	}
	t.counted(l.path, -1)
	close(l.ended)
}
