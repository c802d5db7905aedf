package disperse

import (
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/klauspost/reedsolomon"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sum is the checksum kept for every Block of a fragment (CRC-32C).
func Sum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// ErrTooFew means fewer than K good chunks of a stripe are available: the
// stripe cannot be rebuilt (more than M bricks down, behind or corrupt).
var ErrTooFew = errors.New("disperse: fewer than K good chunks")

// Codec encodes and rebuilds stripes of one geometry. It is safe for
// concurrent use. Reed-Solomon works position by position across the
// chunks, so any byte range of a stripe's chunks can be encoded or
// rebuilt on its own: all chunks passed in one call have the same length.
type Codec struct {
	g   Geometry
	enc reedsolomon.Encoder
}

// NewCodec returns the codec of g.
func NewCodec(g Geometry) (*Codec, error) {
	enc, err := reedsolomon.New(g.K, g.M)
	if err != nil {
		return nil, fmt.Errorf("disperse %d+%d: %w", g.K, g.M, err)
	}
	return &Codec{g: g, enc: enc}, nil
}

// Encode computes the M parity chunks (chunks[K:]) from the K data chunks
// (chunks[:K]), in place. The code is systematic: the data chunks are the
// file's bytes, so healthy reads need no decoding.
func (c *Codec) Encode(chunks [][]byte) error {
	if len(chunks) != c.g.N() {
		return fmt.Errorf("disperse: %d chunks for %d bricks", len(chunks), c.g.N())
	}
	return c.enc.Encode(chunks)
}

// Rebuild fills in the chunks that are nil from the others: the data
// chunks only (dataOnly, for reads) or all of them (for heal). Fewer than
// K chunks present is ErrTooFew: never garbage.
func (c *Codec) Rebuild(chunks [][]byte, dataOnly bool) error {
	if len(chunks) != c.g.N() {
		return fmt.Errorf("disperse: %d chunks for %d bricks", len(chunks), c.g.N())
	}
	have := 0
	for _, ch := range chunks {
		if ch != nil {
			have++
		}
	}
	if have < c.g.K {
		return ErrTooFew
	}
	if dataOnly {
		return c.enc.ReconstructData(chunks)
	}
	return c.enc.Reconstruct(chunks)
}
