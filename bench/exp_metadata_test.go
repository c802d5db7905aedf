package bench

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestMakeUntarTree: the tree the metadata experiment untars is a tar
// file in the work directory holding every entry the note counts (quick:
// the Go distribution's src/net here, where Go is installed).
func TestMakeUntarTree(t *testing.T) {
	r := &Runner{Work: t.TempDir(), Quick: true, exp: "metadata"}
	tarball, err := makeUntarTree(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tar", "tf", tarball).Output()
	if err != nil {
		t.Fatal(err)
	}
	listed := len(strings.Split(strings.TrimSpace(string(out)), "\n"))
	notes := r.Notes()
	if len(notes) != 1 || !strings.Contains(notes[0].Text, ", "+strconv.Itoa(listed)+" entries") {
		t.Fatalf("tar lists %d entries; notes %q", listed, notes)
	}
	if listed < 100 {
		t.Errorf("only %d entries to untar", listed)
	}
	t.Log(notes[0].Text)
}
