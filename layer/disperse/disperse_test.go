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
		{n: 300, m: 4, errPart: "at most 256"},
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
	if g.Overhead() != 1.5 || g.Stripe() != 4*Chunk || g.FragmentSize(1) != Chunk || g.FragmentSize(g.Stripe()+1) != 2*Chunk || g.FragmentSize(0) != 0 {
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

// Any K of the N chunks rebuild the stripe; corrupt chunks are detected and
// never used; fewer than K good chunks is ErrTooFew, never garbage.
func TestCodecProperties(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, geo := range []Geometry{{K: 2, M: 1}, {K: 4, M: 2}, {K: 8, M: 3}} {
		c, err := NewCodec(geo)
		if err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 30; round++ {
			data := make([]byte, r.Int63n(geo.Stripe())+1)
			r.Read(data)
			chunks, sums, err := c.Encode(data)
			if err != nil {
				t.Fatal(err)
			}
			want := append(append([]byte(nil), data...), make([]byte, int(geo.Stripe())-len(data))...)
			// Lose up to M chunks, corrupt up to M-lost others.
			perm := r.Perm(geo.N())
			lost := r.Intn(geo.M + 1)
			corrupt := r.Intn(geo.M - lost + 1)
			got := make([][]byte, geo.N())
			for i := range got {
				got[i] = append([]byte(nil), chunks[i]...)
			}
			for _, i := range perm[:lost] {
				got[i] = nil
			}
			for _, i := range perm[lost : lost+corrupt] {
				got[i][r.Intn(Chunk)] ^= 0xff
			}
			out, bad, err := c.Decode(got, sums)
			if err != nil || !bytes.Equal(out, want) || len(bad) != corrupt {
				t.Fatalf("%d+%d lost %d corrupt %d: err %v, equal %v, bad %v", geo.K, geo.M, lost, corrupt, err, bytes.Equal(out, want), bad)
			}
			rebuilt, rsums, err := c.Rebuild(got, sums)
			if err != nil {
				t.Fatal(err)
			}
			for i := range rebuilt {
				if !bytes.Equal(rebuilt[i], chunks[i]) || rsums[i] != sums[i] {
					t.Fatalf("%d+%d: rebuilt chunk %d differs", geo.K, geo.M, i)
				}
			}
			// One more loss than the code can take.
			for _, i := range perm[:geo.M+1] {
				got[i] = nil
			}
			if _, _, err := c.Decode(got, sums); !errors.Is(err, ErrTooFew) {
				t.Fatalf("%d+%d with %d chunks gone: %v, want ErrTooFew", geo.K, geo.M, geo.M+1, err)
			}
		}
	}
}

func BenchmarkEncode42(b *testing.B) {
	c, _ := NewCodec(Geometry{K: 4, M: 2})
	data := make([]byte, 4*Chunk)
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		c.Encode(data)
	}
}
