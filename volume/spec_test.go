package volume

import (
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
