package state

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume"
	"github.com/mortarfs/mortar/volume/options"
)

func testVolume(name, id string, paths ...string) *Volume {
	v := &Volume{Name: name, ID: id, Type: "distribute"}
	for i, p := range paths {
		v.Bricks = append(v.Bricks, Brick{ID: id + "-b" + string(rune('1'+i)), Node: "n1", Host: "localhost", Path: p})
	}
	return v
}

func mustApply(t *testing.T, s *State, cmds ...Command) {
	t.Helper()
	for _, c := range cmds {
		if err := s.Apply(c); err != nil {
			t.Fatalf("apply %+v: %v", c, err)
		}
	}
}

func TestStateLifecycle(t *testing.T) {
	s := NewState()
	mustApply(t, s,
		Command{Op: OpSetNode, Node: &Node{ID: "n1", Addr: "h:1"}},
		Command{Op: OpCreateVolume, Volume: testVolume("gv0", "v1", "/b1", "/b2")},
	)
	v := s.Volumes["gv0"]
	if v.Status != api.StatusCreated || v.SpecVersion != 1 || s.Index != 2 {
		t.Fatalf("after create: status %s spec %d index %d", v.Status, v.SpecVersion, s.Index)
	}
	refusals := []struct {
		cmd    Command
		marker error
	}{
		{Command{Op: OpCreateVolume, Volume: testVolume("gv0", "v2", "/b3")}, api.ErrExists},
		{Command{Op: OpCreateVolume, Volume: testVolume("gv1", "v2", "/b1")}, api.ErrInvalid},
		{Command{Op: OpCreateVolume, Volume: testVolume("gv1", "v2", "/b3", "/b3")}, api.ErrInvalid},
		{Command{Op: OpSetStatus, Name: "gv0", Status: api.StatusStopped}, api.ErrState},
		{Command{Op: OpSetStatus, Name: "nope", Status: api.StatusStarted}, api.ErrNotFound},
		{Command{Op: OpSetOption, Name: "nope", Key: "k", Value: "v"}, api.ErrNotFound},
	}
	for _, r := range refusals {
		before := s.Clone()
		if err := s.Apply(r.cmd); !errors.Is(err, r.marker) {
			t.Errorf("apply %+v: got %v, want %v", r.cmd, err, r.marker)
		}
		if !reflect.DeepEqual(before, s) {
			t.Errorf("apply %+v failed but changed the state", r.cmd)
		}
	}
	mustApply(t, s, Command{Op: OpSetStatus, Name: "gv0", Status: api.StatusStarted})
	if err := s.Apply(Command{Op: OpDeleteVolume, Name: "gv0"}); !errors.Is(err, api.ErrState) {
		t.Fatalf("delete started volume: %v", err)
	}
	mustApply(t, s, Command{Op: OpSetOption, Name: "gv0", Key: options.OptAttrTimeout, Value: "2"})
	if got := s.Volumes["gv0"].SpecVersion; got != 2 {
		t.Fatalf("spec version after set = %d, want 2", got)
	}
	mustApply(t, s, Command{Op: OpSetNode, Node: &Node{ID: "n1", Addr: "h:2"}})
	if got := s.Volumes["gv0"].SpecVersion; got != 2 {
		t.Fatalf("spec version after the node's API port moved = %d, want 2", got)
	}
	mustApply(t, s, Command{Op: OpSetNode, Node: &Node{ID: "n1", Addr: "h2:2"}})
	if got := s.Volumes["gv0"].SpecVersion; got != 3 {
		t.Fatalf("spec version after node moved = %d, want 3", got)
	}
	mustApply(t, s, Command{Op: OpSetBrickPort, Name: "gv0", Brick: "v1-b1", Port: 49152})
	mustApply(t, s, Command{Op: OpSetBrickPort, Name: "gv0", Brick: "v1-b1", Port: 49152}) // no change
	spec := s.Spec(s.Volumes["gv0"])
	if spec.Bricks[0].Addr != "h2:49152" || spec.Bricks[1].Addr != "" || spec.Options[options.OptAttrTimeout] != "2" || spec.Version != 4 {
		t.Fatalf("spec = %+v", spec)
	}
	for _, bad := range []Command{
		{Op: OpSetBrickPort, Name: "gv0", Brick: "nope", Port: 1},
		{Op: OpSetBrickPort, Name: "gv0", Brick: "v1-b2", Port: 70000},
		{Op: OpSetBrickPort, Name: "nope", Brick: "v1-b2", Port: 1},
	} {
		if err := s.Apply(bad); err == nil {
			t.Errorf("apply %+v succeeded", bad)
		}
	}
	mustApply(t, s,
		Command{Op: OpSetStatus, Name: "gv0", Status: api.StatusStopped},
		Command{Op: OpDeleteVolume, Name: "gv0"},
	)
	if len(s.Volumes) != 0 {
		t.Fatalf("volumes after delete: %v", s.VolumeNames())
	}
}

// TestStateDeterministic replays a command log, through JSON, on a fresh
// state and expects the same result: what a replicated log relies on.
func TestStateDeterministic(t *testing.T) {
	cmds := []Command{
		{Op: OpSetNode, Node: &Node{ID: "n1", Addr: "h:1"}},
		{Op: OpCreateVolume, Volume: testVolume("a", "v1", "/a1", "/a2")},
		{Op: OpCreateVolume, Volume: testVolume("b", "v2", "/b1")},
		{Op: OpSetStatus, Name: "a", Status: api.StatusStarted},
		{Op: OpSetOption, Name: "b", Key: options.OptPingTimeout, Value: "3"},
		{Op: OpCreateVolume, Volume: testVolume("c", "v3", "/a1")}, // refused
		{Op: OpDeleteVolume, Name: "b"},
	}
	run := func() *State {
		s := NewState()
		for _, c := range cmds {
			data, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var back Command
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			s.Apply(back) //nolint:errcheck // refusals are part of the log
		}
		return s
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two replays differ:\n%+v\n%+v", a, b)
	}
	if a.Index != 6 || len(a.Volumes) != 1 || a.Volumes["a"].Status != api.StatusStarted {
		t.Fatalf("replayed state: index %d volumes %v", a.Index, a.VolumeNames())
	}
}

// A replica set without a data brick never reaches the state.
func TestAllArbiterSetRefused(t *testing.T) {
	s := NewState()
	mustApply(t, s, Command{Op: OpSetNode, Node: &Node{ID: "n1", Addr: "h:1"}})
	v := testVolume("v", "v1", "/a", "/b")
	v.Type, v.Replica = volume.Replicate, 2
	v.Bricks[0].Arbiter, v.Bricks[1].Arbiter = true, true
	if err := s.Apply(Command{Op: OpCreateVolume, Volume: v}); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "no data brick") {
		t.Errorf("create-volume with an all-arbiter set: %v", err)
	}
}
