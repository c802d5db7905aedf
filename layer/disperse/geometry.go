// Package disperse is the erasure-coded volume type: Reed-Solomon K+M
// over the bricks of a disperse set (github.com/klauspost/reedsolomon,
// systematic), with a version and CRC-32C checksums in a header per
// fragment chunk (see Record), so that a corrupted or stale chunk is
// detected and never returned.
//
// # Layout
//
// A set has K data and M redundancy bricks. A file is cut into stripes of
// K chunks of Chunk bytes; stripe s holds file bytes [s·K·Chunk,
// (s+1)·K·Chunk). Brick i (0 ≤ i < K+M) stores, at offset s·Chunk of its
// fragment file (same path as the file), chunk i of stripe s: for i < K
// the file's own bytes (systematic code: healthy reads need no decoding),
// for i ≥ K parity. Any K of the K+M chunks of a stripe rebuild it.
//
// # Several clients
//
// Writes and truncates of a file hold a whole-file write lock on at least
// K of its bricks, in the bricks' internal lock domain (lock.go): two
// clients' read-modify-writes of a stripe never interleave, and a client
// that dies releases the lock with its connections. Reads take it only to
// read again a stripe they found unsettled (read.go).
package disperse

import (
	"fmt"
	"math/bits"
)

// MaxSet is the most bricks a disperse set may have: pending marks are
// 64-bit masks, and bit 63 is layer.Dirty.
const MaxSet = 63

// Chunk is the size of one brick's part of a stripe. 64 KiB keeps a 4+2
// stripe at 256 KiB, so that 1 MiB application writes cover whole stripes
// (no read-modify-write) and every fragment write is 4 KiB aligned for
// O_DIRECT on the brick.
const Chunk = 64 << 10

// Geometry is the shape of a disperse set.
type Geometry struct {
	K int // data bricks
	M int // redundancy bricks
}

// NewGeometry checks a set of n bricks with redundancy m, as in
// `disperse N redundancy M`. It refuses what cannot protect anything or
// cannot be decoded: m < 1, m ≥ n/2 (redundancy must stay below half the
// set, as in GlusterFS), n > MaxSet. warn is set when the data brick count is
// not a power of two (stripes then do not align with power-of-two I/O
// sizes, and most writes need a read-modify-write).
func NewGeometry(n, m int) (g Geometry, warn string, err error) {
	switch {
	case n < 3:
		return g, "", fmt.Errorf("a disperse set needs at least 3 bricks (got %d)", n)
	case n > MaxSet:
		return g, "", fmt.Errorf("a disperse set has at most %d bricks (got %d)", MaxSet, n)
	case m < 1:
		return g, "", fmt.Errorf("redundancy must be at least 1 (got %d)", m)
	case 2*m >= n:
		return g, "", fmt.Errorf("redundancy %d is not below half of %d bricks: use replica instead, or more bricks", m, n)
	}
	g = Geometry{K: n - m, M: m}
	if bits.OnesCount(uint(g.K)) != 1 {
		warn = fmt.Sprintf("%d data bricks is not a power of two: a %d KiB stripe does not align with "+
			"power-of-two I/O sizes, so most writes will need a read-modify-write", g.K, g.K*Chunk>>10)
	}
	return g, warn, nil
}

// N is the number of bricks in the set.
func (g Geometry) N() int { return g.K + g.M }

// Stripe is the number of file bytes in one stripe.
func (g Geometry) Stripe() int64 { return int64(g.K) * Chunk }

// Tears reports whether a write can reach too few bricks for either its
// version or the one before to be on K (more than M, fewer than K: 3 of
// 6 on 4 + 2, never on 2 + 1). Overwrites then ask the bricks to keep
// what they replace (layer.Txn.KeepUndo; unless Options.NoUndo), from
// which heal puts such a stripe back (undo.go).
func (g Geometry) Tears() bool { return g.K-g.M >= 2 }

// Overhead is the raw space used per byte stored (N/K).
func (g Geometry) Overhead() float64 { return float64(g.N()) / float64(g.K) }

// Span is the stripes a byte range touches: [First, Last], and whether the
// first and last are only partly covered (they then need a
// read-modify-write).
type Span struct {
	First, Last              int64
	PartialHead, PartialTail bool
}

// SpanOf returns the stripes that the n bytes at off touch (n > 0).
func (g Geometry) SpanOf(off, n int64) Span {
	s := g.Stripe()
	end := off + n
	sp := Span{First: off / s, Last: (end - 1) / s}
	sp.PartialHead = off%s != 0
	sp.PartialTail = end%s != 0
	if sp.First == sp.Last {
		sp.PartialHead = sp.PartialHead || sp.PartialTail
		sp.PartialTail = sp.PartialHead
	}
	return sp
}
