package disperse

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// Writes are ordered between clients by a lock on the bricks: a
// whole-file write lock in the bricks' internal lock domain
// (layer.DomainInternal), which applications' locks never see. A client
// holds it on at least K bricks across everything a write does — the read
// of a partly written stripe, the parity update of the small path, the
// write itself — and across truncates. Any two sets of K bricks share one
// (K > N/2), so two writers always meet on a brick and one waits.
//
// Taking it: a non-blocking request to every brick at once; if any brick
// says another holder has it, what was granted is given back and the lock
// is then waited for brick by brick, in index order, so that two waiting
// clients never hold parts of it each (no deadlock). A brick that drops
// the connection drops its locks, so a client that dies releases the lock;
// what its last write left half done is marked Dirty for the healer, and
// the next holder sees the mark and leaves it (see hold.keepDirty).
//
// Holding it: the lock stays while writes keep coming, so sequential
// writes of one open file pay no lock round trip each. It is released when
// no write ran under it for lockIdle, when the holder sees others wait for it
// (every lockPoll it asks its lowest brick, which counts the waiters, and
// every lockLookAll every brick it holds it on: a waiter that cannot reach
// the lowest waits on another), and when the file is released. Before releasing it the holder clears the
// Dirty mark its writes left, if the file was clean when it took the lock:
// every write is then complete on every brick it reached.

// Lock hold times (see above).
const (
	lockIdle    = 10 * time.Millisecond
	lockPoll    = 10 * time.Millisecond
	lockLookAll = time.Second
)

// lockOwners makes each open file a lock owner of its own: two Files of
// one inode in one process exclude each other like two clients. (The
// brick makes owners unique per connection.)
var lockOwners atomic.Uint64

// wholeFile is the range of the write lock.
var wholeFile = layer.Lock{Type: syscall.F_WRLCK, End: math.MaxUint64, Domain: layer.DomainInternal}

// lockFiles takes the write lock on the files of the bricks in m (at least
// k of them must grant it) for owner, and returns the bricks that granted
// it.
func lockFiles(ctx context.Context, files []layer.File, m replicate.Mask, owner uint64, k int) (replicate.Mask, error) {
	got, busy := tryLockFiles(ctx, files, m, owner)
	if !busy && got.Count() >= k {
		return got, nil
	}
	unlockFiles(files, got, owner)
	got = 0
	var firstErr error
	for i, f := range files {
		if !m.Has(i) || f == nil {
			continue
		}
		err := f.Setlk(ctx, owner, wholeFile, true)
		if err == nil {
			got |= replicate.Bit(i)
			continue
		}
		if ctx.Err() != nil {
			unlockFiles(files, got, owner)
			return 0, syscall.EINTR
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if got.Count() < k {
		unlockFiles(files, got, owner)
		return 0, errors.Join(syscall.EIO, firstErr)
	}
	return got, nil
}

// tryLockFiles asks every brick of m for the lock at once, without
// waiting; busy says some brick has it held by another owner.
func tryLockFiles(ctx context.Context, files []layer.File, m replicate.Mask, owner uint64) (got replicate.Mask, busy bool) {
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		if m.Has(i) && f != nil {
			wg.Go(func() { errs[i] = f.Setlk(ctx, owner, wholeFile, false) })
		}
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case !m.Has(i) || files[i] == nil:
		case err == nil:
			got |= replicate.Bit(i)
		case errors.Is(err, syscall.EAGAIN):
			busy = true
		}
	}
	return got, busy
}

// unlockFiles releases owner's lock on the bricks of m, in parallel. A
// brick that cannot be told has lost the connection, and with it the lock.
func unlockFiles(files []layer.File, m replicate.Mask, owner uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	unlock := wholeFile
	unlock.Type = syscall.F_UNLCK
	var wg sync.WaitGroup
	for i, f := range files {
		if m.Has(i) && f != nil {
			wg.Go(func() { f.Setlk(ctx, owner, unlock, false) })
		}
	}
	wg.Wait()
}

// hold is an open file's lock on the bricks. Writes run under gate's read
// side; taking and releasing the lock, under its write side, so never
// while a write is under way.
type hold struct {
	gate  sync.RWMutex
	owner uint64

	mu     sync.Mutex
	held   replicate.Mask // bricks holding the lock for us; 0: not held
	files  []layer.File   // the handles it was taken through
	looked time.Time      // taken, or every brick last asked for waiters
	last   time.Time      // taken, or the last operation under it ended
	active int            // operations under it now
	timer  *time.Timer
	// keepDirty: a brick was marked Dirty when we took the lock (a
	// writer died), or one of our writes failed: the mark is the
	// healer's to clear.
	keepDirty bool
	wrote     bool // our writes marked the bricks Dirty under it
	// blamed are the bricks the others' marks blamed when we took it:
	// their chunks may be older than any write (settle).
	blamed replicate.Mask
}

// blamedNow returns the bricks blamed when the lock was taken (0: not
// held).
func (h *hold) blamedNow() replicate.Mask {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == 0 {
		return 0
	}
	return h.blamed
}

// writeLocked runs fn, a write, holding the lock on the bricks (taking it
// if this file does not hold it), unless too few bricks have room for it
// (roomToSpare). If fn fails, the Dirty mark stays.
func (f *file) writeLocked(ctx context.Context, fn func() error) error {
	return f.withLock(ctx, true, func() error {
		if err := f.roomToSpare(ctx); err != nil {
			return err
		}
		return fn()
	})
}

// withLock runs fn holding the lock on the bricks; write says fn writes.
func (f *file) withLock(ctx context.Context, write bool, fn func() error) error {
	h := &f.hold
	for {
		h.gate.RLock()
		if h.begin(f.d.g.K) {
			defer h.gate.RUnlock()
			err := fn()
			if err != nil && write {
				f.d.log.Info("write failed: the file keeps its Dirty mark for the healer", "path", f.path, "err", err)
			}
			h.end(err != nil && write)
			return err
		}
		h.gate.RUnlock()
		if err := f.takeLock(ctx); err != nil {
			return err
		}
	}
}

// begin counts an operation in if the lock is held on at least k bricks.
func (h *hold) begin(k int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held.Count() < k {
		return false
	}
	h.active++
	return true
}

// holds reports whether the lock is held on at least k bricks.
func (h *hold) holds(k int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held.Count() >= k
}

// end counts an operation out; failed keeps the Dirty mark (a write
// failed).
func (h *hold) end(failed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.active--
	h.last = time.Now()
	h.keepDirty = h.keepDirty || failed
}

// takeLock takes the lock unless this file holds it on K bricks (it lets
// go of a lock left on fewer: bricks lost the connection), and learns
// from the bricks the file's size and whether it is marked Dirty.
func (f *file) takeLock(ctx context.Context) error {
	h := &f.hold
	h.gate.Lock()
	defer h.gate.Unlock()
	h.mu.Lock()
	held := h.held
	h.mu.Unlock()
	if held.Count() >= f.d.g.K {
		return nil
	}
	if held != 0 {
		f.endHold(context.Background(), true)
	}
	files, open, good := f.Handles()
	targets := open & f.d.up()
	if targets.Count() < f.d.g.K {
		return syscall.EROFS
	}
	got, err := lockFiles(ctx, files, targets, h.owner, f.d.g.K)
	if err != nil {
		f.d.log.Warn("cannot take the write lock on K bricks", "path", f.path, "err", err)
		return err
	}
	if got != targets {
		f.d.log.Info("write lock taken on some bricks only", "path", f.path,
			"locked", f.d.names(got), "missing", f.d.names(targets&^got))
	}
	size, dirty, blamed, err := f.lockedState(ctx, files, got, good)
	if err != nil {
		unlockFiles(files, got, h.owner)
		return err
	}
	if dirty {
		f.d.log.Info("file marked Dirty by a writer that did not finish: left for the healer", "path", f.path)
	}
	// Until now another client could write: what this file knew of the
	// stripes and the size is stale.
	f.mu.Lock()
	f.size = size
	f.cache, f.heads = stripeCache{}, nil
	f.mu.Unlock()
	now := time.Now()
	h.mu.Lock()
	h.held, h.files, h.looked, h.last = got, files, now, now
	h.keepDirty, h.wrote, h.blamed = dirty, false, blamed
	h.timer = time.AfterFunc(lockPoll, f.expire)
	h.mu.Unlock()
	return nil
}

// lockedState reads the attributes of the bricks in m: the size (of the
// first good one), whether any is marked Dirty, and the bricks their
// marks blame.
func (f *file) lockedState(ctx context.Context, files []layer.File, m, good replicate.Mask) (size int64, dirty bool, blamed replicate.Mask, err error) {
	attrs := make([]layer.Attr, len(files))
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i := range files {
		if m.Has(i) {
			wg.Go(func() { attrs[i], errs[i] = files[i].Getattr(ctx) })
		}
	}
	wg.Wait()
	if err := moved(errs); err != nil {
		return 0, false, 0, err
	}
	found := false
	for _, pass := range []replicate.Mask{m & good, m} {
		for i := range files {
			if !pass.Has(i) || errs[i] != nil {
				continue
			}
			dirty = dirty || attrs[i].Pending&layer.Dirty != 0
			blamed |= replicate.Mask(attrs[i].Pending &^ layer.Dirty)
			if !found {
				size, found = int64(attrs[i].Size), true
			}
		}
	}
	if !found {
		return 0, false, 0, errors.Join(syscall.EIO, errors.Join(errs...))
	}
	return size, dirty, blamed, nil
}

// expire runs every lockPoll while the lock is held. It releases the lock
// when no write ran under it for lockIdle (none under way, the last one
// ended that long ago), or when another client waits for it
// (on the lowest brick this file holds it on, where waiters queue first, in
// brick order; every lockLookAll on each of them); otherwise it looks
// again later. The look does not hold the gate: writes go on meanwhile.
func (f *file) expire() {
	h := &f.hold
	h.mu.Lock()
	held, files := h.held, h.files
	now := time.Now()
	release := held != 0 && h.active == 0 && now.Sub(h.last) >= lockIdle
	all := now.Sub(h.looked) >= lockLookAll
	if all {
		h.looked = now
	}
	h.mu.Unlock()
	if held == 0 {
		return
	}
	if !release && !f.contended(files, held, all) {
		h.mu.Lock()
		if h.held != 0 {
			h.timer.Reset(lockPoll)
		}
		h.mu.Unlock()
		return
	}
	h.gate.Lock()
	defer h.gate.Unlock()
	f.endHold(context.Background(), true)
}

// contended reports whether requests wait for the lock (the locks layer
// counts them: layer.DomainInternal) on the lowest brick of held, or with
// all on any brick of held.
func (f *file) contended(files []layer.File, held replicate.Mask, all bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var waited atomic.Bool
	var wg sync.WaitGroup
	for i, lf := range files {
		if !held.Has(i) || lf == nil {
			continue
		}
		wg.Go(func() {
			got, err := lf.Getlk(ctx, f.hold.owner, wholeFile)
			if err == nil && (got.Type != syscall.F_UNLCK || got.Pid > 0) {
				waited.Store(true)
			}
		})
		if !all {
			break
		}
	}
	wg.Wait()
	return waited.Load()
}

// noteWrite notes that a write marked the bricks Dirty under the lock.
func (h *hold) noteWrite() {
	h.mu.Lock()
	h.wrote = true
	h.mu.Unlock()
}

// lost takes the bricks in m out of the hold: their write failed, and a
// brick that lost the connection lost our lock with it.
func (h *hold) lost(m replicate.Mask) {
	h.mu.Lock()
	h.held &^= m
	h.mu.Unlock()
}

// endHold clears the Dirty mark this hold's writes left (unless the file
// was marked when the hold began: that mark is the healer's) and, with
// unlock, releases the lock (the file's Release does not: releasing the
// fragments drops their locks on the bricks). The caller holds the gate.
func (f *file) endHold(ctx context.Context, unlock bool) {
	h := &f.hold
	h.mu.Lock()
	held, files, clean := h.held, h.files, h.wrote && !h.keepDirty
	h.held, h.files, h.wrote = 0, nil, false
	if h.timer != nil {
		h.timer.Stop()
	}
	h.mu.Unlock()
	if held == 0 {
		return
	}
	f.forget() // another client may write now
	if clean {
		// Every brick the writes reached, locked or not: no other
		// client writes anywhere while we hold the lock on K bricks.
		all, open, _ := f.Handles()
		f.clearDirty(ctx, all, open&f.d.up())
	}
	if unlock {
		unlockFiles(files, held, h.owner)
	}
}

// clearDirty clears the Dirty mark on the bricks of m, guarded by their
// ctime: a brick changed since its attributes were read keeps it.
func (f *file) clearDirty(ctx context.Context, files []layer.File, m replicate.Mask) {
	var wg sync.WaitGroup
	for i := range files {
		hs, ok := f.d.children[i].Layer.(layer.HealStore)
		if !m.Has(i) || files[i] == nil || !ok {
			continue
		}
		wg.Go(func() {
			a, err := files[i].Getattr(ctx)
			if err == nil && a.Pending&layer.Dirty != 0 {
				err = hs.ClearPending(ctx, f.path, a.Gfid, layer.Dirty, a.Ctime)
			}
			if err != nil {
				f.d.log.Warn("Dirty mark not cleared: the healer checks the file", "path", f.path,
					"brick", f.d.children[i].Name, "err", err)
			}
		})
	}
	wg.Wait()
}
