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
