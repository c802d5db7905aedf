package replicate

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// file is a file open on several replicas. Writes go to every replica in
// open that is up; a replica that fails a write is marked pending on the
// others (by a zero-length write carrying the mark) and dropped from the
// file for good: what it misses from then on is marked in the same round
// trip as each write, and the healer copies it once the file is closed.
type file struct {
	r     *Replicate
	path  string
	flags uint32
	key   uint64 // chooses the read replica

	// wmu is held shared by every change in flight, exclusively while
	// the file looks whether its copies that are behind caught up.
	wmu sync.RWMutex

	mu      sync.Mutex
	files   []layer.File // by replica; nil where not open
	open    Mask         // replicas taking writes
	good    Mask         // replicas whose content is current (for reads)
	attr    layer.Attr   // the good copies' attributes when opened
	checked time.Time    // when open copies that are behind were last looked at
}

var _ layer.File = (*file)(nil)

func pathKey(p string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(p))
	return h.Sum64()
}

// ReadReplica returns the replica a read of path takes its content from
// when good are the good copies up and arbiters the set's arbiters (what
// an open for reading picks; -1 if none): heal keeps that copy of a file
// whose copies may differ unblamed, which every reader with those copies
// up read.
func ReadReplica(good, arbiters Mask, path string) int {
	return pickOf(good, arbiters, pathKey(path))
}

// pick returns the replica to read from among good, by key, preferring
// data replicas; -1 if none.
func (r *Replicate) pick(good Mask, key uint64) int {
	return pickOf(good, r.arbiters, key)
}

func pickOf(good, arbiters Mask, key uint64) int {
	if d := good &^ arbiters; d != 0 {
		good = d
	}
	n := good.Count()
	if n == 0 {
		return -1
	}
	k := int(key % uint64(n))
	for i := range 64 {
		if good.Has(i) {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return -1
}

func wantsWrite(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
}

// Create creates and opens the file on every writable replica.
func (r *Replicate) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	return r.CreateEach(ctx, path, in, nil)
}

// CreateEach is Create, with each replica's CreateIn changed by each
// (when not nil) before it goes: disperse gives every brick its own
// fragment of a file made in one go.
func (r *Replicate) CreateEach(ctx context.Context, path string, in layer.CreateIn, each func(i int, in *layer.CreateIn)) (layer.File, layer.Attr, error) {
	in.Owner = owned(in.Owner)
	// A create that is not exclusive opens a file that exists, and every
	// copy gets it: a copy whose directory is behind may hold another
	// inode under the name (see strangers), perhaps another name of a
	// live file. O_TRUNC is therefore not sent: the file is truncated
	// afterwards through the copies found good (one round trip more, only
	// for a create that finds the file there, which the kernel sends only
	// when it believed the name absent).
	trunc := in.Flags&syscall.O_TRUNC != 0 && in.Flags&syscall.O_EXCL == 0
	in.Flags &^= syscall.O_TRUNC
	f, a, made, err := r.createEach(ctx, path, in, each)
	if err != nil {
		return nil, a, err
	}
	if !trunc || a.Gfid == in.Owner.Gfid || !a.IsReg() {
		return f, a, nil
	}
	if a, err = f.Setattr(ctx, layer.SetattrIn{Valid: layer.SetSize}); err != nil {
		f.Release(context.WithoutCancel(ctx))
		return nil, layer.Attr{}, madeThen(err, made)
	}
	return f, a, nil
}

// madeThen is the error of a create whose truncation failed: if copies
// that had no file under the name got one (made), a quorum lost in
// between is EIO (the operation was partly done), not EROFS (which says
// nothing was changed).
func madeThen(err error, made bool) error {
	if made && errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("created on some bricks, then could not truncate: %w", syscall.EIO)
	}
	return err
}

// createEach creates path on every replica up, and reports whether some
// replica made a new file (rather than opening one that was there).
func (r *Replicate) createEach(ctx context.Context, path string, in layer.CreateIn, each func(i int, in *layer.CreateIn)) (*file, layer.Attr, bool, error) {
	files := make([]layer.File, len(r.children))
	copies := make([]Copy, len(r.children))
	marks := []string{parentOf(path)}
	if len(in.Data) > 0 || in.Set.Valid != 0 {
		marks = append(marks, path) // made in one go: its content and attributes too
	}
	o, err := r.modify(ctx, marks, func(ctx context.Context, i int) error {
		cin := in
		if each != nil {
			each(i, &cin)
		}
		var err error
		files[i], copies[i].Attr, err = r.children[i].Layer.Create(ctx, path, cin)
		copies[i].Err = err
		return err
	})
	if err != nil {
		releaseAll(files)
		return nil, layer.Attr{}, false, err
	}
	made := false
	for i := range files {
		made = made || o.winners.Has(i) && copies[i].Attr.Gfid == in.Owner.Gfid
		if !o.winners.Has(i) && files[i] != nil {
			files[i].Release(context.WithoutCancel(ctx))
			files[i] = nil
		}
		if !o.winners.Has(i) {
			copies[i].Err = syscall.ENOTCONN
		}
	}
	v := r.verdict(ctx, o.winners, path, copies)
	if v.SplitBrain && differ(copies, o.winners) {
		// The replicas hold different inodes under the name (a create
		// of a client that died reached some of them), and nothing
		// says which is stale: written, one file would be two (sim
		// disperse2+1 seed 11: its fragments under two gfids, which
		// heal could not join). Partly done: heal settles the name.
		releaseAll(files)
		return nil, layer.Attr{}, made, fmt.Errorf("%s: the bricks hold different files under the name: %w", path, syscall.EIO)
	}
	open, from := o.winners, o.winners
	if v.Good&o.winners != 0 {
		from = v.Good & o.winners
		open &^= r.strangers(ctx, files, copies, v)
	}
	f := &file{r: r, path: path, flags: in.Flags, key: pathKey(path), files: files, open: open, good: v.Good, checked: time.Now()}
	f.attr = r.attrOf(attrsOf(copies), from)
	return f, f.attr, made, nil
}

// strangers releases and returns the replicas whose opened copy is another
// inode than the good copies': a replica with a stale view of the
// directory (the parent's marks blame it) still has an old inode under the
// name, which a create that is not exclusive, or an open, found there.
// That inode is not this file and must not be written (it may be a file
// renamed elsewhere meanwhile, or another name of a live file); heal
// replaces the name. (Creates and opens send no O_TRUNC for that reason.)
func (r *Replicate) strangers(ctx context.Context, files []layer.File, copies []Copy, v Verdict) Mask {
	var m Mask
	for i, lf := range files {
		a := copies[i].Attr
		if lf == nil || v.Good.Has(i) || copies[i].Err != nil ||
			a.Gfid == v.Attr.Gfid && a.Mode&syscall.S_IFMT == v.Attr.Mode&syscall.S_IFMT {
			continue
		}
		lf.Release(context.WithoutCancel(ctx))
		files[i] = nil
		m |= Bit(i)
	}
	return m
}

func attrsOf(copies []Copy) []layer.Attr {
	out := make([]layer.Attr, len(copies))
	for i, c := range copies {
		out[i] = c.Attr
	}
	return out
}

func releaseAll(files []layer.File) {
	for _, f := range files {
		if f != nil {
			f.Release(context.Background())
		}
	}
}

// Open looks the file up on every replica up (to know the good copies) and,
// in the same round trip, opens it: on all of them for writing, on the
// likely read replica for reading.
//
// O_TRUNC is not sent: a replica whose directory is behind may hold
// another inode under the name (see strangers), perhaps another name of a
// live file there. The file is truncated afterwards through the copies
// found to be it (one round trip more for an open that truncates).
func (r *Replicate) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	lf, err := r.open(ctx, path, flags)
	if err != nil || flags&syscall.O_TRUNC == 0 {
		return lf, err
	}
	f := lf.(*file)
	if !f.attr.IsReg() {
		return f, nil
	}
	if f.attr, err = f.Setattr(ctx, layer.SetattrIn{Valid: layer.SetSize}); err != nil {
		f.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	return f, nil
}

func (r *Replicate) open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	var m Mask
	var err error
	if flags&syscall.O_TRUNC != 0 {
		m, err = r.writable(ctx)
	} else {
		m, err = r.readable(ctx)
	}
	if err != nil {
		return nil, err
	}
	key := pathKey(path)
	opening := m
	if !wantsWrite(flags) && !r.opts.OpenAll {
		opening = Bit(r.pick(m, key))
	}
	files := make([]layer.File, len(r.children))
	openErrs := make([]error, len(r.children))
	copies := make([]Copy, len(r.children))
	octx := r.withPending(ctx, m)
	r.parallel(m, func(i int) error {
		var wg sync.WaitGroup
		if opening.Has(i) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				files[i], openErrs[i] = r.children[i].Layer.Open(octx, path, flags&^syscall.O_TRUNC)
			}()
		}
		copies[i].Attr, copies[i].Err = r.children[i].Layer.Lookup(ctx, path)
		wg.Wait()
		return nil
	})
	for i := range copies {
		if !m.Has(i) {
			copies[i].Err = syscall.ENOTCONN
		}
	}
	v := r.verdict(ctx, m, path, copies)
	// A replica whose copy a rebalance has just turned into a pointer
	// (the others are being turned too): the file has moved, whatever
	// the copies say. Not a stale copy's old pointer, though (the name
	// was given to a file here since, while that replica was away).
	for i := range openErrs {
		if errors.Is(openErrs[i], syscall.EREMOTE) && !v.Blamed.Has(i) && !(v.Bad.Has(i) && v.Good != 0) {
			releaseAll(files)
			return nil, openErrs[i]
		}
	}
	if err := r.answered(v); err != nil {
		releaseAll(files)
		return nil, err
	}
	if v.Err != nil {
		releaseAll(files)
		return nil, v.Err
	}
	r.strangers(ctx, files, copies, v)
	var opened Mask
	for i := range files {
		if files[i] != nil {
			opened |= Bit(i)
		}
	}
	// A good replica's refusal (EREMOTE for a pointer file, EISDIR,
	// EACCES ...) is the answer.
	for i := range openErrs {
		if e := openErrs[i]; e != nil && v.Good.Has(i) && !IsDown(e) {
			releaseAll(files)
			return nil, e
		}
	}
	f := &file{r: r, path: path, flags: flags, key: key, files: files, good: v.Good, attr: v.Attr, checked: time.Now()}
	if wantsWrite(flags) || r.opts.OpenAll {
		if opened == 0 {
			return nil, firstErr(openErrs, syscall.ENOTCONN)
		}
		f.open = opened
		return f, nil
	}
	if f.reader() < 0 {
		// The likely replica is behind or failed: open a good one.
		f.mu.Lock()
		i, err := f.openAnother(ctx, 0)
		f.mu.Unlock()
		if i < 0 {
			releaseAll(files)
			if err != nil && !IsDown(err) {
				return nil, err // the good replica's refusal (EREMOTE ...), not the stale one's
			}
			return nil, firstErr(openErrs, syscall.ENOTCONN)
		}
	}
	return f, nil
}

func firstErr(errs []error, def error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return def
}

// reader returns an open, good, up replica to read from, or -1.
func (f *file) reader() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var m Mask
	for i, lf := range f.files {
		if lf != nil {
			m |= Bit(i)
		}
	}
	return f.r.pick(m&f.good&f.r.up(), f.key)
}

// readFrom runs a read-only file operation on a good replica, trying the
// next one if the replica is down.
func (f *file) readFrom(ctx context.Context, fn func(lf layer.File) error) error {
	tried := Mask(0)
	for {
		f.mu.Lock()
		var m Mask
		for i, lf := range f.files {
			if lf != nil {
				m |= Bit(i)
			}
		}
		i := f.r.pick(m&f.good&f.r.up()&^tried, f.key)
		if i < 0 {
			i, _ = f.openAnother(ctx, tried)
		}
		var lf layer.File
		if i >= 0 {
			lf = f.files[i]
		}
		f.mu.Unlock()
		if lf == nil {
			return syscall.ENOTCONN
		}
		err := fn(lf)
		if err == nil || !IsDown(err) {
			return err
		}
		tried |= Bit(i)
	}
}

// openAnother opens the file on another good replica that is up (called
// with f.mu held); -1 if there is none, with that replica's refusal if it
// refused.
func (f *file) openAnother(ctx context.Context, tried Mask) (int, error) {
	i := f.r.pick(f.good&f.r.up()&^tried, f.key)
	if i < 0 || f.files[i] != nil {
		return -1, nil
	}
	lf, err := f.r.children[i].Layer.Open(ctx, f.path, f.flags&^syscall.O_TRUNC)
	if err != nil {
		return -1, err
	}
	f.files[i] = lf
	return i, nil
}

func (f *file) Read(ctx context.Context, p []byte, off int64) (int, error) {
	var n int
	err := f.readFrom(ctx, func(lf layer.File) error {
		var err error
		n, err = lf.Read(ctx, p, off)
		return err
	})
	return n, err
}

func (f *file) Getattr(ctx context.Context) (layer.Attr, error) {
	var a layer.Attr
	err := f.readFrom(ctx, func(lf layer.File) error {
		var err error
		a, err = lf.Getattr(ctx)
		return err
	})
	a.Pending = 0
	return a, err
}

// targets returns the replicas a write goes to now, or EROFS without
// quorum.
func (f *file) targets() (Mask, error) {
	f.mu.Lock()
	m := f.open & f.r.up()
	// A replica down now misses this change (it is marked pending in the
	// same round trip): it leaves the file, or it would serve this
	// file's reads again once its client has reconnected.
	f.open &= m
	f.good &= m
	good := f.good
	f.mu.Unlock()
	if !f.r.quorate(m) || m&^f.r.arbiters == 0 {
		f.r.log.Warn("replica set has no quorum: refusing writes", "path", f.path, "up", f.r.names(m))
		return 0, syscall.EROFS
	}
	if m&good&^f.r.arbiters == 0 {
		// Only copies that are behind are up: writing to them would make
		// the copies blame each other.
		f.r.log.Warn("no current data copy is up: refusing writes", "path", f.path, "up", f.r.names(m))
		return 0, syscall.ENOTCONN
	}
	return m, nil
}

// modify runs a data or attribute change on every replica the file is
// open on; losers are marked on the winners and dropped from the file.
// Copies that are behind get the change too, and the good copies record
// it as pending for them in the same round trip (see behind.go).
func (f *file) modify(ctx context.Context, fn func(ctx context.Context, lf layer.File, i int) error) (Mask, error) {
	f.catchUp(ctx)
	f.wmu.RLock()
	defer f.wmu.RUnlock()
	m, err := f.targets()
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	files := append([]layer.File(nil), f.files...)
	f.mu.Unlock()
	ctxOf := f.pendingFor(ctx, m)
	errs := f.r.parallel(m, func(i int) error { return fn(ctxOf(i), files[i], i) })
	for _, err := range errs {
		if errors.Is(err, syscall.EREMOTE) {
			// A rebalance moved the file to another set (the bricks
			// that did the change changed the old copy, now gone):
			// distribute reopens it there and does the change again.
			return 0, err
		}
	}
	f.mu.Lock()
	good := f.good
	f.mu.Unlock()
	o := f.r.settle(m, errs, good)
	if o.winners != 0 && o.losers != 0 {
		f.Missed(ctx, o.winners, o.losers)
	}
	return o.winners, o.err
}

// Missed records on the replicas in winners that the ones in losers
// missed a change to the file (or hold a copy found bad), and drops the
// losers from the file: they take no more writes and serve no reads.
func (f *file) Missed(ctx context.Context, winners, losers Mask) {
	f.mu.Lock()
	files := append([]layer.File(nil), f.files...)
	f.open &^= losers
	f.good &^= losers
	f.mu.Unlock()
	mark := layer.WithTxn(ctx, layer.Txn{Pending: uint64(f.r.all &^ winners)})
	f.r.parallel(winners, func(i int) error {
		// A zero-length write records the mark on the open inode,
		// wherever it has been renamed to.
		if files[i] == nil {
			return nil
		}
		if _, err := files[i].Write(mark, nil, 0); err != nil {
			f.r.log.Error("cannot record a missed write: the replicas may differ until a full heal",
				"path", f.path, "replica", f.r.children[i].Name, "err", err)
		}
		return nil
	})
	f.r.log.Warn("replicas missed a write; marked for heal", "path", f.path, "missed", f.r.names(losers))
}

// Drop takes the replicas in m out of the file: they take no more writes
// (until Reopen) and serve no reads.
func (f *file) Drop(m Mask) {
	f.mu.Lock()
	f.open &^= m
	f.good &^= m
	f.mu.Unlock()
}

// Handles returns the files open on each replica (nil where not open),
// the replicas taking writes and those whose content is current: what a
// layer that spreads one file's data over the replicas (disperse) needs.
func (f *file) Handles() (files []layer.File, open, good Mask) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]layer.File(nil), f.files...), f.open, f.good
}

// Reopen opens the file again on the replicas that are up but not taking
// its writes (back after being down): they take writes again, but serve
// no reads until healed. A replica whose name now holds another inode is
// left out. It returns the replicas added.
func (f *file) Reopen(ctx context.Context) Mask {
	f.mu.Lock()
	want := f.r.up() &^ f.open
	f.mu.Unlock()
	var added Mask
	for i := range f.r.children {
		if !want.Has(i) {
			continue
		}
		lf, err := f.r.children[i].Layer.Open(ctx, f.path, f.flags&^(syscall.O_TRUNC|syscall.O_CREAT|syscall.O_EXCL))
		if err != nil {
			continue
		}
		if a, err := lf.Getattr(ctx); err != nil || a.Gfid != f.attr.Gfid {
			lf.Release(context.WithoutCancel(ctx))
			continue
		}
		f.mu.Lock()
		old := f.files[i]
		f.files[i] = lf
		f.open |= Bit(i)
		f.mu.Unlock()
		if old != nil {
			old.Release(context.WithoutCancel(ctx))
		}
		added |= Bit(i)
	}
	if added != 0 {
		f.r.log.Info("replicas back: the open file takes writes on them again", "path", f.path, "replicas", f.r.names(added))
	}
	return added
}

// Opened returns the file's attributes as the good copies had them when
// it was opened or created.
func (f *file) Opened() layer.Attr { return f.attr }

func (f *file) Write(ctx context.Context, p []byte, off int64) (int, error) {
	ns := make([]int, len(f.r.children))
	winners, err := f.modify(ctx, func(ctx context.Context, lf layer.File, i int) error {
		var err error
		ns[i], err = lf.Write(ctx, p, off)
		return err
	})
	if winners == 0 {
		return 0, err
	}
	i := winners.First()
	if d := winners &^ f.r.arbiters; d != 0 {
		i = d.First()
	}
	return ns[i], err
}

func (f *file) Setattr(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	attrs := make([]layer.Attr, len(f.r.children))
	winners, err := f.modify(ctx, func(ctx context.Context, lf layer.File, i int) error {
		var err error
		attrs[i], err = lf.Setattr(ctx, in)
		return err
	})
	if err != nil {
		return layer.Attr{}, err
	}
	return f.r.attrOf(attrs, winners), nil
}

func (f *file) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	_, err := f.modify(ctx, func(ctx context.Context, lf layer.File, i int) error {
		return lf.Fallocate(ctx, mode, off, length)
	})
	return err
}

// each runs fn on every replica the file is open on and up; it fails only
// if every one of them fails (or with the first error that is not a
// replica being down).
func (f *file) each(fn func(lf layer.File) error) error {
	f.mu.Lock()
	files := append([]layer.File(nil), f.files...)
	f.mu.Unlock()
	var m Mask
	for i, lf := range files {
		if lf != nil {
			m |= Bit(i)
		}
	}
	m &= f.r.up()
	if m == 0 {
		return syscall.ENOTCONN
	}
	errs := f.r.parallel(m, func(i int) error { return fn(files[i]) })
	var firstDown error
	okCount := 0
	for i := range errs {
		switch {
		case !m.Has(i):
		case errs[i] == nil:
			okCount++
		case IsDown(errs[i]):
			firstDown = errs[i]
		default:
			return errs[i]
		}
	}
	if okCount == 0 {
		return firstDown
	}
	return nil
}

func (f *file) Fsync(ctx context.Context, datasync bool) error {
	return f.each(func(lf layer.File) error { return lf.Fsync(ctx, datasync) })
}

func (f *file) Flush(ctx context.Context, owner uint64) error {
	return f.each(func(lf layer.File) error { return lf.Flush(ctx, owner) })
}

// lockFiles returns the replicas locks are taken on: every open one that
// is up, in replica order.
func (f *file) lockFiles() []layer.File {
	f.mu.Lock()
	defer f.mu.Unlock()
	up := f.r.up()
	var out []layer.File
	for i, lf := range f.files {
		if lf != nil && up.Has(i) {
			out = append(out, lf)
		}
	}
	return out
}

func (f *file) Getlk(ctx context.Context, owner uint64, lk layer.Lock) (layer.Lock, error) {
	var out layer.Lock
	err := syscall.Errno(syscall.ENOTCONN)
	for _, lf := range f.lockFiles() {
		var e error
		if out, e = lf.Getlk(ctx, owner, lk); e == nil {
			return out, nil
		} else if !IsDown(e) {
			return out, e
		}
	}
	return out, err
}

// Setlk takes the lock on every replica: blocking requests one replica
// after the other in replica order (so that two clients cannot each hold
// part and wait for the rest), others all at once; a refusal anywhere
// releases what was taken.
func (f *file) Setlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool) error {
	files := f.lockFiles()
	if len(files) == 0 {
		return syscall.ENOTCONN
	}
	if lk.Type == syscall.F_UNLCK {
		return f.each(func(lf layer.File) error { return lf.Setlk(ctx, owner, lk, false) })
	}
	var taken []layer.File
	var err error
	if wait {
		for _, lf := range files {
			if err = lf.Setlk(ctx, owner, lk, true); err != nil && !IsDown(err) {
				break
			}
			if err == nil {
				taken = append(taken, lf)
			}
		}
	} else {
		errs := make([]error, len(files))
		var wg sync.WaitGroup
		for k, lf := range files {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[k] = lf.Setlk(ctx, owner, lk, false)
			}()
		}
		wg.Wait()
		for k, e := range errs {
			if e == nil {
				taken = append(taken, files[k])
			} else if !IsDown(e) && err == nil {
				err = e
			}
		}
	}
	if err != nil && !IsDown(err) || len(taken) == 0 {
		unlock := lk
		unlock.Type = syscall.F_UNLCK
		for _, lf := range taken {
			lf.Setlk(context.WithoutCancel(ctx), owner, unlock, false)
		}
		if err == nil {
			err = syscall.ENOTCONN
		}
		return err
	}
	return nil
}

func (f *file) Release(ctx context.Context) error {
	f.mu.Lock()
	files := f.files
	f.files = nil
	f.mu.Unlock()
	var first error
	for _, lf := range files {
		if lf != nil {
			if err := lf.Release(ctx); err != nil && first == nil && !IsDown(err) {
				first = err
			}
		}
	}
	return first
}

var _ layer.NameLeaser = (*Replicate)(nil)

// OwnsName holds when every replica is up and holds path's directory
// lease (layer.NameLeaser): a create held back is then made on all of
// them, with the usual marks if one fails meanwhile.
func (r *Replicate) OwnsName(path string) (layer.Attr, bool) {
	var dir layer.Attr
	ok := r.everyLeaser(func(i int, nl layer.NameLeaser) bool {
		a, ok := nl.OwnsName(path)
		if i == 0 {
			dir = a
		}
		return ok
	})
	return dir, ok
}

// MadeName reports whether every replica made path under its lease
// (layer.NameLeaser).
func (r *Replicate) MadeName(path string) bool {
	return r.everyLeaser(func(_ int, nl layer.NameLeaser) bool { return nl.MadeName(path) })
}

// everyLeaser reports whether fn holds for every replica, all up and
// leasing names.
func (r *Replicate) everyLeaser(fn func(i int, nl layer.NameLeaser) bool) bool {
	for i, c := range r.children {
		nl, ok := c.Layer.(layer.NameLeaser)
		if !ok || c.Up != nil && !c.Up() || !fn(i, nl) {
			return false
		}
	}
	return true
}
