package distribute_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer/distribute"
)

// A remove-brick's walk misses a file a client renames into a directory
// the walk has passed, its data still on the leaving child; Remaining
// finds it, and a second walk moves it.
func TestRemainingSeesAFileRenamedBehindTheWalk(t *testing.T) {
	c := newCluster(t, 2, 1, posix.Options{})
	old := even("c0", "c1")
	model := tree(t, c.dist(nil, nil), 3, 1, 10)
	cur := old.Without("c1")
	d := c.dist(&cur, old)
	ctx := t.Context()
	if left, err := d.Remaining(ctx, []string{"c1"}, 100); err != nil || len(left) == 0 {
		t.Fatalf("before the walk: %v, %v", left, err)
	}
	// The file of /d2/s0 whose data is on the leaving child.
	var src string
	for p := range model {
		fi, err := os.Stat(filepath.Join(c.dirs[1][0], p))
		if filepath.Dir(p) == "/d2/s0" && err == nil && fi.Mode()&os.ModeSticky == 0 {
			src = p
		}
	}
	if src == "" {
		t.Fatal("no file of /d2/s0 on the leaving child: choose other names")
	}
	leaving := func(id string) bool { return id == "c1" }
	renamed := false
	st, err := d.Rebalance(ctx, distribute.RebalanceOptions{Workers: 1, Source: leaving,
		Progress: func(st distribute.RebalanceStats) {
			if st.Dirs == 3 && !renamed { // "/", "/d0" and "/d0/s0" done
				renamed = true
				if err := d.Rename(ctx, src, "/d0/moved", 0); err != nil {
					t.Error(err)
				}
			}
		}})
	if err != nil || st.Skipped+st.Failed > 0 || !renamed {
		t.Fatalf("walk: %+v, %v (renamed %v)", st, err, renamed)
	}
	left, err := d.Remaining(ctx, []string{"c1"}, 100)
	if err != nil || !slices.Equal(left, []string{"/d0/moved"}) {
		t.Fatalf("after the walk: %v, %v; want /d0/moved", left, err)
	}
	if _, err := d.Rebalance(ctx, distribute.RebalanceOptions{Source: leaving}); err != nil {
		t.Fatal(err)
	}
	if left, err := d.Remaining(ctx, []string{"c1"}, 100); err != nil || len(left) != 0 {
		t.Fatalf("after a second walk: %v, %v", left, err)
	}
	if _, err := d.Remaining(ctx, []string{"c9"}, 1); err == nil {
		t.Fatal("Remaining of a child that is not one: no error")
	}
	after := c.dist(&cur, nil, "c0")
	if got, err := readFile(ctx, after, "/d0/moved"); err != nil || !bytes.Equal(got, model[src]) {
		t.Fatalf("/d0/moved (was %s): %d bytes, %v; want %d", src, len(got), err, len(model[src]))
	}
	delete(model, src)
	check(t, after, model)
}
