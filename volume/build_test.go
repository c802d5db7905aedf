package volume

import (
	"testing"
)

// A dispersed spec builds (one disperse layer per set, under distribute);
// the bricks need not be up.
func TestBuildDisperse(t *testing.T) {
	for _, n := range []int{6, 12} {
		bs := bricks(n)
		for i := range bs {
			bs[i].Addr = "127.0.0.1:1" // nothing listens: connections fail in the background
		}
		g, err := Build(Spec{Name: "ec", ID: "id", Type: Disperse, Bricks: bs, Disperse: 6, Redundancy: 2}, BuildOptions{})
		if err != nil {
			t.Fatalf("%d bricks: %v", n, err)
		}
		if g.Top == nil || len(g.closers) != n {
			t.Errorf("%d bricks: graph %+v", n, g)
		}
		g.Close()
	}
	if _, err := Build(Spec{Name: "ec", ID: "id", Type: Disperse, Bricks: bricks(6), Disperse: 6, Redundancy: 3}, BuildOptions{}); err == nil {
		t.Error("disperse 6 redundancy 3 built")
	}
}
