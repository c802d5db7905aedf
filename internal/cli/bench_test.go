package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestBenchList(t *testing.T) {
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"bench", "--list"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"seed000", "seed001", "seed002", "seed003", "seed004", "metadata"} {
		if !strings.Contains(out.String(), name+" ") {
			t.Errorf("bench --list lacks %s:\n%s", name, out.String())
		}
	}
}

func TestBenchRejectsUnknownNames(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--out", t.TempDir(), "seed999"},
		{"bench", "--out", t.TempDir(), "--targets", "nfs", "seed002"},
	} {
		root := NewRootCommand()
		root.SetArgs(args)
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "unknown") {
			t.Errorf("%v: err = %v, want unknown ...", args, err)
		}
	}
}

func TestBenchLayout(t *testing.T) {
	for _, c := range []struct {
		f       layoutFlags
		want    string // Layout.String(), "" for none
		bricks  int
		kw      string // volume create keywords
		wantErr string
	}{
		{f: layoutFlags{}},
		{f: layoutFlags{disperse: 6, redundancy: 2}, want: "disperse 4+2", bricks: 6, kw: "disperse 6 redundancy 2"},
		{f: layoutFlags{disperse: 6}, want: "disperse 4+2", bricks: 6, kw: "disperse 6 redundancy 2"}, // a third of the set
		{f: layoutFlags{disperse: 3}, want: "disperse 2+1", bricks: 3, kw: "disperse 3 redundancy 1"},
		{f: layoutFlags{disperse: 12, redundancy: 4}, want: "disperse 8+4", bricks: 12, kw: "disperse 12 redundancy 4"},
		{f: layoutFlags{replica: 3}, want: "replica 3", bricks: 3, kw: "replica 3"},
		{f: layoutFlags{replica: 3, disperse: 6}, wantErr: "either replicated or dispersed"},
		{f: layoutFlags{replica: 2, redundancy: 1}, wantErr: "either replicated or dispersed"},
		{f: layoutFlags{replica: 1}, wantErr: "2 or more"},
		{f: layoutFlags{redundancy: 2}, wantErr: "needs --disperse"},
		{f: layoutFlags{disperse: 6, redundancy: 3}, wantErr: "below half"},
		{f: layoutFlags{disperse: 2}, wantErr: "below half"},
		{f: layoutFlags{disperse: -6}, wantErr: "positive"},
	} {
		l, err := benchLayout(c.f)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%+v: %v, %v; want error %q", c.f, l, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%+v: %v", c.f, err)
		case c.want == "" && l != nil:
			t.Errorf("%+v: %v, want no layout", c.f, l)
		case c.want != "" && (l == nil || l.String() != c.want || l.BrickCount() != c.bricks ||
			strings.Join(l.Keywords(), " ") != c.kw):
			t.Errorf("%+v: %v, want %s over %d bricks (%s)", c.f, l, c.want, c.bricks, c.kw)
		}
	}
}

// TestBenchFlags: the layout flags are in the help and a wrong
// combination is refused before anything runs.
func TestBenchFlags(t *testing.T) {
	help, err := run(t, "bench", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--disperse", "--redundancy", "--replica", "--fio-corners", "mortar-distribute", "fuse-passthrough"} {
		if !strings.Contains(help, want) {
			t.Errorf("bench --help lacks %s:\n%s", want, help)
		}
	}
	_, err = run(t, "bench", "--out", t.TempDir(), "--replica", "3", "--disperse", "6", "seed002")
	if err == nil || !strings.Contains(err.Error(), "either replicated or dispersed") {
		t.Errorf("--replica with --disperse: %v", err)
	}
}
