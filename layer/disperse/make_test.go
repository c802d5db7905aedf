package disperse

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/heal"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// madeIn is an exclusive create that carries data and a mode change, as
// write-behind's create-behind sends it.
func madeIn(data []byte) layer.CreateIn {
	return layer.CreateIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Flags: syscall.O_WRONLY | syscall.O_EXCL, Mode: 0o644,
		Data: data, Set: layer.SetattrIn{Valid: layer.SetMode, Mode: 0o600}}
}

// A file made in one go, in a directory whose names the client leases,
// holds what a create and a write would have made: every brick its
// fragment of the data (and the file's size), the mode changed, no Dirty
// mark; it reads back whole, also with M bricks down (when a make goes in
// steps: the lease went with the bricks), and a write after it continues
// it.
func TestMakeInOneGo(t *testing.T) {
	g := newLeasingRig(t, 6, 2)
	ctx := g.ctx
	if _, err := g.d.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if _, owned := g.d.OwnsName("/d/x"); !owned {
		t.Fatal("the directory made is not leased")
	}
	r := rand.New(rand.NewSource(1))
	made := map[string][]byte{}
	for _, n := range []int{1, Block + 1, Chunk + 1, int(g.d.g.Stripe()) + 5, layer.MaxCreateData} {
		data := make([]byte, n)
		r.Read(data)
		path := fmt.Sprintf("/d/f%d", n)
		f, a, err := g.d.Create(ctx, path, madeIn(data))
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if a.Size != uint64(n) || a.Mode&07777 != 0o600 || !a.IsReg() {
			t.Errorf("%d bytes: made with size %d mode %o", n, a.Size, a.Mode)
		}
		if f.(*file).hold.holds(1) {
			t.Errorf("%d bytes: the make took the writers' lock: it went in steps", n)
		}
		more := []byte("and then some")
		if _, err := f.Write(ctx, more, int64(n)); err != nil {
			t.Fatalf("%d bytes: write after the make: %v", n, err)
		}
		f.Release(ctx)
		g.d.Idle()
		want := append(data, more...)
		for i, c := range g.clients {
			ba, err := c.Lookup(ctx, path)
			if err != nil || ba.Size != uint64(len(want)) || ba.Pending != 0 {
				t.Errorf("%d bytes: brick %d: size %d pending %x (%v), want %d, none", n, i, ba.Size, ba.Pending, err, len(want))
			}
		}
		g.readBack(path, want)
		made[path] = want
	}
	g.kill(0)
	g.kill(5)
	data := make([]byte, Chunk+3)
	r.Read(data)
	f, _, err := g.d.Create(ctx, "/d/degraded", madeIn(data))
	if err != nil {
		t.Fatalf("a make with M bricks down: %v", err)
	}
	f.Release(ctx)
	g.d.Idle()
	g.readBack("/d/degraded", data)
	for path, want := range made { // rebuilt from parity
		g.readBack(path, want)
	}
}

// A make with a brick down (in steps: no lease without every brick) marks
// the brick on the others, for the file and its directory; heal makes the
// brick's fragment, and reads from it then give the data.
func TestMakeMissedIsHealed(t *testing.T) {
	g := newRig(t, 6, 2)
	ctx := g.ctx
	g.kill(1)
	data := bytes.Repeat([]byte("healed fragment "), 9000) // 144000 bytes: three chunks
	f, _, err := g.d.Create(ctx, "/f", madeIn(data))
	if err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	g.d.Idle()
	for _, p := range []string{"/", "/f"} {
		a, err := g.clients[0].Lookup(ctx, p)
		if err != nil || replicate.Mask(a.Pending)&^replicate.Mask(layer.Dirty) != replicate.Bit(1) {
			t.Errorf("%s: pending %x (%v), want the brick down blamed", p, a.Pending, err)
		}
	}
	g.revive(1)
	dh, err := NewDataHealer([][]replicate.Child{g.children}, 2)
	if err != nil {
		t.Fatal(err)
	}
	h, err := heal.New([]heal.Set{g.children}, heal.Options{Data: dh})
	if err != nil {
		t.Fatal(err)
	}
	// "/" twice: a heal that gave a brick a name leaves the directory
	// marked for one more look (see package heal).
	for _, p := range []string{"/", "/f", "/"} {
		if err := h.Heal(ctx, 0, p); err != nil {
			t.Fatalf("heal %s: %v", p, err)
		}
	}
	if info, err := h.Info(ctx); err != nil || info.Pending() != 0 {
		t.Fatalf("after heal: %+v, %v", info, err)
	}
	g.kill(0) // brick 1's chunk now comes from brick 1, and the rebuild needs it
	g.kill(2)
	g.readBack("/f", data)
}

// What cannot go in one go goes in steps with the same outcome: a create
// that is not exclusive (the file may exist), and a size change.
func TestMakeInSteps(t *testing.T) {
	g := newRig(t, 6, 2)
	ctx := g.ctx
	g.writeFile("/old", []byte("old content, longer than the new"))
	in := madeIn([]byte("new"))
	in.Flags = syscall.O_WRONLY | syscall.O_TRUNC
	f, a, err := g.d.Create(ctx, "/old", in)
	if err != nil || a.Size != 3 || a.Mode&07777 != 0o600 {
		t.Fatalf("make over a file: size %d mode %o, %v", a.Size, a.Mode, err)
	}
	f.Release(ctx)
	g.d.Idle()
	g.readBack("/old", []byte("new"))
	in = madeIn([]byte("sized"))
	in.Set = layer.SetattrIn{Valid: layer.SetSize, Size: 3}
	f, a, err = g.d.Create(ctx, "/sized", in)
	if err != nil || a.Size != 3 {
		t.Fatalf("make with a size change: size %d, %v", a.Size, err)
	}
	f.Release(ctx)
	g.d.Idle()
	g.readBack("/sized", []byte("siz"))
	if _, _, err := g.d.Create(ctx, "/sized", madeIn([]byte("x"))); err != syscall.EEXIST {
		t.Fatalf("an exclusive make of a name taken: %v, want EEXIST", err)
	}
	g.readBack("/sized", []byte("siz"))
}

// A name under which K bricks hold one file and another brick holds
// another inode, with no mark blaming either (a client died making or
// replacing the file on that brick alone): only the file K bricks hold
// can be read, so heal gives the odd brick that one. (It was a gfid
// split-brain heal left alone: sim disperse2+1-full seed 52.)
func TestHealTakesTheFileKBricksHold(t *testing.T) {
	g := newRig(t, 3, 1)
	ctx := g.ctx
	data := bytes.Repeat([]byte("the readable file "), 5000)
	g.writeFile("/f", data)
	odd := g.clients[1]
	if err := odd.Unlink(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	g.createOn(1, "/f")
	if err := g.quorateHealer(1).Heal(ctx, 0, "/f"); err != nil {
		t.Fatalf("heal: %v", err)
	}
	want, _ := g.clients[0].Lookup(ctx, "/f")
	if a, err := odd.Lookup(ctx, "/f"); err != nil || a.Gfid != want.Gfid {
		t.Fatalf("the odd brick's /f after heal: gfid %s, %v; want %s", a.Gfid, err, want.Gfid)
	}
	g.kill(0) // the odd brick's fragment is needed now
	g.readBack("/f", data)
}

// Creates that each reached one brick of three (the others full or
// away), with different gfids and no mark on either file: no version can
// be read, and none holds anything, so heal keeps one (sim
// disperse2+1-full seed 60: a split-brain left alone).
func TestHealKeepsOneOfEmptyFilesNoKBricksHold(t *testing.T) {
	g := newRig(t, 3, 1)
	ctx := g.ctx
	g.createOn(0, "/f")
	g.createOn(1, "/f")
	h := g.quorateHealer(1)
	for _, p := range []string{"/f", "/"} {
		if err := h.Heal(ctx, 0, p); err != nil {
			t.Fatalf("heal %s: %v", p, err)
		}
	}
	var gfids []layer.Gfid
	for i, c := range g.clients {
		a, err := c.Lookup(ctx, "/f")
		if err != nil || a.Size != 0 {
			t.Fatalf("/f on brick %d after heal: size %d, %v", i, a.Size, err)
		}
		gfids = append(gfids, a.Gfid)
	}
	if gfids[0] != gfids[1] || gfids[1] != gfids[2] {
		t.Fatalf("/f after heal has gfids %v, want one", gfids)
	}
	g.readBack("/f", nil)
}

// createOn creates path, empty, on brick i alone, with a gfid of its own.
func (g *rig) createOn(i int, path string) {
	g.t.Helper()
	f, _, err := g.clients[i].Create(g.ctx, path, layer.CreateIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Flags: syscall.O_WRONLY, Mode: 0o644})
	if err != nil {
		g.t.Fatal(err)
	}
	f.Release(g.ctx)
}

// quorateHealer returns a healer of the rig's set, of redundancy m, that
// knows a change needs K bricks.
func (g *rig) quorateHealer(m int) *heal.Healer {
	g.t.Helper()
	dh, err := NewDataHealer([][]replicate.Child{g.children}, m)
	if err != nil {
		g.t.Fatal(err)
	}
	k := len(g.children) - m
	h, err := heal.New([]heal.Set{g.children}, heal.Options{Data: dh,
		Quorate: func(_ int, b replicate.Mask) bool { return b.Count() >= k }})
	if err != nil {
		g.t.Fatal(err)
	}
	return h
}

// A rename half done: one brick moved the file (written while a third
// brick was away) onto a name another brick holds a file of its own
// under. Under the name neither version is on K bricks, but the moved
// one is, by its id, counting its old name on the other brick: heal
// keeps that one there (the other can never be read) instead of leaving
// a split-brain (sim disperse2+1-full seed 64).
func TestHealKeepsTheVersionKBricksHoldByID(t *testing.T) {
	g := newRig(t, 3, 1)
	ctx := g.ctx
	g.kill(2)
	g.writeFile("/src", bytes.Repeat([]byte("moved "), 1000))
	g.revive(2)
	moved, err := g.clients[0].Lookup(ctx, "/src")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.clients[0].Rename(ctx, "/src", "/dst", 0); err != nil {
		t.Fatal(err)
	}
	g.createOn(1, "/dst")
	err = g.quorateHealer(1).Heal(ctx, 0, "/dst")
	if errors.Is(err, heal.ErrSplitBrain) {
		t.Fatalf("heal /dst: %v", err)
	}
	if a, err := g.clients[1].Lookup(ctx, "/dst"); err == nil && a.Gfid != moved.Gfid {
		t.Fatalf("brick 1's /dst after heal: gfid %s, want the moved file's %s or none yet", a.Gfid, moved.Gfid)
	}
}

// A file whose fragments blame each other in a cycle (each brick missed
// some change the others made), one of them behind on the data: heal
// checks every fragment against the version K bricks share, rebuilds
// what differs and drops the marks (it was a split-brain heal "resolved"
// without healing anything, the marks left for ever: sim
// disperse2+1-full seed 87).
func TestHealOfFragmentsBlamingEachOther(t *testing.T) {
	g := newRig(t, 3, 1)
	ctx := g.ctx
	g.writeFile("/f", bytes.Repeat([]byte("old "), 4000))
	g.kill(2)
	want := bytes.Repeat([]byte("new "), 4000)
	f, err := g.d.Open(ctx, "/f", syscall.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	g.d.Idle()
	g.revive(2)
	for i := range g.clients {
		others := uint64(7) &^ (1 << uint(i))
		if err := g.bricks[i].Store.MarkPending(ctx, "/f", layer.Gfid{}, others); err != nil {
			t.Fatal(err)
		}
	}
	dh, err := NewDataHealer([][]replicate.Child{g.children}, 1)
	if err != nil {
		t.Fatal(err)
	}
	dh.Quiet = 0
	h, err := heal.New([]heal.Set{g.children}, heal.Options{Data: dh,
		Quorate: func(_ int, b replicate.Mask) bool { return b.Count() >= 2 }})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Heal(ctx, 0, "/f"); err != nil {
		t.Fatalf("heal: %v", err)
	}
	for i, c := range g.clients {
		if a, err := c.Lookup(ctx, "/f"); err != nil || a.Pending != 0 {
			t.Fatalf("brick %d's /f after heal: pending %x, %v", i, a.Pending, err)
		}
	}
	g.kill(0) // brick 2's fragment is needed now
	g.readBack("/f", want)
}
