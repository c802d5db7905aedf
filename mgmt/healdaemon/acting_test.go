package healdaemon

import (
	"context"
	"slices"
	"testing"

	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume"
)

// replica3x3 is a volume of three replica sets of three bricks: set 0 on
// n1 n2 n3, set 1 on n2 n3 n1, set 2 on n2 n3 n4 (none on n1).
func replica3x3() *state.Volume {
	v := &state.Volume{Name: "v", ID: "v1", Type: volume.Replicate, Replica: 3}
	for i, node := range []string{"n1", "n2", "n3", "n2", "n3", "n1", "n2", "n3", "n4"} {
		v.Bricks = append(v.Bricks, state.Brick{ID: "b" + string(rune('0'+i)), Node: node, Host: node, Path: "/b"})
	}
	return v
}

// A set is healed by the first node in its brick order that answers;
// the nodes of a set this node serves no brick of are not asked, and no
// node is asked twice.
func TestActingSetsTheFirstNodeThatAnswers(t *testing.T) {
	v := replica3x3()
	spec := state.LayoutSpec(v)
	for _, c := range []struct {
		down []string
		want []bool
	}{
		{nil, []bool{true, false, false}},
		{[]string{"n2"}, []bool{true, false, false}}, // set 1: n3 next
		{[]string{"n2", "n3"}, []bool{true, true, false}},
		{[]string{"n4", "n2", "n3"}, []bool{true, true, false}}, // set 2 is not n1's
	} {
		var asked []string
		answers := func(_ context.Context, id string) bool {
			asked = append(asked, id)
			return !slices.Contains(c.down, id)
		}
		got := actingSets(context.Background(), "n1", v, spec, answers)
		if !slices.Equal(got, c.want) {
			t.Errorf("down %v: acting %v, want %v", c.down, got, c.want)
		}
		if slices.Contains(asked, "n1") || slices.Contains(asked, "n4") {
			t.Errorf("down %v: asked %v (n1 is this node; n4 serves only a set n1 does not heal)", c.down, asked)
		}
		if s := slices.Clone(asked); len(slices.Compact(sortedCopy(s))) != len(asked) {
			t.Errorf("down %v: a node asked twice: %v", c.down, asked)
		}
	}
}

func sortedCopy(s []string) []string {
	slices.Sort(s)
	return s
}
