package volume

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"
)

// FuzzSpec unmarshals arbitrary JSON into a Spec. Nothing may panic; a
// spec that validates has consistent sets (every brick in exactly one set
// of SetSize bricks, distinct non-empty set ids), its current layout is
// valid over those sets, and it survives a JSON round trip unchanged.
func FuzzSpec(f *testing.F) {
	for _, s := range []Spec{
		{Name: "gv0", ID: "id", Type: Distribute, Bricks: bricks(3), Options: map[string]string{"a": "1.5"}, Version: 4},
		{Name: "r", ID: "id", Type: Replicate, Replica: 3, Bricks: append(bricks(5), Brick{ID: "a", Host: "h", Path: "/a", Arbiter: true})},
		{Name: "ec", ID: "id", Type: Disperse, Disperse: 6, Redundancy: 2, Bricks: bricks(12)},
		{Name: "l", ID: "id", Type: Distribute, Bricks: bricks(3),
			Layout:   &Layout{Ranges: []Range{{0, "b1"}, {1 << 30, "b3"}, {3 << 30, "b2"}}},
			Previous: &Layout{Ranges: []Range{{0, "b1"}, {1 << 31, "b2"}}}},
	} {
		b, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"name":"x","id":"y","type":"disperse","disperse":0,"bricks":[{"id":"a"}]}`))
	f.Add([]byte(`{"name":"x","id":"y","type":"replicate","replica":-1,"bricks":[{"id":"a"}]}`))
	f.Add([]byte(`{"name":"x","id":"y","type":"distribute","bricks":[{"id":"a"},{"id":"a"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Spec
		if json.Unmarshal(data, &s) != nil {
			return
		}
		err := s.Validate()
		// None of these may panic, valid or not.
		sets, ids, cur := s.Sets(), s.SetIDs(), s.CurrentLayout()
		s.DurationOption("x", time.Second)
		for _, l := range []*Layout{s.Layout, s.Previous, &cur} {
			if l != nil {
				l.Validate(ids)
				l.Children()
				l.Owner(math.MaxUint32)
			}
		}
		if err != nil {
			return
		}
		n := s.SetSize()
		if len(sets)*n != len(s.Bricks) || len(ids) != len(sets) {
			t.Fatalf("%d bricks make %d sets of %d", len(s.Bricks), len(sets), n)
		}
		for i, set := range sets {
			if len(set) != n || !reflect.DeepEqual(set, s.Bricks[i*n:(i+1)*n]) || ids[i] != set[0].ID {
				t.Fatalf("set %d is not bricks %d..%d", i, i*n, (i+1)*n)
			}
		}
		for i, id := range ids {
			if id == "" || slices.Index(ids, id) != i {
				t.Fatalf("set ids %q are not distinct and non-empty", ids)
			}
		}
		if err := cur.Validate(ids); err != nil {
			t.Fatalf("valid spec, invalid current layout: %v", err)
		}
		for _, c := range cur.Children() {
			if !slices.Contains(ids, c) {
				t.Fatalf("current layout names %q, not a set", c)
			}
		}
		b, err := json.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		var back Spec
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if len(s.Options) == 0 {
			s.Options = nil
		}
		if !reflect.DeepEqual(back, s) || back.Validate() != nil {
			t.Fatalf("JSON round trip changed the spec:\n%+v\n%+v", s, back)
		}
	})
}

// layoutOf decodes a fuzzer's bytes as a layout: five bytes a range, a
// little-endian start and a child number (children c0..c7; 255 is "").
func layoutOf(data []byte) Layout {
	var l Layout
	for ; len(data) >= 5; data = data[5:] {
		child := ""
		if data[4] != 255 {
			child = "c" + string(rune('0'+data[4]%8))
		}
		l.Ranges = append(l.Ranges, Range{Start: binary.LittleEndian.Uint32(data), Child: child})
	}
	return l
}

func layoutBytes(l Layout) []byte {
	var b []byte
	for _, r := range l.Ranges {
		b = binary.LittleEndian.AppendUint32(b, r.Start)
		b = append(b, r.Child[1]-'0')
	}
	return b
}

// FuzzLayout checks Validate, Owner, Share, With and Without on arbitrary
// layouts: nothing panics; from a valid layout, With and Without give a
// valid layout; With(id) moves names only to id and Without(c) moves only
// c's names, to the other children; the shares add up to the whole.
func FuzzLayout(f *testing.F) {
	f.Add(layoutBytes(EvenLayout([]string{"c0", "c1", "c2"})), "c3", uint32(12345))
	f.Add(layoutBytes(EvenLayout([]string{"c0"})), "c1", uint32(0))
	f.Add(layoutBytes(EvenLayout([]string{"c0", "c1"}).With("c2").Without("c0")), "c0", uint32(math.MaxUint32))
	f.Add(layoutBytes(Layout{Ranges: []Range{{0, "c0"}, {1, "c1"}, {2, "c0"}, {math.MaxUint32, "c2"}}}), "c4", uint32(1))
	f.Add([]byte{0, 0, 0, 0, 255}, "", uint32(7))
	f.Fuzz(checkLayout)
}

func checkLayout(t *testing.T, data []byte, id string, h uint32) {
	l := layoutOf(data)
	err := l.Validate(nil)
	l.Owner(h)
	l.Children()
	for _, c := range l.Children() {
		l.Share(c)
	}
	if id == "" {
		id = "new"
	}
	with := l.With(id)
	without := l.Without(id)
	if err != nil {
		return
	}
	// The hashes worth checking: h and both ends of every range.
	probe := []uint32{h, 0, math.MaxUint32}
	for _, r := range l.Ranges {
		probe = append(probe, r.Start, r.Start-1)
	}
	checkShares(t, l)

	if err := with.Validate(nil); err != nil {
		t.Fatalf("With(%q) of a valid layout: %v", id, err)
	}
	checkShares(t, with)
	had := slices.Contains(l.Children(), id)
	for _, p := range probe {
		before, after := l.Owner(p), with.Owner(p)
		if had && after != before || !had && after != before && after != id {
			t.Fatalf("With(%q) moved hash %#x from %s to %s", id, p, before, after)
		}
	}
	for _, c := range l.Children() {
		if !slices.Contains(with.Children(), c) {
			t.Fatalf("With(%q) dropped child %s", id, c)
		}
	}

	if err := without.Validate(nil); err != nil {
		t.Fatalf("Without(%q) of a valid layout: %v", id, err)
	}
	for _, c := range l.Children() {
		out := l.Without(c)
		if err := out.Validate(nil); err != nil {
			t.Fatalf("Without(%q) of a valid layout: %v", c, err)
		}
		checkShares(t, out)
		only := len(l.Children()) == 1
		for _, p := range probe {
			before, after := l.Owner(p), out.Owner(p)
			switch {
			case only && after != before:
				t.Fatalf("Without(%q), the last child, moved hash %#x", c, p)
			case !only && before != c && after != before:
				t.Fatalf("Without(%q) moved hash %#x of %s to %s", c, p, before, after)
			case !only && after == c:
				t.Fatalf("Without(%q) left it hash %#x", c, p)
			}
		}
	}
}

func checkShares(t *testing.T, l Layout) {
	t.Helper()
	sum := 0.0
	for _, c := range l.Children() {
		sum += l.Share(c)
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Fatalf("shares of %v add up to %v", l.Ranges, sum)
	}
}
