package mgmt

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume/options"
)

func testVolume(name, id string, paths ...string) *VolumeState {
	v := &VolumeState{Name: name, ID: id, Type: "distribute"}
	for i, p := range paths {
		v.Bricks = append(v.Bricks, BrickState{ID: id + "-b" + string(rune('1'+i)), Node: "n1", Host: "localhost", Path: p})
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
		Command{Op: OpSetNode, Node: &NodeState{ID: "n1", Addr: "h:1"}},
		Command{Op: OpCreateVolume, Volume: testVolume("gv0", "v1", "/b1", "/b2")},
	)
	v := s.Volumes["gv0"]
	if v.Status != StatusCreated || v.SpecVersion != 1 || s.Index != 2 {
		t.Fatalf("after create: status %s spec %d index %d", v.Status, v.SpecVersion, s.Index)
	}
	refusals := []struct {
		cmd    Command
		marker error
	}{
		{Command{Op: OpCreateVolume, Volume: testVolume("gv0", "v2", "/b3")}, api.ErrExists},
		{Command{Op: OpCreateVolume, Volume: testVolume("gv1", "v2", "/b1")}, api.ErrInvalid},
		{Command{Op: OpCreateVolume, Volume: testVolume("gv1", "v2", "/b3", "/b3")}, api.ErrInvalid},
		{Command{Op: OpSetStatus, Name: "gv0", Status: StatusStopped}, api.ErrState},
		{Command{Op: OpSetStatus, Name: "nope", Status: StatusStarted}, api.ErrNotFound},
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
	mustApply(t, s, Command{Op: OpSetStatus, Name: "gv0", Status: StatusStarted})
	if err := s.Apply(Command{Op: OpDeleteVolume, Name: "gv0"}); !errors.Is(err, api.ErrState) {
		t.Fatalf("delete started volume: %v", err)
	}
	mustApply(t, s, Command{Op: OpSetOption, Name: "gv0", Key: options.OptAttrTimeout, Value: "2"})
	if got := s.Volumes["gv0"].SpecVersion; got != 2 {
		t.Fatalf("spec version after set = %d, want 2", got)
	}
	mustApply(t, s, Command{Op: OpSetNode, Node: &NodeState{ID: "n1", Addr: "h:2"}})
	if got := s.Volumes["gv0"].SpecVersion; got != 2 {
		t.Fatalf("spec version after the node's API port moved = %d, want 2", got)
	}
	mustApply(t, s, Command{Op: OpSetNode, Node: &NodeState{ID: "n1", Addr: "h2:2"}})
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
		Command{Op: OpSetStatus, Name: "gv0", Status: StatusStopped},
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
		{Op: OpSetNode, Node: &NodeState{ID: "n1", Addr: "h:1"}},
		{Op: OpCreateVolume, Volume: testVolume("a", "v1", "/a1", "/a2")},
		{Op: OpCreateVolume, Volume: testVolume("b", "v2", "/b1")},
		{Op: OpSetStatus, Name: "a", Status: StatusStarted},
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
	if a.Index != 6 || len(a.Volumes) != 1 || a.Volumes["a"].Status != StatusStarted {
		t.Fatalf("replayed state: index %d volumes %v", a.Index, a.VolumeNames())
	}
}

// openTestRaft opens a one-node Raft store in dir on a free port.
func openTestRaft(t *testing.T, dir string) *raftStore {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secret := newSecret()
	s, err := openRaftStore(dir, "n1", ln, ln.Addr().String(), nil, func() string { return secret }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The Raft store keeps what was applied across a restart, refuses bad
// commands without changing anything, and takes over the state.json of a
// node that ran before Raft.
func TestRaftStorePersists(t *testing.T) {
	dir := t.TempDir()
	legacy := NewState()
	if err := legacy.Apply(Command{Op: OpSetNode, Node: &NodeState{ID: "n1", Addr: "h:1"}}); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONAtomic(filepath.Join(dir, "state.json"), legacy); err != nil {
		t.Fatal(err)
	}
	st := openTestRaft(t, dir)
	if got := st.State(); !reflect.DeepEqual(got, legacy) {
		t.Fatalf("state taken from state.json:\n%+v\nwant\n%+v", got, legacy)
	}
	if err := st.Apply(Command{Op: OpCreateVolume, Volume: testVolume("gv0", "v1", "/b1")}); err != nil {
		t.Fatal(err)
	}
	before := st.State()
	if err := st.Apply(Command{Op: OpDeleteVolume, Name: "zzz"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("delete of a missing volume: %v", err)
	}
	if !reflect.DeepEqual(st.State(), before) {
		t.Fatal("a refused command changed the state")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	again := openTestRaft(t, dir)
	defer again.Close()
	if err := again.waitLeader(leaderWait); err != nil {
		t.Fatal(err)
	}
	// The log is applied again once this node leads; Barrier waits for it.
	if err := again.raft.Barrier(raftApplyTimeout).Error(); err != nil {
		t.Fatal(err)
	}
	if got := again.State(); !reflect.DeepEqual(got, before) {
		t.Fatalf("reopened state differs:\n%+v\n%+v", got, before)
	}
}

func TestCheckVolumeName(t *testing.T) {
	good := []string{"gv0", "a", "A-b_c.d", strings.Repeat("v", 64)}
	for _, n := range good {
		if err := CheckVolumeName(n); err != nil {
			t.Errorf("CheckVolumeName(%q) = %v", n, err)
		}
	}
	bad := []string{"", ".", "..", "a/b", "a b", "gv0!", "é", strings.Repeat("v", 65)}
	for _, n := range bad {
		if err := CheckVolumeName(n); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("CheckVolumeName(%q) = %v, want ErrInvalid", n, err)
		}
	}
}

func TestParseBrick(t *testing.T) {
	cases := []struct{ in, host, path string }{
		{"localhost:/data/b1", "localhost", "/data/b1"},
		{"h:/data//b1/", "h", "/data/b1"},
		{"[::1]:/b", "::1", "/b"},
		{"10.0.0.1:/", "10.0.0.1", "/"},
	}
	for _, c := range cases {
		h, p, err := ParseBrick(c.in)
		if err != nil || h != c.host || p != c.path {
			t.Errorf("ParseBrick(%q) = %q, %q, %v", c.in, h, p, err)
		}
	}
	for _, in := range []string{"nohost", ":/b", "h:rel/path", "[::1]/b", "h:"} {
		if _, _, err := ParseBrick(in); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("ParseBrick(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestCheckOption(t *testing.T) {
	if err := checkOption(options.OptAttrTimeout, "0.5"); err != nil {
		t.Error(err)
	}
	if err := checkOption(options.OptPingTimeout, "0"); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("ping-timeout 0: %v", err)
	}
	if err := checkOption(options.OptEntryTimeout, "soon"); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("entry-timeout soon: %v", err)
	}
	for _, ok := range [][2]string{{options.OptQuickRead, "off"}, {options.OptQuickReadMaxFileSize, "1048576"}, {options.OptQuickReadMaxFileSize, "1"}, {options.OptQuickReadCacheTimeout, "0.2"}} {
		if err := checkOption(ok[0], ok[1]); err != nil {
			t.Errorf("%s %s: %v", ok[0], ok[1], err)
		}
	}
	for _, bad := range [][2]string{{options.OptQuickRead, "yes"}, {options.OptQuickReadMaxFileSize, "1048577"}, {options.OptQuickReadMaxFileSize, "0"},
		{options.OptQuickReadMaxFileSize, "64KB"}, {options.OptQuickReadCacheTimeout, "0"}, {options.OptQuickReadCacheTimeout, "-1"}} {
		if err := checkOption(bad[0], bad[1]); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("%s %s: %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
}
