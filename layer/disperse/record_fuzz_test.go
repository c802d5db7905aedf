package disperse

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// sampleHeader is a header with every field set.
func sampleHeader(version uint64, stripe int64, seed uint32) Header {
	h := Header{Version: version, Stripe: stripe, K: 4, M: 2, Index: 5}
	for i := range h.Sums {
		h.Sums[i] = seed * uint32(i+1)
	}
	return h
}

// FuzzParseHeader feeds arbitrary bytes to the fragment record header
// parser, which reads what bricks hand back. It must never panic; a
// short header is an error; an all-zero one is a hole; anything else it
// accepts re-encodes to the same bytes; and a single changed byte of a
// good header is caught.
func FuzzParseHeader(f *testing.F) {
	b := make([]byte, HeaderSize)
	for _, h := range []Header{sampleHeader(1, 0, 7), sampleHeader(1<<63, 1<<40, 0xdeadbeef), {}} {
		h.put(b)
		f.Add(append([]byte(nil), b...), 0, byte(1))
	}
	f.Add(make([]byte, HeaderSize), 3, byte(0xff))
	f.Add(make([]byte, headerLen-1), 0, byte(1))
	f.Add([]byte("MORTARF1"), 8, byte(2))
	f.Fuzz(func(t *testing.T, b []byte, pos int, flip byte) {
		h, err := parseHeader(b)
		if len(b) < headerLen {
			if err == nil {
				t.Fatalf("a %d-byte header parsed", len(b))
			}
			return
		}
		chunk := make([]byte, Chunk)
		if err == nil {
			h.check(chunk, 0, blocks) // must not panic
			switch {
			case allZero(b[:headerLen]):
				if h != (Header{}) {
					t.Fatalf("an all-zero header parsed as %+v", h)
				}
			default:
				back := make([]byte, HeaderSize)
				h.put(back)
				if !bytes.Equal(back[:headerLen], b[:headerLen]) {
					t.Fatalf("header %+v re-encodes differently", h)
				}
			}
		}
		// A good header with one byte changed must be refused.
		good := make([]byte, HeaderSize)
		h = Header{Version: binary.LittleEndian.Uint64(append(b[:8:8], 0, 0, 0, 0, 0, 0, 0, 0)) | 1, Stripe: int64(len(b)), K: b[0], M: b[1], Index: b[2]}
		h.put(good)
		if pos < 0 {
			pos = -(pos + 1)
		}
		if flip == 0 {
			flip = 1
		}
		good[pos%headerLen] ^= flip
		if _, err := parseHeader(good); err == nil {
			t.Fatalf("byte %d changed by %#x went unnoticed", pos%headerLen, flip)
		}
	})
}

// FuzzHeaderRoundTrip encodes headers made of arbitrary fields: parsing
// gives them back.
func FuzzHeaderRoundTrip(f *testing.F) {
	f.Add(uint64(1), int64(0), uint8(4), uint8(2), uint8(5), uint32(7))
	f.Add(uint64(0), int64(-1), uint8(0), uint8(0), uint8(0), uint32(0))
	f.Fuzz(func(t *testing.T, version uint64, stripe int64, k, m, index uint8, seed uint32) {
		h := sampleHeader(version, stripe, seed)
		h.K, h.M, h.Index = k, m, index
		b := make([]byte, HeaderSize)
		h.put(b)
		got, err := parseHeader(b)
		if err != nil || got != h {
			t.Fatalf("put then parse of %+v: %+v, %v", h, got, err)
		}
	})
}
