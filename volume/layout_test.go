package volume

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func ids(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("b%d", i))
	}
	return out
}

// hashes returns n random hashes plus the edges of the space, fixed seed.
func hashes(n int) []uint32 {
	r := rand.New(rand.NewPCG(1, 2))
	out := []uint32{0, 1, math.MaxUint32, math.MaxUint32 - 1}
	for range n {
		out = append(out, r.Uint32())
	}
	return out
}

// TestEvenLayoutIsTheOldPlacement pins EvenLayout to the placement every
// volume had before layouts were stored: n equal ranges, the last one
// absorbing the remainder.
func TestEvenLayoutIsTheOldPlacement(t *testing.T) {
	for n := 1; n <= 8; n++ {
		l := EvenLayout(ids(n))
		if err := l.Validate(ids(n)); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		size := uint64(1<<32) / uint64(n)
		for _, h := range hashes(20000) {
			old := min(int(uint64(h)/size), n-1)
			if got := l.Owner(h); got != ids(n)[old] {
				t.Fatalf("n=%d hash %#x: owner %s, was %s", n, h, got, ids(n)[old])
			}
		}
	}
}

func TestWithMovesOnlyToTheNewChild(t *testing.T) {
	hs := hashes(100000)
	for n := 1; n <= 6; n++ {
		old := EvenLayout(ids(n))
		// Twice, so that the second add works on an uneven layout.
		for _, add := range []string{"new1", "new2"} {
			nl := old.With(add)
			if err := nl.Validate(append(ids(n), "new1", "new2")); err != nil {
				t.Fatalf("n=%d +%s: %v", n, add, err)
			}
			k := len(old.Children())
			moved := 0
			for _, h := range hs {
				a, b := old.Owner(h), nl.Owner(h)
				if a != b {
					moved++
					if b != add {
						t.Fatalf("n=%d +%s: hash %#x moved %s -> %s", n, add, h, a, b)
					}
				}
			}
			frac, want := float64(moved)/float64(len(hs)), 1/float64(k+1)
			if math.Abs(frac-want) > 0.01 {
				t.Errorf("n=%d +%s: moved %.4f of the names, want about %.4f", n, add, frac, want)
			}
			if s := nl.Share(add); math.Abs(s-want) > 1e-6 {
				t.Errorf("n=%d +%s: new child's share %.6f, want %.6f", n, add, s, want)
			}
			old = nl
		}
	}
	if l := EvenLayout(ids(3)); len(l.With("b1").Ranges) != 3 {
		t.Error("adding a child already there changed the layout")
	}
}

func TestWithoutMovesOnlyTheLeavingChild(t *testing.T) {
	hs := hashes(100000)
	for n := 2; n <= 6; n++ {
		for _, old := range []Layout{EvenLayout(ids(n)), EvenLayout(ids(n)).With("x")} {
			gone := old.Children()[1]
			nl := old.Without(gone)
			if err := nl.Validate(old.Children()); err != nil {
				t.Fatalf("n=%d -%s: %v", n, gone, err)
			}
			for _, c := range nl.Children() {
				if c == gone {
					t.Fatalf("n=%d: %s still owns a range", n, gone)
				}
			}
			got := map[string]int{}
			for _, h := range hs {
				a, b := old.Owner(h), nl.Owner(h)
				if a != b && a != gone {
					t.Fatalf("n=%d -%s: hash %#x moved %s -> %s", n, gone, h, a, b)
				}
				if a == gone {
					got[b]++
				}
			}
			// The leaving child's names spread over all the others.
			if len(got) != len(old.Children())-1 {
				t.Errorf("n=%d -%s: its names went to %v only", n, gone, got)
			}
		}
	}
	l := EvenLayout(ids(1))
	if nl := l.Without("b0"); len(nl.Ranges) != 1 {
		t.Error("removing the last child changed the layout")
	}
}

func TestLayoutValidate(t *testing.T) {
	known := ids(3)
	bad := map[string]Layout{
		"no ranges":    {},
		"hole at 0":    {Ranges: []Range{{Start: 5, Child: "b0"}}},
		"overlap":      {Ranges: []Range{{0, "b0"}, {100, "b1"}, {100, "b2"}}},
		"out of order": {Ranges: []Range{{0, "b0"}, {100, "b1"}, {50, "b2"}}},
		"unknown":      {Ranges: []Range{{0, "b0"}, {100, "zz"}}},
		"no child":     {Ranges: []Range{{0, ""}}},
	}
	for name, l := range bad {
		if err := l.Validate(known); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := (Layout{Ranges: []Range{{0, "b2"}, {7, "b0"}}}).Validate(known); err != nil {
		t.Errorf("good layout refused: %v", err)
	}
}

func TestSpecLayouts(t *testing.T) {
	s := Spec{Name: "v", ID: "id", Type: Distribute, Bricks: []Brick{{ID: "a"}, {ID: "b"}, {ID: "c"}}}
	if got := s.CurrentLayout(); len(got.Ranges) != 3 || got.Ranges[2].Child != "c" {
		t.Fatalf("current layout without one: %+v", got)
	}
	two := EvenLayout([]string{"a", "b"})
	three := two.With("c")
	s.Layout, s.Previous = &three, &two
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	bogus := EvenLayout([]string{"a", "zz"})
	s.Previous = &bogus
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "previous") {
		t.Fatalf("previous layout with an unknown set: %v", err)
	}
}
