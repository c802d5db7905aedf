package disperse

import (
	"context"
	"errors"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// The read path: the fast read from the data bricks, and the rebuild of a
// stripe from any K bricks that agree.

// Read reads from the data bricks, rebuilding from the others what a data
// brick cannot give (down, behind, or a chunk that fails its checksum).
func (f *file) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	size := f.curSize()
	if off+int64(len(p)) > size {
		var err error
		if size, err = f.refreshSize(ctx); err != nil {
			return 0, err
		}
	}
	if off >= size {
		return 0, nil
	}
	n := min(int64(len(p)), size-off)
	err := f.readStripes(ctx, p[:n], off, false)
	if errors.Is(err, errUnsettled) {
		// Another client may be writing the stripe: read it again
		// under the writers' lock, when what the bricks hold is what
		// the stripe is.
		err = f.withLock(ctx, false, func() error { return f.readStripes(ctx, p[:n], off, true) })
		if errors.Is(err, syscall.EROFS) {
			err = syscall.EIO // fewer than K bricks up: the stripe cannot be read
		}
	}
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// errUnsettled is what a read without the writers' lock finds when a
// stripe has no version on K bricks or a chunk fails its checksums: a
// write of another client under way looks the same as a torn or corrupt
// stripe. Read then reads it again holding the lock.
var errUnsettled = errors.New("disperse: stripe unsettled")

// readStripes reads p at off under the stripe locks; locked says whether
// the file holds the writers' lock.
func (f *file) readStripes(ctx context.Context, p []byte, off int64, locked bool) error {
	sp := f.d.g.SpanOf(off, int64(len(p)))
	unlock := f.lockStripes(sp.First, sp.Last, false)
	defer unlock()
	return f.readRange(ctx, p, off, locked)
}

// readRange fills p with the file's bytes at off (all within the size).
// Without the writers' lock (locked), a stripe that does not settle is
// errUnsettled.
func (f *file) readRange(ctx context.Context, p []byte, off int64, locked bool) error {
	g := f.d.g
	ss := g.Stripe()
	sp := g.SpanOf(off, int64(len(p)))
	bad, remote, corrupt := f.readFast(ctx, p, off, sp, locked)
	if remote {
		return syscall.EREMOTE // moved by a rebalance: distribute reopens
	}
	if corrupt && !locked {
		return errUnsettled
	}
	for s := sp.First; s <= sp.Last; s++ {
		if !bad[s-sp.First] {
			continue
		}
		data, err := f.readStripe(ctx, s, locked)
		if err != nil {
			return err
		}
		lo, hi := max(off, s*ss), min(off+int64(len(p)), (s+1)*ss)
		copy(p[lo-off:hi-off], data[lo-s*ss:hi-s*ss])
	}
	return nil
}

// readFast reads the stripes of sp straight from the data bricks, one
// request per brick, and copies what checks out into p. It returns, per
// stripe, whether the stripe must be rebuilt instead, whether a brick
// answered EREMOTE (the file was moved by a rebalance), and whether a
// chunk failed its checksums (its brick is marked only when locked: without
// the writers' lock it may be a write under way).
func (f *file) readFast(ctx context.Context, p []byte, off int64, sp Span, locked bool) (bad []bool, remote, failed bool) {
	g := f.d.g
	ss := g.Stripe()
	end := off + int64(len(p))
	nstripes := sp.Last - sp.First + 1
	bad = make([]bool, nstripes)
	files, _, good := f.Handles()
	avail := good & f.d.up()
	// The last byte of each data chunk the read needs, in the last stripe.
	type want struct {
		buf      []byte
		from, to int64 // chunk byte range needed in the first / last stripe
		err      error
	}
	wants := make([]*want, g.K)
	var wg sync.WaitGroup
	for i := 0; i < g.K; i++ {
		// The range of this chunk's bytes the read needs: in stripe
		// First from lo0, in stripe Last up to hi1.
		c0 := sp.First*ss + int64(i)*Chunk // file offset of chunk i in the first stripe
		c1 := sp.Last*ss + int64(i)*Chunk
		if nstripes == 1 && (c0 >= end || c0+Chunk <= off) {
			continue // a single-stripe read not touching this chunk
		}
		w := &want{from: 0, to: Chunk}
		if off > c0 {
			w.from = min(off-c0, Chunk)
		}
		if end < c1+Chunk {
			w.to = max(end-c1, 0)
		}
		if nstripes == 1 && w.from >= w.to {
			continue
		}
		wants[i] = w
		if !avail.Has(i) || files[i] == nil {
			w.err = syscall.ENOTCONN
			continue
		}
		length := (nstripes-1)*Record + HeaderSize + roundUp(max(w.to, 1), Block)
		w.buf = getBuf(length)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got int
			got, w.err = files[i].Read(ctx, w.buf, sp.First*Record)
			if w.err == nil {
				clear(w.buf[got:]) // past the fragment's end: zeros
			}
		}()
	}
	wg.Wait()
	for _, w := range wants {
		if w != nil && errors.Is(w.err, syscall.EREMOTE) {
			remote = true
		}
	}
	var corrupt replicate.Mask
	for k := int64(0); k < nstripes; k++ {
		s := sp.First + k
		version, seen := uint64(0), false
		for i, w := range wants {
			if w == nil {
				continue
			}
			from, to := int64(0), int64(Chunk)
			if k == 0 {
				from = w.from
			}
			if k == nstripes-1 {
				to = w.to
			}
			if from >= to {
				continue // this chunk holds none of the read in this stripe
			}
			if w.err != nil {
				bad[k] = true
				break
			}
			rec := w.buf[k*Record:]
			h, err := parseHeader(rec[:HeaderSize])
			chunk := rec[HeaderSize:]
			if len(chunk) < Chunk {
				chunk = append(chunk[:len(chunk):len(chunk)], make([]byte, Chunk-len(chunk))...)
			}
			fb, tb := int(from/Block), int(roundUp(to, Block)/Block)
			if err != nil || (h.Version != 0 && (h.Stripe != s || int(h.Index) != i)) || !h.check(chunk, fb, tb) {
				f.d.log.Warn("fragment chunk fails its checksum: rebuilt from the other bricks",
					"path", f.path, "brick", f.d.children[i].Name, "stripe", s)
				corrupt |= replicate.Bit(i)
				bad[k] = true
				break
			}
			if seen && h.Version != version {
				bad[k] = true // chunks of different writes: let the rebuild decide
				break
			}
			version, seen = h.Version, true
			fileOff := s*ss + int64(i)*Chunk
			lo, hi := max(off, fileOff+from), min(end, fileOff+to)
			copy(p[lo-off:hi-off], chunk[lo-fileOff:hi-fileOff])
		}
	}
	for _, w := range wants {
		if w != nil && w.buf != nil {
			putBufs([][]byte{w.buf})
		}
	}
	if corrupt != 0 && locked {
		f.Missed(ctx, avail&^corrupt, corrupt)
	}
	return bad, remote, corrupt != 0
}

// stripeChunks is what the bricks hold of one stripe.
type stripeChunks struct {
	headers []Header
	chunks  [][]byte // whole chunks; nil where missing or failing its checks
	remote  bool     // a brick answered EREMOTE: the file was moved away
}

// fetchStripe reads record s from the bricks in m.
func fetchStripe(ctx context.Context, g Geometry, files []layer.File, m replicate.Mask, s int64) (stripeChunks, replicate.Mask) {
	n := g.N()
	sc := stripeChunks{headers: make([]Header, n), chunks: make([][]byte, n)}
	var corrupt replicate.Mask
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		if !m.Has(i) || files[i] == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, Record)
			got, err := files[i].Read(ctx, buf, s*Record)
			if err != nil {
				if errors.Is(err, syscall.EREMOTE) {
					mu.Lock()
					sc.remote = true
					mu.Unlock()
				}
				return
			}
			clear(buf[got:])
			h, err := parseHeader(buf[:HeaderSize])
			chunk := buf[HeaderSize:]
			if err != nil || (h.Version != 0 && (h.Stripe != s || int(h.Index) != i)) || !h.check(chunk, 0, blocks) {
				mu.Lock()
				corrupt |= replicate.Bit(i)
				mu.Unlock()
				return
			}
			sc.headers[i], sc.chunks[i] = h, chunk
		}()
	}
	wg.Wait()
	return sc, corrupt
}

// settle decides what a stripe holds from the chunks read: the write that
// K bricks share (current). If no write has K chunks — a client died
// while writing the stripe, some bricks got the new chunks and too few
// kept the old ones — but the K data chunks are all there and sound, the
// stripe is those data chunks as they are: each 64 KiB holds the old or
// the new content, never garbage, and torn says the parity must be made
// again. Only the chunks of trusted bricks count so: a read does not
// trust a brick the others blame, which may hold an older chunk than
// either (the simulation, disperse2+1-full seed 40: a stale data chunk
// read as the file, the brick that took the write down). Otherwise
// ErrTooFew.
func settle(g Geometry, sc *stripeChunks, trusted replicate.Mask) (version uint64, torn bool, err error) {
	saved := append([][]byte(nil), sc.chunks...)
	if v, err := current(g, sc); err == nil {
		return v, false, nil
	}
	copy(sc.chunks, saved)
	for i := 0; i < g.K; i++ {
		if sc.chunks[i] == nil || !trusted.Has(i) {
			return 0, false, ErrTooFew
		}
	}
	for i := g.K; i < g.N(); i++ {
		sc.chunks[i] = nil
	}
	return 0, true, nil
}

// current keeps, of the chunks read, those of the write that at least K
// bricks agree on (there is at most one: K > N/2), and returns its
// version; ErrTooFew if no write has K chunks.
func current(g Geometry, sc *stripeChunks) (uint64, error) {
	count := map[uint64]int{}
	for i, ch := range sc.chunks {
		if ch != nil {
			count[sc.headers[i].Version]++
		}
	}
	for v, c := range count {
		if c >= g.K {
			for i, ch := range sc.chunks {
				if ch != nil && sc.headers[i].Version != v {
					sc.chunks[i] = nil
				}
			}
			return v, nil
		}
	}
	return 0, ErrTooFew
}

// readStripe returns the Stripe() bytes of stripe s, rebuilt from any K
// bricks that agree, or from the stripe cache. Without the writers' lock
// (locked), a stripe that does not settle, or a chunk failing its checks,
// is errUnsettled.
func (f *file) readStripe(ctx context.Context, s int64, locked bool) ([]byte, error) {
	if data := f.cached(s); data != nil {
		return data, nil
	}
	// Every brick up may serve: a brick behind on the file (not good)
	// may still hold the current chunk of this stripe, and only chunks of
	// the one write that K bricks share are used (see current).
	files, open, good := f.Handles()
	avail := f.d.up()
	sc, corrupt := fetchStripe(ctx, f.d.g, files, avail, s)
	if sc.remote {
		return nil, syscall.EREMOTE // moved by a rebalance: distribute reopens
	}
	// Under the writers' lock a stripe with no version on K bricks is
	// torn by a writer that died: read as it was before that write, where
	// the bricks kept what it replaced, as heal will put it back.
	trusted := good &^ f.hold.blamedNow()
	if locked && revert(ctx, f.d.g, files, avail&open, trusted, &sc, s) != 0 {
		f.d.log.Warn("stripe torn by a write that did not finish: read as it was before it; heal puts it back",
			"path", f.path, "stripe", s)
	}
	_, torn, err := settle(f.d.g, &sc, trusted)
	if !locked && (corrupt != 0 || torn || err != nil) {
		return nil, errUnsettled
	}
	if corrupt != 0 {
		f.d.log.Warn("fragment chunks fail their checksums: rebuilt from the other bricks",
			"path", f.path, "bricks", f.d.names(corrupt), "stripe", s)
		f.Missed(ctx, avail&open&^corrupt, corrupt)
	}
	if err != nil {
		f.d.log.Error("stripe cannot be rebuilt: fewer than K bricks up and agreeing",
			"path", f.path, "stripe", s, "k", f.d.g.K)
		return nil, syscall.EIO
	} else if torn {
		f.d.log.Warn("stripe cut short by a write that did not finish: read from its data chunks; heal rewrites its parity",
			"path", f.path, "stripe", s)
	}
	if err := f.d.codec.Rebuild(sc.chunks, true); err != nil {
		return nil, syscall.EIO
	}
	data := make([]byte, 0, f.d.g.Stripe())
	for _, ch := range sc.chunks[:f.d.g.K] {
		data = append(data, ch...)
	}
	return data, nil
}
