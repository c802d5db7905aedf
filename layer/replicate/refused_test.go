package replicate

import (
	"errors"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// A rename that one replica did and the others refused, their refusal
// winning (EEXIST: bricks 1 and 2 hold a target brick 0 lacks): the
// client is told nothing was done, and brick 0's record of the rename
// says so (Refused), so that heal never takes it as done under the new
// name (heal/refused.go; sim replica3x2-dirs seed 62).
func TestRefusedRenameRecordedAsRefused(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	for _, d := range []string{"/d", "/e"} {
		if _, err := g.r.Mkdir(g.ctx, d, layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.writeFile("/d/f", []byte("the file")); err != nil {
		t.Fatal(err)
	}
	f, err := g.r.Lookup(g.ctx, "/d/f")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		if _, err := g.onBrick(i).Mknod(g.ctx, "/e/g", layer.MknodIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: syscall.S_IFREG | 0o644}); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.r.RenameSource(g.ctx, "/d/f", "/e/g", layer.RenameNoReplace, f.Gfid); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("rename refused by bricks 1 and 2: %v, want EEXIST", err)
	}
	v, err := g.onBrick(0).Getxattr(g.ctx, "/e/g", layer.XattrRenamed)
	want := layer.RenameRecord{From: "/d/f", To: "/e/g", Refused: true}
	if rec, ok := layer.ParseRenameRecord(v); err != nil || !ok || rec != want {
		t.Errorf("brick 0's record of the rename: %q, %v; want %+v", v, err, want)
	}
}
