package disperse

import (
	"bytes"
	"math/rand"
	"testing"
)

// stripeStore keeps a file as whole stripes, the way the bricks will, and
// counts stripe reads.
type stripeStore struct {
	g       Geometry
	stripes map[int64][]byte
	size    int64
	reads   int
}

func (st *stripeStore) read(s int64) ([]byte, error) {
	st.reads++
	if b, ok := st.stripes[s]; ok {
		return b, nil
	}
	return make([]byte, st.g.Stripe()), nil
}

func (st *stripeStore) apply(ws []StripeWrite) {
	for _, w := range ws {
		st.stripes[w.Stripe] = append([]byte(nil), w.Data...) // Data may alias the write's bytes
	}
}

// contents returns the file as the stripes say, cut to size.
func (st *stripeStore) contents() []byte {
	out := make([]byte, 0, st.size)
	for s := int64(0); int64(len(out)) < st.size; s++ {
		b, _ := st.read(s)
		out = append(out, b...)
	}
	return out[:st.size]
}

// Random writes and truncates of random sizes at random offsets, planned
// into whole stripes, always give the same file as a plain byte slice.
func TestPlanAgainstModel(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for _, g := range []Geometry{{K: 2, M: 1}, {K: 4, M: 2}, {K: 5, M: 2}} {
		st := &stripeStore{g: g, stripes: map[int64][]byte{}}
		var model []byte
		for step := 0; step < 400; step++ {
			if r.Intn(6) == 0 {
				n := int64(r.Intn(int(3*g.Stripe()) + 1))
				ws, err := g.PlanTruncate(n, st.size, st.read)
				if err != nil {
					t.Fatal(err)
				}
				st.apply(ws)
				for s := range st.stripes {
					if s*g.Stripe() >= n {
						delete(st.stripes, s) // the fragments are cut
					}
				}
				st.size = n
				if n <= int64(len(model)) {
					model = model[:n]
				} else {
					model = append(model, make([]byte, n-int64(len(model)))...)
				}
			} else {
				off := int64(r.Intn(int(4 * g.Stripe())))
				data := make([]byte, r.Intn(int(2*g.Stripe()))+1)
				r.Read(data)
				ws, size, err := g.PlanWrite(off, data, st.size, st.read)
				if err != nil {
					t.Fatal(err)
				}
				st.apply(ws)
				st.size = size
				if end := off + int64(len(data)); end > int64(len(model)) {
					model = append(model, make([]byte, end-int64(len(model)))...)
				}
				copy(model[off:], data)
			}
			if got := st.contents(); !bytes.Equal(got, model) {
				t.Fatalf("%d+%d step %d: file differs from the model (size %d vs %d)", g.K, g.M, step, len(got), len(model))
			}
		}
	}
}

// Whole-stripe writes never read; a partial write reads only the stripes it
// covers in part, and nothing past the end of file.
func TestPlanReadsOnlyPartialStripes(t *testing.T) {
	g := Geometry{K: 4, M: 2}
	ss := g.Stripe()
	st := &stripeStore{g: g, stripes: map[int64][]byte{}}
	ws, _, _ := g.PlanWrite(0, make([]byte, 4*ss), 0, st.read)
	if st.reads != 0 || len(ws) != 4 {
		t.Fatalf("aligned 4-stripe write: %d reads, %d stripes", st.reads, len(ws))
	}
	ws, _, _ = g.PlanWrite(ss/2, make([]byte, 2*ss), 4*ss, st.read)
	if st.reads != 2 || len(ws) != 3 {
		t.Fatalf("unaligned write over 3 stripes: %d reads (want 2), %d stripes", st.reads, len(ws))
	}
	st.reads = 0
	g.PlanWrite(10*ss+5, []byte("x"), 4*ss, st.read)
	if st.reads != 0 {
		t.Fatalf("a write past the end of file read %d stripes", st.reads)
	}
}
