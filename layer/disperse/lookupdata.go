package disperse

import (
	"context"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// Quick-read over a disperse set: a file of at most one Chunk lies whole
// in the first record of the first data brick's fragment (its header and
// its blocks; the other bricks hold zeros and parity). So a lookup asks
// that brick for its fragment (layer.FragmentLooker), the others for
// their attributes, in the one round trip of a lookup, and hands up the
// content if the brick's copy is judged good and its record checks out —
// the checks a read of that chunk makes (readFast): a header of this set,
// stripe 0, brick 0, every block's checksum, the length the size gives.

var _ layer.DataLooker = (*Disperse)(nil)

// LookupData is Lookup, plus the content of a file of at most
// min(max, Chunk) bytes (layer.DataLooker).
func (d *Disperse) LookupData(ctx context.Context, path string, max int) (layer.Attr, []byte, error) {
	max = min(max, Chunk)
	raw := int(d.g.FragmentLen(int64(max)))
	a, frag, err := d.Replicate.LookupDataFrom(ctx, path, firstData, func(l layer.Layer) (layer.Attr, []byte, error) {
		fl, ok := l.(layer.FragmentLooker)
		if !ok {
			a, err := l.Lookup(ctx, path)
			return a, nil, err
		}
		return fl.LookupFragment(ctx, path, raw)
	})
	a, err = d.scale(a, err)
	if err != nil || frag == nil || !a.IsReg() || a.Size > uint64(max) {
		return a, nil, err
	}
	return a, d.smallContent(frag, int64(a.Size)), nil
}

// firstData chooses the first data brick, if up.
func firstData(up replicate.Mask) int {
	if up.Has(0) {
		return 0
	}
	return -1
}

// smallContent returns the content of a file of size bytes (at most a
// Chunk) from the first data brick's fragment, or nil if the fragment
// does not check out.
func (d *Disperse) smallContent(frag []byte, size int64) []byte {
	if int64(len(frag)) != d.g.FragmentLen(size) {
		return nil
	}
	if size == 0 {
		return []byte{}
	}
	h, err := parseHeader(frag[:HeaderSize])
	if err != nil || h.Version == 0 || h.Stripe != 0 || h.Index != 0 || int(h.K) != d.g.K || int(h.M) != d.g.M {
		return nil
	}
	if blocks := frag[HeaderSize:]; h.checkBlocks(blocks, 0) {
		return blocks[:size]
	}
	return nil
}
