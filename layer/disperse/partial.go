package disperse

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/mortarfs/mortar/layer"
)

// writeSmall writes p at off, within one data chunk of a stripe that
// already holds data, without reading or rewriting the whole stripe:
// Reed-Solomon is linear, so the parity of the blocks the write covers
// changes by what the write changes in them (Codec.Update). It reads the
// header of every brick and, from the written chunk's brick and the
// parity bricks, the blocks the write covers; it writes those back with
// the new blocks and the new parity beside a new header (one request
// around the blocks it leaves: layer.GapWriter), and every other data
// brick gets only a new header (the stripe's new version, its chunk
// unchanged).
//
// It only overwrites: a write that extends the file takes the whole-stripe
// path. It returns false, having written nothing, when it cannot: a brick not
// up or not current for the file, headers or checksums that do not agree.
// The caller then rewrites the whole stripe (which rebuilds what it must).
func (f *file) writeSmall(ctx context.Context, p []byte, off, size int64) (bool, error) {
	g := f.d.g
	ss := g.Stripe()
	s := off / ss
	lo := off - s*ss // in the stripe
	ci := int(lo / Chunk)
	if (lo+int64(len(p))-1)/Chunk != int64(ci) || off+int64(len(p)) > size {
		// Spans chunks, or extends the file: the whole stripe is
		// rewritten, so that every fragment keeps FragmentLen(size).
		return false, nil
	}
	files, open, good := f.Handles()
	if all := f.d.all(); open&good&f.d.up() != all {
		return false, nil
	}
	inChunk := lo - int64(ci)*Chunk
	pt := part{s: s, ci: ci, k: g.K, b1: int(roundUp(inChunk+int64(len(p)), Block) / Block)}
	if gapWriters(files) {
		pt.b0 = int(inChunk / Block)
	}
	heads := f.headsOf(s) // nil unless this hold wrote the stripe
	bufs, ok := pt.read(ctx, files, heads == nil)
	defer putBufs(bufs)
	if ok && heads == nil {
		heads, ok = pt.headers(bufs)
	}
	if !ok || !pt.check(bufs, heads) {
		f.keepHeads(s, nil)
		return false, nil
	}
	if err := pt.update(f.d.codec, bufs, p, inChunk); err != nil {
		return false, err
	}
	pt.seal(bufs, heads, newVersion())
	f.hold.noteWrite()
	errs := pt.write(layer.WithTxn(ctx, layer.Txn{Pending: layer.Dirty, KeepUndo: f.d.keepUndo}), files, bufs)
	if errors.Join(errs...) != nil {
		heads = nil
	}
	f.keepHeads(s, heads)
	return true, f.settleWrite(ctx, errs, f.d.all())
}

// part is what a small write touches of stripe s: blocks [b0, b1) of data
// chunk ci and of the parity chunks, and every brick's header.
type part struct {
	s      int64
	ci, k  int
	b0, b1 int
}

// changes says whether brick j's blocks change (the written chunk's and
// the parity bricks'); the others change only their header.
func (pt part) changes(j int) bool { return j == pt.ci || j >= pt.k }

// at is where the stripe's record is; blocks, the blocks in a brick's
// buffer (after its header).
func (pt part) at() int64              { return pt.s * Record }
func (pt part) blocks(b []byte) []byte { return b[HeaderSize:] }

// read reads, from the bricks whose blocks change, those blocks, and with
// headers every brick's header; past a fragment's end reads zeros. ok is
// false if a read failed.
func (pt part) read(ctx context.Context, files []layer.File, headers bool) (bufs [][]byte, ok bool) {
	n := len(files)
	bufs = make([][]byte, n)
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for j := range n {
		length := int64(HeaderSize)
		if pt.changes(j) {
			length += int64(pt.b1-pt.b0) * Block
		}
		bufs[j] = getBuf(length)
		if headers {
			wg.Go(func() { errs[j] = readFull(ctx, files[j], bufs[j][:HeaderSize], pt.at()) })
		}
		if pt.changes(j) {
			wg.Go(func() {
				errs[n+j] = readFull(ctx, files[j], pt.blocks(bufs[j]), pt.at()+HeaderSize+int64(pt.b0)*Block)
			})
		}
	}
	wg.Wait()
	return bufs, errors.Join(errs...) == nil
}

// readFull reads p at off from f, zeros past the end of the file.
func readFull(ctx context.Context, f layer.File, p []byte, off int64) error {
	got, err := f.Read(ctx, p, off)
	if err == nil {
		clear(p[got:])
	}
	return err
}

// headers parses the headers read: one version, this stripe, the right
// index. ok is false if they do not agree.
func (pt part) headers(bufs [][]byte) (headers []Header, ok bool) {
	headers = make([]Header, len(bufs))
	for j, b := range bufs {
		h, err := parseHeader(b[:HeaderSize])
		if err != nil || h.Version == 0 || h.Stripe != pt.s || int(h.Index) != j || j > 0 && h.Version != headers[0].Version {
			return nil, false
		}
		headers[j] = h
	}
	return headers, true
}

// check checks the blocks read against the headers.
func (pt part) check(bufs [][]byte, headers []Header) bool {
	for j, b := range bufs {
		if pt.changes(j) && !headers[j].checkBlocks(pt.blocks(b), pt.b0) {
			return false
		}
	}
	return true
}

// update puts p, at inChunk in chunk ci, into the blocks read, and updates
// the parity blocks by the difference.
func (pt part) update(c *Codec, bufs [][]byte, p []byte, inChunk int64) error {
	old := pt.blocks(bufs[pt.ci])
	newBlocks := append([]byte(nil), old...)
	copy(newBlocks[inChunk-int64(pt.b0)*Block:], p)
	shards := make([][]byte, len(bufs))
	shards[pt.ci] = append([]byte(nil), old...) // Update scribbles on it
	for j := pt.k; j < len(bufs); j++ {
		shards[j] = pt.blocks(bufs[j])
	}
	changed := make([][]byte, pt.k)
	changed[pt.ci] = newBlocks
	if err := c.enc.Update(shards, changed); err != nil {
		return err
	}
	copy(old, newBlocks)
	return nil
}

// seal gives every brick's header the new version and the sums of the
// blocks that changed, and writes it into the brick's buffer.
func (pt part) seal(bufs [][]byte, headers []Header, version uint64) {
	for j, b := range bufs {
		h := &headers[j]
		h.Version = version
		if pt.changes(j) {
			blocks := pt.blocks(b)
			for i := 0; i < pt.b1-pt.b0; i++ {
				h.Sums[pt.b0+i] = Sum(blocks[i*Block : (i+1)*Block])
			}
		}
		h.put(b[:HeaderSize])
	}
}

// write writes every brick's buffer back: the header, and the blocks past
// the gap where they changed.
func (pt part) write(ctx context.Context, files []layer.File, bufs [][]byte) []error {
	return writeRecords(ctx, files, bufs, pt.at(), pt.b0, pt.changes)
}

// writeRecords sends brick j its buffer for the record at at: its header,
// followed, if blocks(j), by its blocks from block lo on, in one request
// around the blocks before them (layer.GapWriter).
func writeRecords(ctx context.Context, files []layer.File, bufs [][]byte, at int64, lo int, blocks func(j int) bool) []error {
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for j := range files {
		wg.Go(func() {
			if blocks(j) && lo > 0 {
				_, errs[j] = layer.WriteGap(ctx, files[j], bufs[j], at, layer.Gap{At: HeaderSize, Len: uint32(lo * Block)})
			} else {
				_, errs[j] = files[j].Write(ctx, bufs[j], at)
			}
		})
	}
	wg.Wait()
	return errs
}

// gapWriters says whether every file writes around a gap in one request.
func gapWriters(files []layer.File) bool {
	for _, f := range files {
		if _, ok := f.(layer.GapWriter); !ok {
			return false
		}
	}
	return true
}

// maxHeads bounds the stripes whose headers a file keeps.
const maxHeads = 4096

// headsOf returns a copy of the headers the file's small writes left on
// stripe s while it holds the lock on the bricks, or nil: with no other
// writer, they are what the bricks hold, and a small write need not read
// them again.
func (f *file) headsOf(s int64) []Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.heads[s])
}

// keepHeads keeps the headers of stripe s (nil: forgets them).
func (f *file) keepHeads(s int64, h []Header) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case h == nil:
		delete(f.heads, s)
	case f.heads == nil || len(f.heads) >= maxHeads:
		f.heads = map[int64][]Header{s: h}
	default:
		f.heads[s] = h
	}
}
