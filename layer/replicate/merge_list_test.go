package replicate

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// Copies of a directory that blame each other (each replica was away
// while a name was made in it: every copy lacks one name) are listed
// together: a listing from one copy would hide a name that exists, and
// `rm -r` of the directory would then fail with ENOTEMPTY. A name removed
// while a copy was away is not listed from that copy: the others recorded
// its removal (layer.HealStore.Removed).
func TestListingOfDirectoryCopiesThatBlameEachOther(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := g.writeFile("/d/gone", []byte("removed while 2 was away")); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b", "c"} {
		away := (i + 2) % 3 // a: 2 away, b: 0 away, c: 1 away
		g.kill(away)
		if err := g.writeFile("/d/"+name, []byte(name)); err != nil {
			t.Fatal(err)
		}
		if name == "a" {
			if err := g.r.Unlink(g.ctx, "/d/gone"); err != nil {
				t.Fatal(err)
			}
		}
		g.revive(away)
	}
	for i := range 3 {
		if m := g.pending(i, "/d"); m.Count() != 2 {
			t.Fatalf("brick %d's /d blames %b; want the two others", i, m)
		}
	}
	ents, err := layer.ReadDirAll(g.ctx, g.r, "/d")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("listing: %v; want a, b and c, each once (not gone, removed while brick 2 was away)", names)
	}
}

// A change that one replica did and another refused with ENOENT, the
// third down, while the copies of the directory up blame each other,
// is answered EIO as a lookup of the name is: which of the two is
// current is not known. The refusal stood (ENOENT for a file an
// acknowledged create made: sim replica3x2-dirs seed 62).
func TestChangeRefusedByAnEqualNumberIsEIO(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		away int
	}{{"a", 2}, {"b", 0}} {
		g.kill(c.away)
		if err := g.writeFile("/d/"+c.name, []byte(c.name)); err != nil {
			t.Fatal(err)
		}
		g.revive(c.away)
	}
	g.kill(1)
	if _, err := g.r.Lookup(g.ctx, "/d/a"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("lookup of /d/a, on 0 of the two up only: %v, want EIO", err)
	}
	if _, err := g.r.Setattr(g.ctx, "/d/a", layer.SetattrIn{Valid: layer.SetSize, Size: 1}); !errors.Is(err, syscall.EIO) {
		t.Errorf("truncate of /d/a, done by 0, refused by 2 (ENOENT): %v, want EIO", err)
	}
}

// unlinkAfterSetattr is a replica whose Setattr is followed at once by
// another client's unlink of the name (reaching it just after).
type unlinkAfterSetattr struct {
	layer.Layer
	store layer.Layer
}

func (u unlinkAfterSetattr) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	a, err := u.Layer.Setattr(ctx, path, in)
	u.store.Unlink(context.Background(), path)
	return a, err
}

// A tie with the copies known keeps its answer (a review: replica 2, all
// up, a chmod racing another client's unlink, which reached brick 0
// first and brick 1 just after the chmod, was answered EIO): the file is
// gone, ENOENT.
func TestTieRacingAnUnlinkIsENOENT(t *testing.T) {
	g := newRig(t, 2, false, Options{})
	if err := g.writeFile("/a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	children := []Child{
		{Name: g.set.Name(0), Layer: g.set.Clients[0], Up: g.set.Clients[0].Connected},
		{Name: g.set.Name(1), Layer: unlinkAfterSetattr{g.set.Clients[1], g.onBrick(1)}, Up: g.set.Clients[1].Connected},
	}
	r, err := New(children, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.onBrick(0).Unlink(g.ctx, "/a"); err != nil { // the other client's unlink, on brick 0
		t.Fatal(err)
	}
	if _, err := r.Setattr(g.ctx, "/a", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o600}); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("chmod racing an unlink: %v, want ENOENT", err)
	}
}
