package posix

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// Migration (distribute's rebalance) moves a regular file from this brick
// to another while clients keep it open. The rebalancer drives it with
// Setxattr of XattrMigrate on the file's path; the brick intercepts the
// name and never stores it. The value is a command, a space, the gfid the
// inode at the path must have (ESTALE otherwise), and for "moved" a space
// and the id of the brick (distribute child) now holding the data:
//
//	watch GFID        start noting changes: every modifying operation on the
//	                  inode from now on marks it changed
//	freeze GFID [N]   hold (block, not fail) every modifying operation on
//	                  the inode, after letting those in flight finish; the
//	                  answer is ESTALE if it changed since watch (it is
//	                  frozen all the same), EMLINK if it has another number
//	                  of names than N (default 1)
//	thaw GFID         end watch and freeze: held operations proceed
//	moved GFID CHILD [N NAME...]
//	                  under the freeze: turn the inode into a distribute
//	                  pointer to CHILD (mode 01000, size 0, linkto) under
//	                  every name at once, and answer EREMOTE from then on to
//	                  every operation on its open files but Getattr (which
//	                  reports the pointer, Linkto set); held operations get
//	                  EREMOTE too. Then its names are removed: the path,
//	                  or, for a file with N names, every NAME listed
//	                  (base64url paths, unpadded). EMLINK if it has another
//	                  number of names (default 1), ESTALE if a NAME is not
//	                  one of them.
//
// A freeze also holds the operations on the inode's names: making one
// (Link), renaming one away, renaming another file over one, removing one.
// A file with several names moves all of them at once, and they must stay
// those the rebalancer found until it has moved; then the held operations
// answer EREMOTE, and distribute does them where the file went.
//
// A freeze ends by itself after Options.FreezeTimeout (the rebalancer may
// have died), a watch after an hour. Nothing is persistent: a brick that
// restarts has no open files and no freezes, and a file half migrated is
// either still data here (the rebalancer redoes it) or a pointer.
//
// The state lives in a registry of the inodes that have open files or a
// migration under way, keyed by device and inode number. An open file
// holds its inode's entry, so the write path costs a read lock and an
// atomic load; path operations that modify an inode look the registry up
// only while a migration is under way on the brick.
const XattrMigrate = "trusted.mortar.migrate"

// DefaultFreezeTimeout bounds a freeze that is never thawed.
const DefaultFreezeTimeout = 30 * time.Second

// watchTimeout bounds a watch that is never ended.
const watchTimeout = time.Hour

// Migration state bits of an inode.
const (
	migWatched = 1 << iota
	migFrozen
	migMoved
)

// inoKey names an inode of the brick's file system.
type inoKey struct{ dev, ino uint64 }

func keyOf(st *unix.Stat_t) inoKey { return inoKey{dev: uint64(st.Dev), ino: st.Ino} }

// migEntry is the migration state of one inode.
type migEntry struct {
	key inoKey
	// mu is held shared by every operation on an open file of the inode
	// (and by path operations that modify it during a migration), and
	// exclusively to change state, so that a freeze or a move waits for
	// the operations in flight.
	mu    sync.RWMutex
	state atomic.Uint32
	dirty atomic.Bool   // a modification since watch
	thaw  chan struct{} // closed when a freeze ends; guarded by mu

	// guarded by the registry's mu:
	refs      int // open files, plus one for a watch or freeze under way
	migrating bool
	timer     *time.Timer
	gen       uint64 // tells an expiring timer whether its freeze is still the one
}

// migRegistry is the store's table of migEntry.
type migRegistry struct {
	mu     sync.Mutex
	m      map[inoKey]*migEntry
	active atomic.Int32 // entries with a watch or freeze under way
	// gate orders path operations against the start of a watch: they hold
	// it shared while they check active and run, a watch takes it
	// exclusively to raise active, so no path operation that skipped the
	// registry is still running once a watch has begun.
	gate          sync.RWMutex
	freezeTimeout time.Duration
}

// entry returns key's entry, made if needed (r.mu held).
func (r *migRegistry) entry(key inoKey) *migEntry {
	if r.m == nil {
		r.m = map[inoKey]*migEntry{}
	}
	e := r.m[key]
	if e == nil {
		e = &migEntry{key: key}
		r.m[key] = e
	}
	return e
}

// acquire returns key's entry, made if needed, with one more reference.
func (r *migRegistry) acquire(key inoKey) *migEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry(key)
	e.refs++
	return e
}

// release drops a reference to e.
func (r *migRegistry) release(e *migEntry) {
	if e == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e.refs--
	if e.refs <= 0 && r.m[e.key] == e {
		delete(r.m, e.key)
	}
}

// lookup returns key's entry or nil.
func (r *migRegistry) lookup(key inoKey) *migEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[key]
}

// Kinds of operation, for migEntry.enter.
const (
	opStat   = iota // Getattr: answered even when moved
	opRead          // reads, fsync: EREMOTE when moved
	opModify        // anything changing the inode: held while frozen
	// opRemove is the removal of a name of the inode (an unlink, a
	// rename over it): held while frozen, since a migration moves every
	// name of a file at once and must find those it was told; once the
	// inode has moved, EREMOTE (its names are gone from here, see moved),
	// and the caller does it where the file went.
	opRemove
)

// enter is called before an operation of kind on an open file of e's
// inode; if it returns nil the caller must call e.leave when done.
func (e *migEntry) enter(ctx context.Context, kind int) error {
	if e == nil {
		return nil
	}
	for {
		e.mu.RLock()
		st := e.state.Load()
		switch {
		case st == 0:
			return nil
		case st&migMoved != 0 && kind != opStat:
			e.mu.RUnlock()
			return unix.EREMOTE
		case kind < opModify || st&migMoved != 0:
			return nil
		case st&migFrozen == 0:
			if kind == opModify {
				e.dirty.Store(true)
			}
			return nil
		}
		ch := e.thaw
		e.mu.RUnlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (e *migEntry) leave() {
	if e != nil {
		e.mu.RUnlock()
	}
}

// holdPath is enter(opModify) for a path operation that modifies the
// inode a names. It returns the function to call when done. While no
// migration is under way on the brick it costs a shared lock and an atomic
// load; otherwise a stat and a registry lookup.
func (s *Store) holdPath(ctx context.Context, a at) (func(), error) {
	return s.hold(ctx, holding{a, opModify})
}

// holdRemoval is holdPath for the removal of the name a (opRemove).
func (s *Store) holdRemoval(ctx context.Context, a at) (func(), error) {
	return s.hold(ctx, holding{a, opRemove})
}

// holdRenamed holds a rename's source (as holdPath) and the inode it
// replaces, if another (as holdRemoval).
func (s *Store) holdRenamed(ctx context.Context, from, to at) (func(), error) {
	var fst, tst unix.Stat_t
	if s.mig.active.Load() == 0 || // no migration: spare the stats (hold looks again)
		unix.Fstatat(to.dir, to.name, &tst, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		unix.Fstatat(from.dir, from.name, &fst, unix.AT_SYMLINK_NOFOLLOW) == nil && keyOf(&fst) == keyOf(&tst) {
		return s.hold(ctx, holding{from, opModify})
	}
	return s.hold(ctx, holding{to, opRemove}, holding{from, opModify})
}

// holding is an inode an operation holds, and the kind of operation.
type holding struct {
	a    at
	kind int
}

// hold enters the migration entries of the inodes hs name, in order, if
// they have one, and returns the function that leaves them. With none it
// keeps the registry's gate until done, so that no watch of them can
// begin under the operation.
func (s *Store) hold(ctx context.Context, hs ...holding) (func(), error) {
	r := &s.mig
	r.gate.RLock()
	if r.active.Load() == 0 {
		return r.gate.RUnlock, nil
	}
	es := make([]*migEntry, len(hs))
	found := false
	for i, h := range hs {
		var st unix.Stat_t
		if h.a.isRoot() || unix.Fstatat(h.a.dir, h.a.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue // the operation will fail the same way, or not touch it
		}
		if es[i] = r.acquireExisting(keyOf(&st)); es[i] != nil {
			found = true
		}
	}
	if !found {
		return r.gate.RUnlock, nil
	}
	r.gate.RUnlock() // never held while waiting for a thaw
	leave := func(n int) {
		for _, e := range es[:n] {
			if e != nil {
				e.leave()
			}
		}
		for _, e := range es {
			r.release(e)
		}
	}
	for i, e := range es {
		if e == nil {
			continue
		}
		if err := e.enter(ctx, hs[i].kind); err != nil {
			leave(i)
			return noop, err
		}
	}
	return func() { leave(len(es)) }, nil
}

// acquireExisting returns key's entry with one more reference, or nil.
func (r *migRegistry) acquireExisting(key inoKey) *migEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[key]
	if e != nil {
		e.refs++
	}
	return e
}

// migrate runs a migration command (see XattrMigrate).
func (s *Store) migrate(ctx context.Context, path string, value []byte) error {
	f := strings.Fields(string(value))
	if len(f) < 2 {
		return unix.EINVAL
	}
	var g layer.Gfid
	if err := g.UnmarshalText([]byte(f[1])); err != nil {
		return unix.EINVAL
	}
	a, err := s.resolve(path, false)
	if err != nil {
		return err
	}
	defer a.close()
	if a.isRoot() {
		return unix.EINVAL
	}
	var st unix.Stat_t
	if err := unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return unix.EINVAL
	}
	if cur, err := s.gfidOf(procAt(a.dir, a.name), -1); err != nil {
		return err
	} else if cur != g {
		return unix.ESTALE
	}
	key := keyOf(&st)
	switch {
	case f[0] == "watch" && len(f) == 2:
		s.watch(key)
		return nil
	case f[0] == "freeze" && (len(f) == 2 || len(f) == 3):
		want, err := namesArg(f[2:])
		if err != nil {
			return err
		}
		return s.freeze(key, s.names(&st, g), want)
	case f[0] == "thaw" && len(f) == 2:
		s.thaw(key)
		return nil
	case f[0] == "moved" && len(f) >= 3:
		want, err := namesArg(f[3:])
		if err != nil {
			return err
		}
		names, err := movedNames(path, f[min(4, len(f)):], want)
		if err != nil {
			return err
		}
		return s.moved(key, a, g, f[2], want, names)
	}
	return unix.EINVAL
}

// movedNames decodes the names a moved command lists (base64url paths,
// unpadded): every name of an inode with several; for one, path.
func movedNames(path string, args []string, want uint64) ([]string, error) {
	if want == 1 && len(args) == 0 {
		return []string{path}, nil
	}
	if uint64(len(args)) != want {
		return nil, unix.EINVAL
	}
	names := make([]string, len(args))
	for i, arg := range args {
		b, err := base64.RawURLEncoding.DecodeString(arg)
		if err != nil || layer.CheckPath(string(b)) != nil {
			return nil, unix.EINVAL
		}
		names[i] = string(b)
	}
	return names, nil
}

// namesArg is the number of names a command expects the inode to have:
// the optional argument, or 1.
func namesArg(arg []string) (uint64, error) {
	if len(arg) == 0 {
		return 1, nil
	}
	n, err := strconv.ParseUint(arg[0], 10, 32)
	if err != nil || n == 0 {
		return 0, unix.EINVAL
	}
	return n, nil
}

// begin puts key's entry under migration (watch or freeze) if it is not
// already, and returns it. The caller holds no lock.
func (s *Store) begin(key inoKey) *migEntry {
	r := &s.mig
	r.gate.Lock() // path operations that skipped the registry are done
	defer r.gate.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry(key)
	if !e.migrating {
		e.migrating = true
		e.refs++
		r.active.Add(1)
	}
	return e
}

// end takes e out of migration: its state is left as set (moved stays).
// The caller holds e.mu exclusively.
func (s *Store) end(e *migEntry) {
	r := &s.mig
	r.mu.Lock()
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	e.gen++
	was := e.migrating
	e.migrating = false
	r.mu.Unlock()
	if was {
		r.active.Add(-1)
		r.release(e)
	}
}

// arm (re)starts e's expiry timer: after d the migration ends by itself.
func (s *Store) arm(e *migEntry, d time.Duration) {
	r := &s.mig
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.timer != nil {
		e.timer.Stop()
	}
	e.gen++
	gen := e.gen
	e.timer = time.AfterFunc(d, func() {
		r.mu.Lock()
		stale := e.gen != gen
		r.mu.Unlock()
		if stale {
			return
		}
		s.log.Warn("migration freeze expired: the rebalancer stopped", "brick", s.root, "ino", e.key.ino)
		s.thawEntry(e, gen)
	})
}

func (s *Store) watch(key inoKey) {
	e := s.begin(key)
	e.mu.Lock()
	e.state.Store(e.state.Load()&^migFrozen | migWatched)
	e.dirty.Store(false)
	s.wake(e)
	e.mu.Unlock()
	s.arm(e, watchTimeout)
}

// wake wakes the operations held by e's freeze (caller holds e.mu).
func (s *Store) wake(e *migEntry) {
	if e.thaw != nil {
		close(e.thaw)
		e.thaw = nil
	}
}

func (s *Store) freeze(key inoKey, names, want uint64) error {
	e := s.begin(key)
	e.mu.Lock() // waits for the operations in flight
	cur := e.state.Load()
	watched := cur&migWatched != 0
	if cur&migFrozen == 0 {
		e.thaw = make(chan struct{})
	}
	e.state.Store(cur | migFrozen)
	changed := !watched || e.dirty.Load()
	e.mu.Unlock()
	s.arm(e, s.mig.freezeTimeout)
	switch {
	case names != want:
		return unix.EMLINK
	case changed:
		return unix.ESTALE
	}
	return nil
}

func (s *Store) thaw(key inoKey) {
	if e := s.mig.lookup(key); e != nil {
		s.thawEntry(e, 0)
	}
}

// thawEntry ends e's watch and freeze (if gen is not 0, only if e's timer
// generation is still gen).
func (s *Store) thawEntry(e *migEntry, gen uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if gen != 0 {
		s.mig.mu.Lock()
		stale := e.gen != gen
		s.mig.mu.Unlock()
		if stale {
			return
		}
	}
	e.state.Store(e.state.Load() &^ (migWatched | migFrozen))
	e.dirty.Store(false)
	s.wake(e)
	s.end(e)
}

// moved turns the frozen inode a names into a pointer to linkto and marks
// its open files moved. The order keeps a crash harmless: the linkto xattr
// first (still a data file), then the pointer mode (now a pointer, which
// holds no data), then the truncate.
func (s *Store) moved(key inoKey, a at, g layer.Gfid, linkto string, want uint64, names []string) error {
	if linkto == "" || strings.ContainsRune(linkto, 0) {
		return unix.EINVAL
	}
	e := s.mig.lookup(key)
	if e == nil {
		return unix.ESTALE // never frozen, or the freeze expired
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state.Load()&migFrozen == 0 {
		return unix.ESTALE
	}
	var st unix.Stat_t
	if err := unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if keyOf(&st) != key {
		return unix.ESTALE
	}
	if s.names(&st, g) != want {
		return unix.EMLINK
	}
	if err := s.allNames(key, names); err != nil {
		return err
	}
	ml := s.marks.of(g)
	ml.Lock()
	err := s.toPointer(a, linkto)
	if err == nil {
		s.dropEntryLocked(g, "")
	}
	ml.Unlock()
	if err != nil {
		return err
	}
	s.dropNames(g, names)
	e.state.Store(migMoved)
	e.dirty.Store(false)
	s.wake(e)
	s.end(e)
	return nil
}

// toPointer turns the regular file a names into a pointer file to linkto.
func (s *Store) toPointer(a at, linkto string) error {
	p := procAt(a.dir, a.name)
	if err := unix.Lsetxattr(p, XattrLinkto, []byte(linkto), 0); err != nil {
		return err
	}
	if err := chmodAt(a.dir, a.name, linktoMode&07777); err != nil {
		return err
	}
	for _, name := range []string{XattrSize, XattrPending} {
		if err := unix.Lremovexattr(p, name); err != nil && err != unix.ENODATA {
			return err
		}
	}
	return s.truncateAt(a, 0, false)
}

// allNames checks that every one of names names inode key.
func (s *Store) allNames(key inoKey, names []string) error {
	for _, p := range names {
		a, err := s.resolve(p, false)
		if err != nil {
			return unix.ESTALE
		}
		var st unix.Stat_t
		err = unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW)
		a.close()
		if err != nil || keyOf(&st) != key {
			return unix.ESTALE
		}
	}
	return nil
}

// dropNames removes the names of a file just moved (pointers now): the
// child it left has no name of it any more, so that the operations on
// them that its freeze held, answered EREMOTE, find it where it went when
// tried again (a rename over one of them, say, must not find the old name
// here). A crash before they are all gone leaves pointers, which the next
// rebalance removes.
func (s *Store) dropNames(g layer.Gfid, names []string) {
	for _, p := range names {
		a, err := s.resolve(p, true)
		if err != nil {
			continue
		}
		gone, ok := goneAt(a)
		if err := unix.Unlinkat(a.dir, a.name, 0); err != nil {
			s.log.Warn("a moved file's name left behind", "brick", s.root, "path", p, "err", err)
		} else if ok && gone.gfid == g {
			s.dropIfLast(gone)
		}
		a.close()
	}
}
