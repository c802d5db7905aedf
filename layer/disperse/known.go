package disperse

import (
	"context"
	"errors"
	"slices"

	"github.com/mortarfs/mortar/layer"
)

// writeKnown writes p at off, within stripe s, when the file knows the
// stripe: its data (the stripe cache) and the headers its bricks hold
// (kept while the file holds the writers' lock). Nothing is read: the new
// parity of the blocks the write covers is encoded from the known data,
// and each brick gets its header and, where they change, those blocks
// (one request around the others: layer.GapWriter). A write that extends
// the file's last stripe also extends every fragment to the new length
// (zeros: FragmentLen stays true). Sequential writes smaller than a
// stripe — an append-only log, a file written with O_DIRECT — so cost one
// round trip of small writes each.
//
// It returns false, having written nothing, when it does not know the
// stripe or a brick is not up and current.
func (f *file) writeKnown(ctx context.Context, s int64, p []byte, off, size int64) (bool, error) {
	files, open, good := f.Handles()
	if open&good&f.d.up() != f.d.all() || !gapWriters(files) {
		return false, nil
	}
	g := f.d.g
	from := off - s*g.Stripe()
	newSize := max(size, off+int64(len(p)))
	kw := known{k: g.K, n: g.N()}
	kw.span(from, from+int64(len(p)), g.recordLen(s, size), g.recordLen(s, newSize))
	heads, ok := f.knownBlocks(s, &kw)
	if !ok {
		return false, nil
	}
	kw.put(p, from)
	bufs, err := kw.records(f.d.codec, heads, newVersion())
	defer putBufs(bufs)
	if err != nil {
		return false, err
	}
	f.hold.noteWrite()
	// A write from the file's end on replaces nothing the file held: a
	// torn one leaves the old bytes as they were (undo.go).
	wctx := layer.WithTxn(ctx, layer.Txn{Pending: layer.Dirty, SetSize: true, Size: uint64(newSize), KeepUndo: off < size && f.d.keepUndo})
	errs := writeRecords(wctx, files, bufs, s*Record, kw.lo, kw.sends)
	if err := f.settleWrite(ctx, errs, f.d.all()); err != nil || errors.Join(errs...) != nil {
		f.forget()
		return true, err
	}
	f.mu.Lock()
	f.size = max(f.size, newSize)
	if f.cache.stripe == s && f.cache.data != nil {
		copy(f.cache.data[from:], p)
	}
	f.mu.Unlock()
	f.keepHeads(s, heads)
	return true, nil
}

// knownBlocks copies, from the stripe cache, the blocks of the data
// chunks that kw's write encodes, and returns a copy of the stripe's
// headers; ok is false if the file does not know stripe s.
func (f *file) knownBlocks(s int64, kw *known) (heads []Header, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cache.data == nil || f.cache.stripe != s || f.heads[s] == nil {
		return nil, false
	}
	width := (kw.hi - kw.lo) * Block
	kw.data = make([][]byte, kw.k)
	for i := range kw.data {
		at := i*Chunk + kw.lo*Block
		kw.data[i] = append(make([]byte, 0, width), f.cache.data[at:at+width]...)
	}
	return slices.Clone(f.heads[s]), true
}

// known is a write of a known stripe: the blocks [lo, hi) of every data
// chunk (data, with the write in them), which go to the bricks that write
// blocks (the others get their header only).
type known struct {
	k, n   int
	data   [][]byte
	c0, c1 int // the data chunks the write changes
	grow   bool
	lo, hi int // blocks
}

// span sets the blocks a write of stripe bytes [from, to) sends, for a
// record that was oldLen long and becomes newLen (longer: every fragment
// grows).
func (kw *known) span(from, to, oldLen, newLen int64) {
	kw.c0, kw.c1 = int(from/Chunk), int((to-1)/Chunk)
	kw.lo, kw.hi = 0, Chunk/Block
	if kw.c0 == kw.c1 {
		in := from - int64(kw.c0)*Chunk
		kw.lo, kw.hi = int(in/Block), int(roundUp(in+to-from, Block)/Block)
	}
	oldEnd, newEnd := int((oldLen-HeaderSize)/Block), int((newLen-HeaderSize)/Block)
	if kw.grow = newEnd > oldEnd; kw.grow {
		kw.lo, kw.hi = min(kw.lo, oldEnd), max(kw.hi, newEnd)
	}
}

// put puts p, at from in the stripe, into the data blocks.
func (kw *known) put(p []byte, from int64) {
	for len(p) > 0 {
		c := int(from / Chunk)
		in := int(from-int64(c)*Chunk) - kw.lo*Block
		n := copy(kw.data[c][in:], p)
		p, from = p[n:], from+int64(n)
	}
}

// sends says whether brick j gets blocks.
func (kw *known) sends(j int) bool { return kw.grow || j >= kw.k || kw.c0 <= j && j <= kw.c1 }

// records makes every brick's request: header, then its blocks if it
// sends them; heads become the new headers.
func (kw *known) records(c *Codec, heads []Header, version uint64) ([][]byte, error) {
	width := int64(kw.hi-kw.lo) * Block
	bufs := make([][]byte, kw.n)
	shards := make([][]byte, kw.n)
	for j := range bufs {
		n := int64(HeaderSize)
		if kw.sends(j) {
			n += width
		}
		bufs[j] = getBuf(n)
		if j < kw.k {
			shards[j] = kw.data[j]
		} else {
			shards[j] = bufs[j][HeaderSize:]
		}
	}
	if err := c.Encode(shards); err != nil {
		return bufs, err
	}
	for j, b := range bufs {
		h := &heads[j]
		h.Version = version
		if kw.sends(j) {
			blocks := b[HeaderSize:]
			if j < kw.k {
				copy(blocks, shards[j]) // the parity was encoded in place
			}
			for i := 0; i < kw.hi-kw.lo; i++ {
				h.Sums[kw.lo+i] = Sum(blocks[i*Block : (i+1)*Block])
			}
		}
		h.put(b[:HeaderSize])
	}
	return bufs, nil
}
