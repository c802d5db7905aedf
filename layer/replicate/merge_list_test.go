package replicate

import (
	"slices"
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
