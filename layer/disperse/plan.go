package disperse

import "fmt"

// StripeWrite is the new content of one whole stripe.
type StripeWrite struct {
	Stripe int64 // stripe number
	// Data is the Stripe() bytes of file data (zero-padded past the end
	// of file). For a stripe the write covers whole, it aliases the
	// written bytes.
	Data []byte
}

// ReadStripe returns the current file data of stripe s (Stripe() bytes,
// zeros past the end of file). The disperse layer reads it from any K
// good bricks, or from its stripe cache.
type ReadStripe func(s int64) ([]byte, error)

// PlanWrite turns a write of data at off into whole-stripe writes: the
// stripes the write covers fully are cut from data; a stripe it covers
// only in part (at most the first and the last) is read with read and
// patched, so every brick always receives a whole chunk and the parity
// always matches. size is the file size before the write; stripes wholly
// past it are not read (they are zeros). It returns the new file size.
func (g Geometry) PlanWrite(off int64, data []byte, size int64, read ReadStripe) ([]StripeWrite, int64, error) {
	if off < 0 {
		return nil, size, fmt.Errorf("disperse: negative offset %d", off)
	}
	if len(data) == 0 {
		return nil, size, nil
	}
	ss := g.Stripe()
	sp := g.SpanOf(off, int64(len(data)))
	out := make([]StripeWrite, 0, sp.Last-sp.First+1)
	for s := sp.First; s <= sp.Last; s++ {
		start := s * ss
		lo := max(off, start)                     // first file byte of the write in this stripe
		hi := min(off+int64(len(data)), start+ss) // one past the last
		var buf []byte
		if lo == start && hi == start+ss {
			out = append(out, StripeWrite{Stripe: s, Data: data[lo-off : hi-off : hi-off]})
			continue
		} else if start >= size {
			buf = make([]byte, ss) // wholly past the end: zeros, no read
		} else {
			cur, err := read(s)
			if err != nil {
				return nil, size, fmt.Errorf("disperse: read stripe %d for a partial write: %w", s, err)
			}
			if int64(len(cur)) != ss {
				return nil, size, fmt.Errorf("disperse: stripe %d read as %d bytes, want %d", s, len(cur), ss)
			}
			buf = append([]byte(nil), cur...)
		}
		copy(buf[lo-start:hi-start], data[lo-off:hi-off])
		out = append(out, StripeWrite{Stripe: s, Data: buf})
	}
	return out, max(size, off+int64(len(data))), nil
}

// PlanTruncate returns what a truncate to newSize writes: if newSize cuts
// a stripe in the middle and the file had data past that point, that
// stripe with its tail zeroed (so that a later extension reads zeros, as
// POSIX wants, and the parity matches). The fragment files are then cut to
// FragmentLen(newSize).
func (g Geometry) PlanTruncate(newSize, size int64, read ReadStripe) ([]StripeWrite, error) {
	if newSize < 0 {
		return nil, fmt.Errorf("disperse: negative size %d", newSize)
	}
	ss := g.Stripe()
	if newSize >= size || newSize%ss == 0 {
		return nil, nil
	}
	s := newSize / ss
	cur, err := read(s)
	if err != nil {
		return nil, fmt.Errorf("disperse: read stripe %d for a truncate: %w", s, err)
	}
	if int64(len(cur)) != ss {
		return nil, fmt.Errorf("disperse: stripe %d read as %d bytes, want %d", s, len(cur), ss)
	}
	buf := append([]byte(nil), cur...)
	clear(buf[newSize-s*ss:])
	return []StripeWrite{{Stripe: s, Data: buf}}, nil
}
