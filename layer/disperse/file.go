package disperse

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// handles is what Disperse needs of replicate's open files.
type handles interface {
	layer.File
	Handles() (files []layer.File, open, good replicate.Mask)
	Missed(ctx context.Context, winners, losers replicate.Mask)
	Reopen(ctx context.Context) replicate.Mask
	Drop(m replicate.Mask)
	Opened() layer.Attr
}

// file is a regular file open on the bricks of a disperse set. Names,
// attributes other than the size, locks, flush and release are
// replicate's (the embedded handles); reads, writes and truncates work on
// the fragments.
type file struct {
	handles
	d      *Disperse
	path   string
	append bool

	// locks order reads and writes of one stripe in this client: writes
	// of different stripes run in parallel, a partial-stripe write does
	// not interleave with another write of the stripe.
	locks [64]sync.RWMutex
	// appendMu serialises O_APPEND writes (each needs the size).
	appendMu sync.Mutex

	// hold is the file's lock on the bricks, which orders its writes
	// with other clients' (lock.go).
	hold hold

	mu         sync.Mutex
	size       int64
	cache      stripeCache
	heads      map[int64][]Header // see headsOf
	batches    map[int64]*batch   // see batched
	lastReopen time.Time
}

// reopenEvery bounds how often a file tries to take back bricks that
// returned.
const reopenEvery = time.Second

// mayReopen reports whether it is time to try reopening bricks.
func (f *file) mayReopen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.lastReopen) < reopenEvery {
		return false
	}
	f.lastReopen = time.Now()
	return true
}

var _ layer.File = (*file)(nil)

// brickFlags are the open flags the fragments are opened with: always
// readable (partial-stripe writes read), never O_APPEND (records go at
// their own offsets), never O_TRUNC (the file truncates itself, under the
// writers' lock: newFile), and writable to truncate.
func brickFlags(flags uint32) uint32 {
	trunc := flags&syscall.O_TRUNC != 0
	flags &^= syscall.O_APPEND | syscall.O_TRUNC
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY || trunc {
		flags = flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	return flags
}

// newFile makes the open file of rf, opened with brickFlags(flags). An
// O_TRUNC open truncates the file as a truncate does, holding the writers'
// lock (truncated behind it, another writer of the file would go on from
// what it knew of the stripes); then it also returns the attributes the
// truncate left.
func (d *Disperse) newFile(ctx context.Context, rf layer.File, path string, flags uint32) (*file, *layer.Attr, error) {
	h, ok := rf.(handles)
	if !ok {
		rf.Release(context.Background())
		return nil, nil, syscall.EIO
	}
	a := h.Opened()
	if !a.IsReg() {
		// Directories are opened for listing: nothing of ours.
		return &file{handles: h, d: d, path: path}, nil, nil
	}
	f := &file{handles: h, d: d, path: path, append: flags&syscall.O_APPEND != 0, size: int64(a.Size)}
	f.hold.owner = lockOwners.Add(1)
	if flags&syscall.O_TRUNC == 0 || a.Size == 0 {
		return f, nil, nil
	}
	ta, err := f.Setattr(ctx, layer.SetattrIn{Valid: layer.SetSize})
	if err != nil {
		f.Release(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	return f, &ta, nil
}

// Create creates the file on the bricks (as a replicated name) and opens
// its fragments; one with Data or Set is made in one go (make.go).
func (d *Disperse) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	if len(in.Data) > 0 || in.Set.Valid != 0 {
		return d.make(ctx, path, in)
	}
	flags := in.Flags
	in.Flags = brickFlags(flags)
	rf, a, err := d.Replicate.Create(ctx, path, in)
	if err != nil {
		return nil, a, err
	}
	f, ta, err := d.newFile(ctx, rf, path, flags)
	if err != nil {
		return nil, a, err
	}
	if ta != nil { // an existing file, truncated
		return f, *ta, nil
	}
	a, _ = d.scale(a, nil)
	return f, a, nil
}

// Open opens the fragments on every brick up. A file found on fewer
// than K bricks while K are up is opened again a few times, a moment
// apart: a rename reaches the bricks one by one (a rebalance moving the
// file here renames it into place so), and until it has reached K the
// file cannot be read.
func (d *Disperse) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	for try := 0; ; try++ {
		rf, err := d.Replicate.Open(ctx, path, brickFlags(flags))
		if err != nil {
			return nil, err
		}
		if try < partialTries && d.partial(rf) {
			rf.Release(context.WithoutCancel(ctx))
			select {
			case <-time.After(partialWait):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		f, _, err := d.newFile(ctx, rf, path, flags)
		return f, err
	}
}

// partialTries and partialWait bound Open's wait for a file that is on
// fewer than K bricks (100 ms in all).
const (
	partialTries = 20
	partialWait  = 5 * time.Millisecond
)

// partial reports whether rf is a regular file open on fewer than K
// bricks while K bricks are up.
func (d *Disperse) partial(rf layer.File) bool {
	h, ok := rf.(handles)
	if !ok {
		return false
	}
	if a := h.Opened(); !a.IsReg() {
		return false
	}
	_, open, _ := h.Handles()
	return open.Count() < d.g.K && d.up().Count() >= d.g.K
}

// Setattr with a size truncates through an open file; everything else is
// the namespace's.
func (d *Disperse) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	if in.Valid&layer.SetSize == 0 {
		return d.scale(d.Replicate.Setattr(ctx, path, in))
	}
	f, err := d.Open(ctx, path, syscall.O_RDWR)
	if err != nil {
		return layer.Attr{}, err
	}
	defer f.Release(context.WithoutCancel(ctx))
	return f.Setattr(ctx, in)
}

// Statfs reports what the set can hold: K times its smallest brick.
func (d *Disperse) Statfs(ctx context.Context, path string) (layer.Statfs, error) {
	st, err := d.Replicate.Statfs(ctx, path)
	k := uint64(d.g.K)
	st.Blocks *= k
	st.Bfree *= k
	st.Bavail *= k
	return st, err
}

// up returns the bricks reachable now.
func (d *Disperse) up() replicate.Mask {
	var m replicate.Mask
	for i, c := range d.children {
		if c.Up == nil || c.Up() {
			m |= replicate.Bit(i)
		}
	}
	return m
}

func (d *Disperse) all() replicate.Mask { return replicate.Mask(1)<<uint(d.g.N()) - 1 }

// lockStripes takes the stripe locks of stripes [first, last] (all of them
// for a whole-file operation) and returns the unlock.
func (f *file) lockStripes(first, last int64, write bool) func() {
	var taken []int
	if last-first+1 >= int64(len(f.locks)) {
		for i := range f.locks {
			taken = append(taken, i)
		}
	} else {
		seen := map[int]bool{}
		for s := first; s <= last; s++ {
			seen[int(s%int64(len(f.locks)))] = true
		}
		for i := range f.locks {
			if seen[i] {
				taken = append(taken, i)
			}
		}
	}
	for _, i := range taken {
		if write {
			f.locks[i].Lock()
		} else {
			f.locks[i].RLock()
		}
	}
	return func() {
		for _, i := range taken {
			if write {
				f.locks[i].Unlock()
			} else {
				f.locks[i].RUnlock()
			}
		}
	}
}

func (f *file) curSize() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size
}

// refreshSize asks a good brick for the size (another client may have
// written past what this one knows).
func (f *file) refreshSize(ctx context.Context) (int64, error) {
	a, err := f.handles.Getattr(ctx)
	if err != nil {
		return 0, err
	}
	if a.Linkto != "" {
		return 0, syscall.EREMOTE // moved by a rebalance: distribute reopens
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.size = int64(a.Size)
	return f.size, nil
}

// Getattr returns the attributes from a good brick, which records the
// file size with every write.
func (f *file) Getattr(ctx context.Context) (layer.Attr, error) {
	a, err := f.handles.Getattr(ctx)
	if err == nil && a.IsReg() {
		f.mu.Lock()
		f.size = int64(a.Size)
		f.mu.Unlock()
	}
	return f.d.scale(a, err)
}

func (d *Disperse) names(m replicate.Mask) []string {
	var out []string
	for i, c := range d.children {
		if m.Has(i) {
			out = append(out, c.Name)
		}
	}
	return out
}

// newVersion returns the identity of a stripe write: random, so that
// clients need not agree on a counter (what decides is which version K
// bricks share, not which is newer).
func newVersion() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:])
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// records encodes stripe writes (consecutive stripes) into one buffer per
// brick, for a file of size bytes after the write: the data chunks are
// copied once, into place, and the parity is computed in place. The
// buffers come from getBuf: putBufs gives them back.
func (d *Disperse) records(ws []StripeWrite, size int64) ([][]byte, error) {
	n := d.g.N()
	first := ws[0].Stripe
	total := int64(len(ws)-1)*Record + d.g.recordLen(ws[len(ws)-1].Stripe, size)
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = getBuf(int64(len(ws)) * Record)[:total]
	}
	chunks := make([][]byte, n)
	for k, w := range ws {
		if w.Stripe != first+int64(k) {
			putBufs(bufs)
			return nil, errors.New("disperse: stripe writes not consecutive")
		}
		at := int64(k)*Record + HeaderSize
		for i := range chunks {
			// Within the buffer's capacity: a cut last record still
			// needs its whole chunk to be encoded.
			chunks[i] = bufs[i][at : at+Chunk : at+Chunk]
			if i < d.g.K {
				copy(chunks[i], w.Data[i*Chunk:(i+1)*Chunk])
			}
		}
		if err := d.codec.Encode(chunks); err != nil {
			putBufs(bufs)
			return nil, err
		}
		version := newVersion()
		for i, ch := range chunks {
			h := Header{Version: version, Stripe: w.Stripe, K: uint8(d.g.K), M: uint8(d.g.M), Index: uint8(i)}
			h.sumBlocks(ch)
			h.put(bufs[i][at-HeaderSize : at : at])
		}
	}
	return bufs, nil
}

// bufPool holds buffers for the records of one FUSE request (1 MiB: four
// 4+2 stripes, or fewer wider ones).
var bufPool = sync.Pool{New: func() any { b := make([]byte, poolBuf); return &b }}

const poolBuf = 4 * Record

// getBuf returns a buffer of capacity at least n (not zeroed).
func getBuf(n int64) []byte {
	if n > poolBuf {
		return make([]byte, n)
	}
	return (*bufPool.Get().(*[]byte))[:n]
}

func putBufs(bufs [][]byte) {
	for _, b := range bufs {
		if cap(b) == poolBuf {
			b = b[:poolBuf]
			bufPool.Put(&b)
		}
	}
}

// writeStripes writes whole stripes to every brick the file is open on.
// The bricks record the size (at least size) and, for those that miss the
// write, pending marks, in the same round trip. Fewer than K bricks taking
// it is an error (EIO), and so is fewer than K up before (EROFS). When
// every brick of the set took it, it returns the headers they now hold
// for the last stripe written. overwrite says the write replaces data the
// file held (not only extends it): the bricks then keep what it replaces
// where a write can tear (Geometry.Tears, undo.go).
func (f *file) writeStripes(ctx context.Context, ws []StripeWrite, size int64, raise, overwrite bool) ([]Header, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	files, open, _ := f.Handles()
	up := f.d.up()
	if up&^open != 0 && f.mayReopen() {
		f.Reopen(ctx)
		files, open, _ = f.Handles()
	}
	targets := open & up
	// Bricks down now miss this write (marked pending in its round
	// trip): out of the file until reopened.
	f.Drop(open &^ up)
	if targets.Count() < f.d.g.K {
		f.d.log.Warn("disperse set has fewer than K bricks up: refusing writes", "path", f.path, "up", f.d.names(targets))
		return nil, syscall.EROFS
	}
	bufs, err := f.d.records(ws, size)
	if err != nil {
		return nil, err
	}
	defer putBufs(bufs)
	// Dirty: should this client die before every brick has the write,
	// the healer checks the stripes agree (cleared at release).
	t := layer.Txn{Pending: uint64(f.d.all()&^targets) | layer.Dirty, SetSize: raise, Size: uint64(size), KeepUndo: overwrite && f.d.keepUndo}
	f.hold.noteWrite()
	wctx := layer.WithTxn(ctx, t)
	errs := make([]error, f.d.g.N())
	var wg sync.WaitGroup
	for i := range errs {
		if !targets.Has(i) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = files[i].Write(wctx, bufs[i], ws[0].Stripe*Record)
		}()
	}
	wg.Wait()
	if err := f.settleWrite(ctx, errs, targets); err != nil {
		return nil, err
	}
	if targets != f.d.all() || errors.Join(errs...) != nil {
		return nil, nil
	}
	return lastHeaders(bufs, int64(len(ws)-1)*Record), nil
}

// lastHeaders parses the headers at off of the records in bufs.
func lastHeaders(bufs [][]byte, off int64) []Header {
	heads := make([]Header, len(bufs))
	for i, b := range bufs {
		h, err := parseHeader(b[off : off+HeaderSize])
		if err != nil {
			return nil
		}
		heads[i] = h
	}
	return heads
}

// settleWrite marks the bricks of targets a write missed (errs) on those
// it reached, and fails unless K took it: with the bricks' own error if
// none took it and they were up (ENOSPC, EDQUOT ...), else EIO.
func (f *file) settleWrite(ctx context.Context, errs []error, targets replicate.Mask) error {
	if err := moved(errs); err != nil {
		return err
	}
	var ok, failed replicate.Mask
	var firstErr error
	for i, e := range errs {
		switch {
		case !targets.Has(i):
		case e == nil:
			ok |= replicate.Bit(i)
			f.d.noteRoom(i, true)
		default:
			if errors.Is(e, syscall.ENOSPC) || errors.Is(e, syscall.EDQUOT) {
				f.d.noteRoom(i, false)
			}
			failed |= replicate.Bit(i)
			if firstErr == nil || replicate.IsDown(firstErr) {
				firstErr = e
			}
		}
	}
	if ok != 0 && failed != 0 {
		f.Missed(ctx, ok, failed)
	}
	f.hold.lost(failed)
	if ok.Count() < f.d.g.K {
		if ok == 0 && firstErr != nil && !replicate.IsDown(firstErr) {
			return firstErr // ENOSPC, EDQUOT ... from every brick
		}
		f.d.log.Error("write reached fewer than K bricks", "path", f.path, "ok", f.d.names(ok), "failed", f.d.names(failed), "err", firstErr)
		return syscall.EIO
	}
	return nil
}

// moved returns EREMOTE if a brick answered it: a rebalance moved the file
// to another set, and distribute reopens it there and does the operation
// again. The bricks that did it changed the old copy, now gone: nothing
// is marked.
func moved(errs []error) error {
	for _, err := range errs {
		if errors.Is(err, syscall.EREMOTE) {
			return err
		}
	}
	return nil
}

// Write writes p at off (at the end of file for O_APPEND): whole stripes
// encoded and written to all bricks at once; a partly covered stripe is
// read first (from the stripe cache when the previous write left it). It
// holds the file's lock on the bricks throughout (lock.go).
func (f *file) Write(ctx context.Context, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if off < 0 && !f.append {
		return 0, syscall.EINVAL
	}
	if f.append {
		f.appendMu.Lock()
		defer f.appendMu.Unlock()
	}
	err := f.writeLocked(ctx, func() error {
		if f.append {
			off = f.curSize() // exact: no other client writes while we hold the lock
		}
		return f.write(ctx, p, off)
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// roomToSpare fails with ENOSPC, before anything is written, when fewer
// than K bricks the file is open on have room (a brick reports nothing
// available beyond its reserve once it refuses new data): those that
// refused would leave the stripes written on fewer than K bricks,
// overwritten where they were taken and neither the old nor the new
// version readable (the simulation found it: a brick down and another
// full, or two full). It asks the bricks only when the write has no
// brick to spare: when at most K of them are up and not known to be full
// (Disperse.full); with more, one refusal costs nothing (the brick is
// marked and healed).
func (f *file) roomToSpare(ctx context.Context) error {
	_, open, _ := f.Handles()
	targets := open & f.d.up()
	if targets.Count() < f.d.g.K || (targets&^replicate.Mask(f.d.full.Load())).Count() > f.d.g.K {
		return nil // too few up: the write says so (EROFS)
	}
	room := make([]bool, f.d.g.N())
	var wg sync.WaitGroup
	for i := range room {
		if targets.Has(i) {
			wg.Go(func() {
				st, err := f.d.children[i].Layer.Statfs(ctx, "/")
				room[i] = err != nil || st.Bavail > 0 // one that cannot say is tried
				f.d.noteRoom(i, room[i])
			})
		}
	}
	wg.Wait()
	var roomy replicate.Mask
	for i, ok := range room {
		if ok && targets.Has(i) {
			roomy |= replicate.Bit(i)
		}
	}
	if roomy.Count() < f.d.g.K {
		f.d.log.Warn("disperse set has fewer than K bricks with room: refusing the write before it overwrites anything",
			"path", f.path, "full", f.d.names(targets&^roomy))
		return syscall.ENOSPC
	}
	return nil
}

// noteRoom records whether brick i has room, as a write or a probe found.
func (d *Disperse) noteRoom(i int, room bool) {
	for {
		old := d.full.Load()
		m := old &^ uint64(replicate.Bit(i))
		if !room {
			m |= uint64(replicate.Bit(i))
		}
		if m == old || d.full.CompareAndSwap(old, m) {
			return
		}
	}
}

// write writes p at off, holding the lock on the bricks. Writes within
// one stripe go together with those waiting for it (batch.go).
func (f *file) write(ctx context.Context, p []byte, off int64) error {
	sp := f.d.g.SpanOf(off, int64(len(p)))
	if sp.First == sp.Last && !f.append {
		return f.batched(ctx, sp.First, p, off)
	}
	unlock := f.lockStripes(sp.First, sp.Last, true)
	defer unlock()
	return f.writeSpan(ctx, sp, p, off)
}

// writeSpan writes p at off, over the stripes of sp, holding their locks.
func (f *file) writeSpan(ctx context.Context, sp Span, p []byte, off int64) error {
	size := f.curSize()
	if sp.First == sp.Last {
		if done, err := f.writeKnown(ctx, sp.First, p, off, size); done {
			return err
		}
	}
	if sp.First == sp.Last && !f.hasCached(sp.First) {
		if done, err := f.writeSmall(ctx, p, off, size); done {
			return err
		}
	}
	for s := sp.First; s <= sp.Last; s++ {
		f.keepHeads(s, nil) // new versions below
	}
	ws, newSize, err := f.d.g.PlanWrite(off, p, size, func(s int64) ([]byte, error) { return f.readStripe(ctx, s, true) })
	if err != nil {
		return err
	}
	heads, err := f.writeStripes(ctx, ws, newSize, true, off < size)
	if err != nil {
		f.forget()
		return err
	}
	f.mu.Lock()
	f.size = max(f.size, newSize)
	last := ws[len(ws)-1]
	if (off+int64(len(p)))%f.d.g.Stripe() != 0 {
		// The write ends inside a stripe: the next one (sequential,
		// smaller than a stripe) will want it.
		f.cache.put(last)
	} else {
		f.cache = stripeCache{}
	}
	f.mu.Unlock()
	if f.hasCached(last.Stripe) {
		f.keepHeads(last.Stripe, heads)
	}
	return nil
}

// Setattr truncates the fragments for a size change (rewriting the stripe
// the new end cuts, so that its tail reads as zeros); the other
// attributes are the namespace's.
func (f *file) Setattr(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	if in.Valid&layer.SetSize == 0 {
		return f.d.scale(f.handles.Setattr(ctx, in))
	}
	if int64(in.Size) < 0 {
		return layer.Attr{}, syscall.EFBIG
	}
	var a layer.Attr
	err := f.writeLocked(ctx, func() (err error) {
		a, err = f.truncate(ctx, in)
		return err
	})
	return a, err
}

// truncate sets the size, holding the lock on the bricks.
func (f *file) truncate(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	unlock := f.lockStripes(0, int64(len(f.locks)), true)
	defer unlock()
	newSize := int64(in.Size)
	size := f.curSize() // exact: no other client writes while we hold the lock
	ws, err := f.d.g.PlanTruncate(newSize, size, func(s int64) ([]byte, error) { return f.readStripe(ctx, s, true) })
	if err != nil {
		return layer.Attr{}, err
	}
	f.forget()
	if _, err := f.writeStripes(ctx, ws, newSize, false, true); err != nil {
		return layer.Attr{}, err
	}
	in.Size = uint64(f.d.g.FragmentLen(newSize))
	f.hold.noteWrite()
	a, err := f.handles.Setattr(layer.WithTxn(ctx, layer.Txn{Pending: layer.Dirty, SetSize: true, Size: uint64(newSize)}), in)
	if err != nil {
		return a, err
	}
	f.mu.Lock()
	f.size = newSize
	f.mu.Unlock()
	return f.d.scale(a, nil)
}

// Fallocate allocates the records of the stripes the range touches on
// every brick (reading as holes: zeros) and, without KEEP_SIZE, extends
// the size as a truncate would; punching a hole writes zeros.
func (f *file) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	const keepSize, punchHole = 0x1, 0x2
	switch {
	case off < 0 || length <= 0:
		return syscall.EINVAL
	case mode == 0 || mode == keepSize:
		sp := f.d.g.SpanOf(off, length)
		if err := f.handles.Fallocate(ctx, mode|keepSize, sp.First*Record, (sp.Last-sp.First+1)*Record); err != nil {
			return err
		}
		if end := off + length; mode == 0 && end > f.curSize() {
			_, err := f.Setattr(ctx, layer.SetattrIn{Valid: layer.SetSize, Size: uint64(end)})
			return err
		}
		return nil
	case mode == punchHole|keepSize:
		size := f.curSize()
		end := min(off+length, size)
		zeros := make([]byte, min(end-off, 1<<20))
		for o := off; o < end; o += int64(len(zeros)) {
			n := min(int64(len(zeros)), end-o)
			if _, err := f.Write(ctx, zeros[:n], o); err != nil {
				return err
			}
		}
		return nil
	}
	return syscall.EOPNOTSUPP
}

// Release lets go of the file's lock on the bricks, clearing the Dirty
// mark its writes left (lock.go), then closes the fragments; in the
// background: close(2) does not wait for it.
func (f *file) Release(ctx context.Context) error {
	// Under the gate: a hold ending on its timer finishes first.
	f.hold.gate.Lock()
	f.hold.mu.Lock()
	held := f.hold.held
	f.hold.mu.Unlock()
	if held == 0 {
		f.hold.gate.Unlock()
		return f.handles.Release(ctx)
	}
	f.d.bg.Add(1)
	go func() {
		defer f.d.bg.Done()
		defer f.hold.gate.Unlock()
		ctx := context.WithoutCancel(ctx)
		f.endHold(ctx, false) // the release below drops the locks
		f.handles.Release(ctx)
	}()
	return nil
}

// cached returns a copy of stripe s from the cache, or nil.
func (f *file) cached(s int64) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cache.get(s)
}

// hasCached reports whether the cache holds stripe s.
func (f *file) hasCached(s int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cache.data != nil && f.cache.stripe == s
}

// forget empties the stripe cache and forgets the headers kept.
func (f *file) forget() {
	f.mu.Lock()
	f.cache = stripeCache{}
	f.heads = nil
	f.mu.Unlock()
}

// stripeCache keeps the last stripe written, so that sequential writes
// smaller than a stripe do not read back what they just wrote.
type stripeCache struct {
	stripe int64
	data   []byte
}

func (c *stripeCache) get(s int64) []byte {
	if c.data == nil || c.stripe != s {
		return nil
	}
	return append([]byte(nil), c.data...)
}

func (c *stripeCache) put(w StripeWrite) {
	c.stripe, c.data = w.Stripe, append(c.data[:0], w.Data...)
}
