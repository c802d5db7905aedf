package replicate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// cutOnRename is a replica whose connection is cut during every rename
// (its brick dying under it): it counts as down for the rename alone.
type cutOnRename struct{ layer.Layer }

func (cutOnRename) Rename(context.Context, string, string, uint32) error { return syscall.ENOTCONN }

// A directory renamed from /d into /e on replica 0 alone (replica 2
// down, replica 1 cut off during the rename), replica 0's copy of /e
// behind, is answered EIO and moved back on replica 0. Left there, heal
// judged the rename done in /d (replica 0 blames the others) and undone
// in /e (its copies blame each other; a change by too few replicas loses)
// and removed the directory, its subtree with it, under both names
// (docs/REPLICATION.md, "Simulation").
func TestDirectoryRenamedOnTooFewReplicasMovedBack(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	for _, dir := range []string{"/d", "/e", "/d/D"} {
		if _, err := g.r.Mkdir(g.ctx, dir, layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.writeFile("/d/D/f", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	g.kill(0) // replica 0's copy of /e falls behind
	if err := g.writeFile("/e/x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	g.revive(0)
	var children []Child
	for i, c := range g.set.Clients {
		l := layer.Layer(c)
		if i == 1 {
			l = cutOnRename{c}
		}
		children = append(children, Child{Name: g.set.Name(i), Layer: l, Up: c.Connected})
	}
	r, err := New(children, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g.kill(2)
	if err := r.Rename(g.ctx, "/d/D", "/e/N", 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("rename done on one replica of three: %v, want EIO", err)
	}
	for i := range 2 {
		if _, err := g.onBrick(i).Lookup(g.ctx, "/e/N"); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("brick %d's /e/N: %v, want ENOENT (moved back)", i, err)
		}
		if a, err := g.onBrick(i).Lookup(g.ctx, "/d/D/f"); err != nil || a.Size != 4 {
			t.Errorf("brick %d's /d/D/f: %+v, %v", i, a, err)
		}
	}
	// Moved back over the wire with layer.RenameTakeBack: no removal of
	// /e/N recorded (a merge of /e's copies would take it from replicas
	// a retried rename gives it to).
	if rs, err := g.bricks[0].Store.Removed(g.ctx, "/e"); err != nil || len(rs) != 0 {
		t.Errorf("brick 0's removal records of /e: %+v, %v; want none", rs, err)
	}
	g.revive(2)
	if got, err := g.readFile("/d/D/f"); err != nil || !bytes.Equal(got, []byte("kept")) {
		t.Errorf("/d/D/f through the set: %q, %v", got, err)
	}
	if _, err := g.r.Lookup(g.ctx, "/e/N"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("/e/N through the set: %v, want ENOENT", err)
	}
}

// orderedRename records when each replica's rename starts and ends.
type orderedRename struct {
	layer.Layer
	i   int
	log chan<- string
}

func (o orderedRename) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	o.log <- fmt.Sprintf("start %d", o.i)
	err := o.Layer.Rename(ctx, oldpath, newpath, flags)
	o.log <- fmt.Sprintf("end %d", o.i)
	return err
}

// A directory's rename reaches the first replica up (the decider) before
// the others are sent it: a client that goes away in between leaves the
// decider's name the one heal keeps (heal/dirname.go). With the first
// replica down, the next one decides.
func TestDirectoryRenameGoesToTheDeciderFirst(t *testing.T) {
	for _, down := range []int{-1, 0} {
		t.Run(fmt.Sprintf("down %d", down), func(t *testing.T) {
			g := newRig(t, 3, false, Options{})
			if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
				t.Fatal(err)
			}
			log := make(chan string, 6)
			var children []Child
			for i, c := range g.set.Clients {
				children = append(children, Child{Name: g.set.Name(i), Layer: orderedRename{c, i, log}, Up: c.Connected})
			}
			r, err := New(children, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if down >= 0 {
				g.kill(down)
			}
			if err := r.Rename(g.ctx, "/d", "/e", 0); err != nil {
				t.Fatal(err)
			}
			close(log)
			var got []string
			for l := range log {
				got = append(got, l)
			}
			decider := down + 1
			if len(got) < 2 || got[0] != fmt.Sprintf("start %d", decider) || got[1] != fmt.Sprintf("end %d", decider) {
				t.Fatalf("renames in the order %v, want replica %d's first and alone", got, decider)
			}
			if want := 2 * (3 - max(0, down+1)); len(got) != want {
				t.Fatalf("%d rename events %v, want %d", len(got), got, want)
			}
		})
	}
}

// A directory renamed on replicas 0 and 1 and not on 2, the client gone
// before it could mark anything (its bricks mark the parent Dirty when
// its connection ends): neither name is looked up until heal
// settles it, and a change under the old name is not acknowledged (it
// was, made by replica 2 alone, and undone by heal: sim replica3x2-dirs
// seed 48). One under the new name is made by a quorum, as heal keeps.
func TestHalfRenamedDirectoryRefused(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if _, err := g.r.Mkdir(g.ctx, "/d1", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := g.onBrick(i).Rename(g.ctx, "/d1", "/d1~", 0); err != nil {
			t.Fatal(err)
		}
	}
	// In flight (no mark yet: another client's rename between the
	// decider's answer and the others'), the names are answered as the
	// parent's marks say.
	if _, err := g.r.Lookup(g.ctx, "/d1~"); errors.Is(err, syscall.EIO) {
		t.Errorf("lookup of /d1~ while the rename is in flight: %v", err)
	}
	// The client gone: its bricks mark the parent Dirty.
	for i := range 2 {
		if err := g.bricks[i].Store.MarkPending(g.ctx, "/", layer.RootGfid, layer.Dirty); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/d1", "/d1~"} {
		if _, err := g.r.Lookup(g.ctx, p); !errors.Is(err, syscall.EIO) {
			t.Errorf("lookup of %s: %v, want EIO", p, err)
		}
	}
	if err := g.writeFile("/d1/x", []byte("x")); err == nil {
		t.Error("a create under the old name succeeded (one replica made it)")
	}
}

// The state a client's own RenameDir is in between the decider's answer
// and the others' (deciderFirst): another client's lookups of either
// name, and below them, are answered (a review: EIO, when a half-renamed
// directory was refused without the Dirty mark of a client gone).
func TestInFlightDirectoryRenameLookedUp(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	for _, p := range []string{"/d1", "/d1/sub"} {
		if _, err := g.r.Mkdir(g.ctx, p, layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.onBrick(0).Rename(g.ctx, "/d1", "/d2", 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/d1", "/d2", "/d1/sub", "/d2/sub"} {
		if _, err := g.r.Lookup(g.ctx, p); err != nil {
			t.Errorf("lookup of %s mid-rename: %v", p, err)
		}
	}
}

// A lookup racing a mkdir under a Dirty parent: replicas 1 and 2
// answered ENOENT for /n, then made it (a mkdir is sent to all at once)
// before they were asked where they hold it: the same name, not a
// rename half done (a review).
func TestLookupRacingMkdirNotHalfRenamed(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if _, err := g.r.Mkdir(g.ctx, "/n", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := g.bricks[0].Store.MarkPending(g.ctx, "/", layer.RootGfid, layer.Dirty); err != nil {
		t.Fatal(err)
	}
	copies := g.r.lookupAll(g.ctx, g.r.all, "/n")
	copies[1] = Copy{Err: syscall.ENOENT}
	copies[2] = Copy{Err: syscall.ENOENT}
	if v := g.r.verdict(g.ctx, g.r.all, "/n", copies); v.Err != nil {
		t.Errorf("lookup racing mkdir: %v", v.Err)
	}
}

// A replica that answers a removal ENOENT because it holds the name's
// directory under another name (a directory rename half done) has not
// removed the name: the file is still in that directory there. Counted
// as done, an unlink done by one replica of three was acknowledged and
// the file came back when heal settled the directory's name (sim
// disperse2+1x2-dirs seed 70). It counts as a replica that missed the
// removal: marked, and no vote for it.
func TestRemovalWhereTheDirectoryIsElsewhereNotDone(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if _, err := g.r.Mkdir(g.ctx, "/d1", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"/d1/f", "/d1/g"} {
		if err := g.writeFile(f, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.onBrick(2).Rename(g.ctx, "/d1", "/d1~", 0); err != nil {
		t.Fatal(err)
	}
	// Two of three hold the directory: the removal stands, the third
	// blamed for it.
	if err := g.r.Unlink(g.ctx, "/d1/g"); err != nil {
		t.Fatalf("unlink done by two of three: %v", err)
	}
	if m := g.pending(0, "/d1"); !m.Has(2) {
		t.Errorf("after an unlink replica 2 missed, /d1 on replica 0 blames %03b", m)
	}
	if err := g.onBrick(1).Rename(g.ctx, "/d1", "/d1~", 0); err != nil {
		t.Fatal(err)
	}
	if err := g.r.Unlink(g.ctx, "/d1/f"); err == nil {
		t.Error("an unlink done by one replica of three, the others holding the directory elsewhere, succeeded")
	}
	for i := 1; i < 3; i++ {
		if _, err := g.onBrick(i).Lookup(g.ctx, "/d1~/f"); err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
}

// A replica that never had the name's directory (it missed its mkdir,
// not healed yet) has nothing to remove: its ENOENT counts as done, and
// the unlink succeeds with another replica down (a review: EIO, when a
// replica lacking the directory's path was taken for one holding it
// elsewhere).
func TestRemovalWhereAReplicaMissedTheDirectory(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	g.kill(1)
	if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := g.writeFile("/d/x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	g.revive(1)
	g.kill(2)
	if err := g.r.Unlink(g.ctx, "/d/x"); err != nil {
		t.Fatalf("unlink with replica 1 lacking /d, 2 down: %v", err)
	}
	if _, err := g.onBrick(0).Lookup(g.ctx, "/d/x"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("replica 0 still holds /d/x: %v", err)
	}
}
