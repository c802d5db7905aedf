package disperse

import (
	"context"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// writeSmall writes p at off, within one data chunk of a stripe that
// already holds data, without reading or rewriting the whole stripe:
// Reed-Solomon is linear, so the parity of the blocks the write covers
// changes by what the write changes in them (Codec.Update). It reads the
// header of every brick and, from the written chunk's brick and the
// parity bricks, the blocks up to the write's end; it writes those back
// with the new blocks and the new parity, and every other data brick gets
// only a new header (the stripe's new version, its chunk unchanged).
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
	n := g.N()
	files, open, good := f.Handles()
	if all := f.d.all(); open&good&f.d.up() != all {
		return false, nil
	}
	inChunk := lo - int64(ci)*Chunk
	b0 := int(inChunk / Block)
	b1 := int(roundUp(inChunk+int64(len(p)), Block) / Block)
	data := func(j int) bool { return j == ci || j >= g.K } // bricks whose blocks change
	bufs := make([][]byte, n)
	defer putBufs(bufs)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for j := 0; j < n; j++ {
		length := int64(HeaderSize)
		if data(j) {
			length += int64(b1) * Block
		}
		bufs[j] = getBuf(length)
		wg.Go(func() {
			got, err := files[j].Read(ctx, bufs[j], s*Record)
			if err == nil {
				clear(bufs[j][got:]) // past the fragment's end: zeros
			}
			errs[j] = err
		})
	}
	wg.Wait()
	headers := make([]Header, n)
	for j := 0; j < n; j++ {
		if errs[j] != nil {
			return false, nil
		}
		h, err := parseHeader(bufs[j][:HeaderSize])
		if err != nil || h.Version == 0 || h.Stripe != s || int(h.Index) != j || h.Version != headers[0].Version && j > 0 {
			return false, nil
		}
		if data(j) && !h.check(bufs[j][HeaderSize:HeaderSize+b1*Block], 0, b1) {
			return false, nil
		}
		headers[j] = h
	}

	// The new blocks of the chunk, and the parity updated in place.
	span := func(j int) []byte { return bufs[j][HeaderSize+b0*Block : HeaderSize+b1*Block] }
	newBlocks := append([]byte(nil), span(ci)...)
	copy(newBlocks[inChunk-int64(b0)*Block:], p)
	shards := make([][]byte, n)
	shards[ci] = append([]byte(nil), span(ci)...) // Update scribbles on it
	for j := g.K; j < n; j++ {
		shards[j] = span(j)
	}
	changed := make([][]byte, g.K)
	changed[ci] = newBlocks
	if err := f.d.codec.enc.Update(shards, changed); err != nil {
		return false, err
	}
	copy(span(ci), newBlocks)

	version := newVersion()
	for j := 0; j < n; j++ {
		h := headers[j]
		h.Version = version
		if data(j) {
			for b := b0; b < b1; b++ {
				h.Sums[b] = Sum(bufs[j][HeaderSize+b*Block : HeaderSize+(b+1)*Block])
			}
		}
		h.put(bufs[j][:HeaderSize])
	}
	wctx := layer.WithTxn(ctx, layer.Txn{Pending: layer.Dirty})
	f.hold.noteWrite()
	for j := 0; j < n; j++ {
		wg.Go(func() { _, errs[j] = files[j].Write(wctx, bufs[j], s*Record) })
	}
	wg.Wait()
	if err := moved(errs); err != nil {
		return true, err
	}
	var ok, failed replicate.Mask
	for j, err := range errs {
		if err == nil {
			ok |= replicate.Bit(j)
		} else {
			failed |= replicate.Bit(j)
		}
	}
	if ok != 0 && failed != 0 {
		f.Missed(ctx, ok, failed)
	}
	f.hold.lost(failed)
	if ok.Count() < g.K {
		f.d.log.Error("write reached fewer than K bricks", "path", f.path, "ok", f.d.names(ok), "failed", f.d.names(failed))
		return true, syscall.EIO
	}
	return true, nil
}
