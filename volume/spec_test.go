package volume

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSpecOptions(t *testing.T) {
	s := Spec{Options: map[string]string{"a": "1.5", "b": "250ms", "c": "soon"}}
	for key, want := range map[string]time.Duration{"a": 1500 * time.Millisecond, "b": 250 * time.Millisecond, "c": 7 * time.Second, "missing": 7 * time.Second} {
		if got := s.DurationOption(key, 7*time.Second); got != want {
			t.Errorf("DurationOption(%s) = %v, want %v", key, got, want)
		}
	}
	if s.Option("a", "x") != "1.5" || s.Option("z", "x") != "x" {
		t.Error("Option")
	}
}

func TestSpecValidate(t *testing.T) {
	ok := Spec{Name: "gv0", ID: "id", Type: Distribute, Bricks: []Brick{{ID: "b", Host: "h", Path: "/p", Addr: "h:1"}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Spec){
		"no name":   func(s *Spec) { s.Name = "" },
		"replicate": func(s *Spec) { s.Type = "replicate" },
		"no bricks": func(s *Spec) { s.Bricks = nil },
	} {
		s := ok
		mutate(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if got := ok.Bricks[0].Name(); got != "h:/p" {
		t.Errorf("brick name %q", got)
	}
}

// bricks returns n bricks b1..bn.
func bricks(n int) []Brick {
	var out []Brick
	for i := 1; i <= n; i++ {
		id := "b" + strconv.Itoa(i)
		out = append(out, Brick{ID: id, Host: "h", Path: "/" + id, Addr: "h:" + strconv.Itoa(i)})
	}
	return out
}

func TestSpecDisperse(t *testing.T) {
	for _, tc := range []struct {
		n, disperse, redundancy, sets int
	}{
		{6, 6, 2, 1}, {12, 6, 2, 2}, {3, 3, 1, 1}, {7, 7, 2, 1}, {63, 63, 31, 1},
	} {
		s := Spec{Name: "ec", ID: "id", Type: Disperse, Bricks: bricks(tc.n), Disperse: tc.disperse, Redundancy: tc.redundancy}
		if err := s.Validate(); err != nil {
			t.Errorf("%d bricks disperse %d redundancy %d: %v", tc.n, tc.disperse, tc.redundancy, err)
			continue
		}
		sets := s.Sets()
		if len(sets) != tc.sets || s.SetSize() != tc.disperse {
			t.Errorf("%d bricks disperse %d: %d sets of %d, want %d", tc.n, tc.disperse, len(sets), s.SetSize(), tc.sets)
			continue
		}
		for i, set := range sets {
			if len(set) != tc.disperse || set[0].ID != s.Bricks[i*tc.disperse].ID {
				t.Errorf("%d bricks disperse %d: set %d is %v", tc.n, tc.disperse, i, set)
			}
		}
	}
	bad := map[string]Spec{
		"not below half":      {Disperse: 6, Redundancy: 3, Bricks: bricks(6)},
		"do not make":         {Disperse: 6, Redundancy: 2, Bricks: bricks(8)},
		"at least 3 bricks":   {Disperse: 2, Redundancy: 1, Bricks: bricks(2)},
		"at least 1":          {Disperse: 6, Bricks: bricks(6)},
		"at most 63 bricks":   {Disperse: 64, Redundancy: 2, Bricks: bricks(64)},
		"arbiter brick":       {Disperse: 3, Redundancy: 1, Bricks: append(bricks(2), Brick{ID: "a", Host: "h", Path: "/a", Arbiter: true})},
		"at least 3 bricks ":  {Redundancy: 1, Bricks: bricks(6)}, // no set size
		"redundancy must be ": {Disperse: 6, Redundancy: -1, Bricks: bricks(6)},
	}
	for msg, s := range bad {
		s.Name, s.ID, s.Type = "ec", "id", Disperse
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), strings.TrimSpace(msg)) {
			t.Errorf("%+v: %v; want an error with %q", s, err, strings.TrimSpace(msg))
		}
	}
	// The set size of other types is theirs, whatever Disperse says.
	for _, s := range []Spec{
		{Type: Distribute, Disperse: 6, Bricks: bricks(6)},
		{Type: Replicate, Replica: 3, Disperse: 6, Bricks: bricks(6)},
	} {
		want := max(s.Replica, 1)
		if s.SetSize() != want || len(s.Sets()) != 6/want {
			t.Errorf("%s: set size %d, %d sets", s.Type, s.SetSize(), len(s.Sets()))
		}
	}
}

// Specs of older clients and servers read the same: the disperse fields
// are absent unless set.
func TestSpecJSON(t *testing.T) {
	old := `{"name":"gv0","id":"id","type":"replicate","bricks":[{"id":"b1","host":"h","path":"/b1","addr":"h:1"},` +
		`{"id":"b2","host":"h","path":"/b2","addr":"h:2"}],"replica":2,"version":3}`
	var s Spec
	if err := json.Unmarshal([]byte(old), &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != Replicate || s.Replica != 2 || s.Disperse != 0 || s.Redundancy != 0 || s.Validate() != nil {
		t.Fatalf("old spec read as %+v", s)
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != old {
		t.Errorf("old spec written back as\n%s\nwant\n%s", out, old)
	}
	ec := Spec{Name: "ec", ID: "id", Type: Disperse, Bricks: bricks(6), Disperse: 6, Redundancy: 2}
	if out, err = json.Marshal(ec); err != nil {
		t.Fatal(err)
	}
	var back Spec
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"type":"disperse"`) || !strings.Contains(string(out), `"disperse":6,"redundancy":2`) ||
		back.Disperse != 6 || back.Redundancy != 2 || back.Validate() != nil {
		t.Errorf("disperse spec %s read back as %+v", out, back)
	}
}
