package disperse

import (
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/klauspost/reedsolomon"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sum is the checksum kept with every fragment chunk (CRC-32C).
func Sum(chunk []byte) uint32 { return crc32.Checksum(chunk, castagnoli) }

// ErrTooFew means fewer than K good chunks of a stripe are available: the
// stripe cannot be rebuilt (more than M bricks down or corrupt).
var ErrTooFew = errors.New("disperse: fewer than K good chunks")

// Codec encodes and rebuilds stripes of one geometry. It is safe for
// concurrent use.
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

// Encode cuts one stripe of file data (at most Stripe bytes; a short last
// stripe is padded with zeros) into N chunks of Chunk bytes — the K data
// chunks alias a copy of data, the M parity chunks are computed — and
// returns them with their checksums.
func (c *Codec) Encode(data []byte) (chunks [][]byte, sums []uint32, err error) {
	if int64(len(data)) > c.g.Stripe() {
		return nil, nil, fmt.Errorf("disperse: %d bytes do not fit a %d-byte stripe", len(data), c.g.Stripe())
	}
	buf := make([]byte, c.g.N()*Chunk)
	copy(buf, data)
	chunks = make([][]byte, c.g.N())
	for i := range chunks {
		chunks[i] = buf[i*Chunk : (i+1)*Chunk : (i+1)*Chunk]
	}
	if err := c.enc.Encode(chunks); err != nil {
		return nil, nil, err
	}
	sums = make([]uint32, len(chunks))
	for i, ch := range chunks {
		sums[i] = Sum(ch)
	}
	return chunks, sums, nil
}

// Decode returns the stripe's K·Chunk bytes of file data from the chunks
// read (nil for a brick that is down or did not answer), checking each
// against its checksum: a chunk whose checksum does not match is treated
// as missing and reported in bad, so that heal rewrites it. With the K
// data chunks good no decoding happens (systematic code). Fewer than K good
// chunks is ErrTooFew: never garbage.
func (c *Codec) Decode(chunks [][]byte, sums []uint32) (data []byte, bad []int, err error) {
	if len(chunks) != c.g.N() || len(sums) != c.g.N() {
		return nil, nil, fmt.Errorf("disperse: %d chunks and %d sums for %d bricks", len(chunks), len(sums), c.g.N())
	}
	shards := make([][]byte, len(chunks))
	good := 0
	for i, ch := range chunks {
		switch {
		case ch == nil:
		case len(ch) != Chunk || Sum(ch) != sums[i]:
			bad = append(bad, i)
		default:
			shards[i] = ch
			good++
		}
	}
	if good < c.g.K {
		return nil, bad, ErrTooFew
	}
	if err := c.enc.ReconstructData(shards); err != nil {
		return nil, bad, err
	}
	data = make([]byte, 0, c.g.Stripe())
	for _, sh := range shards[:c.g.K] {
		data = append(data, sh...)
	}
	return data, bad, nil
}

// Rebuild recomputes every missing or corrupt chunk of a stripe (for heal)
// and returns all N chunks with their checksums.
func (c *Codec) Rebuild(chunks [][]byte, sums []uint32) ([][]byte, []uint32, error) {
	data, _, err := c.Decode(chunks, sums)
	if err != nil {
		return nil, nil, err
	}
	return c.Encode(data)
}
