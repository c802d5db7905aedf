package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A mount walking a tree reads listings ahead (layer/readdirahead); what
// it changes itself meanwhile is in every listing after the change: new
// names, removed names, and sizes (readdirplus gives the kernel each
// entry's attributes, which replace what the kernel knew).
func TestReaddirAheadSeesOwnChanges(t *testing.T) {
	n := startNode(t)
	n.createVolume("rda", 3, nil, nil)
	a := n.mount("rda")
	w := filepath.Join(a, "w")
	for _, d := range []string{"s1", "s2", "s3"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	big := filepath.Join(w, "s3", "grows")
	for i := range 20 {
		walkTo(t, w)
		name := fmt.Sprint("f", i)
		if err := os.WriteFile(filepath.Join(w, "s2", name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(names(t, filepath.Join(w, "s2")), name) {
			t.Fatalf("round %d: s2 lacks %s, just made through the same mount", i, name)
		}
		walkTo(t, w)
		if err := os.Remove(filepath.Join(w, "s2", name)); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(names(t, filepath.Join(w, "s2")), name) {
			t.Fatalf("round %d: s2 lists %s, just removed through the same mount", i, name)
		}
		walkTo(t, w)
		if err := os.WriteFile(big, make([]byte, i+1), 0o644); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(filepath.Join(w, "s3"))
		if err != nil || len(entries) != 1 {
			t.Fatalf("round %d: s3 lists %v, %v", i, entries, err)
		}
		if st, err := entries[0].Info(); err != nil || st.Size() != int64(i+1) {
			t.Fatalf("round %d: %s listed with %v (%v), want size %d", i, big, st, err, i+1)
		}
	}
}

// walkTo lists w, then w/s1, as a walk does: the mount reads the
// listings of w's other subdirectories ahead.
func walkTo(t *testing.T, w string) {
	t.Helper()
	names(t, w)
	names(t, filepath.Join(w, "s1"))
}

// names lists dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
