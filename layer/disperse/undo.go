package disperse

import (
	"context"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// A write that a dying client sent to more than M but fewer than K bricks
// (3 of 6 on 4 + 2) leaves a stripe with no version on K bricks: torn.
// Each brick kept what the writes replaced in the inode's undo copy
// (layer.UndoReader; a write under the writers' lock that replaces data
// the file held asks for it where writes can tear, Geometry.Tears), so
// the healer can put the stripe back as it was before that write, whole,
// rather than keep each data chunk as it is (old or new per 64 KiB).

// revert replaces in sc, for stripe s of geometry g, the records of the
// bricks that took a write no K bricks share by what their undo copies
// say the records were before it, if that makes one version whole on K
// bricks; it returns those bricks, whose records must be written. Only
// trusted bricks count, their current chunks and their copies: a brick
// behind on the file may hold an older version still, which the copies of
// the bricks a later acknowledged write reached would make whole, losing
// that write (a review, 2026-11-28). Undo copies pile up while the file
// stays Dirty, so the copies may make several versions whole: the newest
// is taken, as a brick's copy and current chunk order them (a copy holds
// what its brick's current chunk replaced); nothing when none is known
// to be the newest, when the stripe is not torn, or when the copies
// cannot make it whole. A record is never put back to a hole: a write
// from the file's end on keeps nothing (both versions hold every byte the
// file held), nor does a brick restarted since (it kept them in memory),
// so a missing copy says nothing about what the record was. The healer
// writes those records back; a reader holding the writers' lock only
// reads them, so that it reads a torn stripe as heal will put it back
// rather than old or new per chunk.
func revert(ctx context.Context, g Geometry, files []layer.File, reach, trusted replicate.Mask, sc *stripeChunks, s int64) replicate.Mask {
	if torn := !agreed(g, sc); !torn {
		return 0
	}
	n := g.N()
	before := make([]Header, n)
	chunks := make([][]byte, n)
	for i := range n {
		if reach.Has(i) && trusted.Has(i) && files[i] != nil {
			before[i], chunks[i] = undoRecord(ctx, files[i], s, i, sc.chunks[i])
		}
	}
	whole := map[uint64]replicate.Mask{} // versions the copies make whole, and the bricks put back
	older := map[[2]uint64]bool{}        // {a, b}: a brick's copy says a came before b
	for i := range n {
		if chunks[i] != nil && sc.chunks[i] != nil {
			older[[2]uint64{before[i].Version, sc.headers[i].Version}] = true
		}
	}
	for i := range n {
		if chunks[i] == nil {
			continue
		}
		v := before[i].Version
		count, back := 0, replicate.Mask(0)
		for j := range n {
			switch {
			case !trusted.Has(j):
			case sc.chunks[j] != nil && sc.headers[j].Version == v:
				count++
			case chunks[j] != nil && before[j].Version == v:
				count++
				back |= replicate.Bit(j)
			}
		}
		if count >= g.K {
			whole[v] = back
		}
	}
	best, ok := newest(whole, older)
	if !ok {
		return 0
	}
	for i := range n {
		if best.Has(i) {
			sc.headers[i], sc.chunks[i] = before[i], chunks[i]
		}
	}
	return best
}

// newest returns, of the versions whole, the one no other is known to
// have come after (older), and whether there is exactly one such.
func newest(whole map[uint64]replicate.Mask, older map[[2]uint64]bool) (replicate.Mask, bool) {
	var best replicate.Mask
	found := 0
	for v, back := range whole {
		superseded := false
		for w := range whole {
			superseded = superseded || w != v && older[[2]uint64{v, w}]
		}
		if !superseded {
			best, found = back, found+1
		}
	}
	return best, found == 1
}

// agreed reports whether K of the chunks in sc share a version.
func agreed(g Geometry, sc *stripeChunks) bool {
	_, err := current(g, &stripeChunks{headers: sc.headers, chunks: append([][]byte(nil), sc.chunks...)})
	return err == nil
}

// undoRecord is record s of brick i as its undo copy says it was before
// the latest write of it that kept one, with cur the chunk the brick holds
// now (nil if unreadable): the copy holds the header and the blocks that
// write replaced, and a block it did not replace is the one the brick
// holds, which the header's sums tell. nil when the copy holds nothing of
// the record (a zero header), or does not check.
func undoRecord(ctx context.Context, f layer.File, s int64, i int, cur []byte) (Header, []byte) {
	buf := make([]byte, Record)
	got, err := layer.ReadUndo(ctx, f, buf, s*Record)
	if err != nil {
		return Header{}, nil
	}
	clear(buf[got:])
	hd, err := parseHeader(buf[:HeaderSize])
	if err != nil || hd.Version == 0 || hd.Stripe != s || int(hd.Index) != i {
		return Header{}, nil
	}
	chunk := buf[HeaderSize:]
	for b := 0; b < blocks && cur != nil; b++ {
		if kept := cur[b*Block : (b+1)*Block]; Sum(kept) == hd.Sums[b] {
			copy(chunk[b*Block:], kept)
		}
	}
	if !hd.check(chunk, 0, blocks) {
		return Header{}, nil
	}
	return hd, chunk
}
