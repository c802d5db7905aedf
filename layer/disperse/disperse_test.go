package disperse

import (
	"bytes"
	"errors"
	"math/rand"
	"strings"
	"testing"
)

func TestNewGeometry(t *testing.T) {
	for _, tc := range []struct {
		n, m    int
		k       int
		warn    bool
		errPart string
	}{
		{n: 6, m: 2, k: 4},
		{n: 3, m: 1, k: 2},
		{n: 5, m: 1, k: 4},
		{n: 7, m: 2, k: 5, warn: true},
		{n: 6, m: 3, errPart: "not below half"},
		{n: 4, m: 2, errPart: "not below half"},
		{n: 6, m: 0, errPart: "at least 1"},
		{n: 2, m: 1, errPart: "at least 3 bricks"},
		{n: 64, m: 4, errPart: "at most 63"},
	} {
		g, warn, err := NewGeometry(tc.n, tc.m)
		if tc.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errPart) {
				t.Errorf("%d/%d: err %v, want %q", tc.n, tc.m, err, tc.errPart)
			}
			continue
		}
		if err != nil || g.K != tc.k || (warn != "") != tc.warn {
			t.Errorf("%d/%d: %+v warn %q err %v", tc.n, tc.m, g, warn, err)
		}
	}
	g, _, _ := NewGeometry(6, 2)
	if g.Overhead() != 1.5 || g.Stripe() != 4*Chunk || g.FragmentLen(1) != HeaderSize+Block || g.FragmentLen(g.Stripe()+1) != Record+HeaderSize+Block || g.FragmentLen(0) != 0 || g.FragmentLen(g.Stripe()) != Record {
		t.Errorf("4+2 sizes: overhead %v stripe %d", g.Overhead(), g.Stripe())
	}
}

func TestSpanOf(t *testing.T) {
	g := Geometry{K: 4, M: 2}
	s := g.Stripe()
	for _, tc := range []struct {
		off, n int64
		want   Span
	}{
		{0, s, Span{0, 0, false, false}},
		{0, 4 * s, Span{0, 3, false, false}},
		{1, 10, Span{0, 0, true, true}},
		{s - 1, 2, Span{0, 1, true, true}},
		{s, 2*s + 5, Span{1, 3, false, true}},
		{5, 2*s - 5, Span{0, 1, true, false}},
	} {
		if got := g.SpanOf(tc.off, tc.n); got != tc.want {
			t.Errorf("SpanOf(%d, %d) = %+v, want %+v", tc.off, tc.n, got, tc.want)
		}
	}
}

// Any K of the N chunks of a record rebuild the stripe; corrupt chunks
// fail their block checksums and are never used; fewer than K good chunks
// is ErrTooFew, never garbage; a short last record reads back as zeros.
func TestRecordsProperties(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, geo := range []Geometry{{K: 2, M: 1}, {K: 4, M: 2}, {K: 8, M: 3}} {
		c, err := NewCodec(geo)
		if err != nil {
			t.Fatal(err)
		}
		d := &Disperse{g: geo, codec: c}
		for round := 0; round < 30; round++ {
			size := r.Int63n(geo.Stripe()) + 1 // a one-stripe file
			data := make([]byte, geo.Stripe())
			r.Read(data[:size])
			bufs, err := d.records([]StripeWrite{{Stripe: 0, Data: data}}, size)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(bufs[0])) != geo.FragmentLen(size) {
				t.Fatalf("record of %d bytes for a %d-byte file, want %d", len(bufs[0]), size, geo.FragmentLen(size))
			}
			// Lose up to M chunks, corrupt up to M-lost others.
			perm := r.Perm(geo.N())
			lost := r.Intn(geo.M + 1)
			corrupt := r.Intn(geo.M - lost + 1)
			sc := stripeChunks{headers: make([]Header, geo.N()), chunks: make([][]byte, geo.N())}
			bad := 0
			for i := range bufs {
				rec := make([]byte, Record)
				copy(rec, bufs[i])
				for _, j := range perm[lost : lost+corrupt] {
					if j == i {
						rec[HeaderSize+r.Intn(len(bufs[i])-HeaderSize)] ^= 0xff
					}
				}
				h, err := parseHeader(rec[:HeaderSize])
				if err != nil || h.Stripe != 0 || int(h.Index) != i {
					t.Fatalf("header %d: %+v %v", i, h, err)
				}
				if !h.check(rec[HeaderSize:], 0, blocks) {
					bad++
					continue
				}
				sc.headers[i], sc.chunks[i] = h, rec[HeaderSize:]
			}
			for _, i := range perm[:lost] {
				sc.chunks[i] = nil
			}
			if bad != corrupt {
				t.Fatalf("%d chunks fail their checksums, want %d", bad, corrupt)
			}
			if _, err := current(d.g, &sc); err != nil {
				t.Fatal(err)
			}
			all := append([][]byte(nil), sc.chunks...)
			if err := c.Rebuild(sc.chunks, true); err != nil {
				t.Fatal(err)
			}
			if got := bytes.Join(sc.chunks[:geo.K], nil); !bytes.Equal(got, data) {
				t.Fatalf("%d+%d lost %d corrupt %d: stripe differs", geo.K, geo.M, lost, corrupt)
			}
			if err := c.Rebuild(all, false); err != nil {
				t.Fatal(err)
			}
			for i := range all {
				want := make([]byte, Chunk)
				copy(want, bufs[i][HeaderSize:])
				if !bytes.Equal(all[i], want) {
					t.Fatalf("%d+%d: rebuilt chunk %d differs", geo.K, geo.M, i)
				}
			}
			// One more loss than the code can take.
			for _, i := range perm[:geo.M+1] {
				sc.chunks[i] = nil
			}
			if err := c.Rebuild(sc.chunks, true); !errors.Is(err, ErrTooFew) {
				t.Fatalf("%d+%d with %d chunks gone: %v, want ErrTooFew", geo.K, geo.M, geo.M+1, err)
			}
		}
	}
}

// Chunks of two different writes never mix: the version K bricks share
// wins, and without one the stripe is ErrTooFew.
func TestCurrentVersion(t *testing.T) {
	geo := Geometry{K: 4, M: 2}
	mk := func(versions ...uint64) stripeChunks {
		sc := stripeChunks{headers: make([]Header, 6), chunks: make([][]byte, 6)}
		for i, v := range versions {
			sc.headers[i].Version, sc.chunks[i] = v, []byte{byte(v)}
		}
		return sc
	}
	d := &Disperse{g: geo}
	sc := mk(7, 7, 9, 7, 9, 7)
	if v, err := current(d.g, &sc); err != nil || v != 7 || sc.chunks[2] != nil || sc.chunks[4] != nil {
		t.Fatalf("got %d %v %v", v, err, sc.chunks)
	}
	sc = mk(7, 7, 9, 7, 9, 9)
	if _, err := current(d.g, &sc); !errors.Is(err, ErrTooFew) {
		t.Fatalf("3 against 3: %v, want ErrTooFew", err)
	}
}

func BenchmarkEncode42(b *testing.B) {
	geo := Geometry{K: 4, M: 2}
	c, _ := NewCodec(geo)
	d := &Disperse{g: geo, codec: c}
	data := make([]byte, 4*geo.Stripe())
	ws := make([]StripeWrite, 4)
	for i := range ws {
		ws[i] = StripeWrite{Stripe: int64(i), Data: data[int64(i)*geo.Stripe() : int64(i+1)*geo.Stripe()]}
	}
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		bufs, _ := d.records(ws, int64(len(data)))
		putBufs(bufs)
	}
}
