package replicate

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// A replica that missed a file's creation answers its removal with
// ENOENT: the name is absent there, which is what the removal makes. With
// another replica up that removes it, the removal is done on a quorum:
// it succeeds (it failed with EIO, or ENOENT when the directory's copies
// blamed each other: the simulation, replica3x2-full seed 62), and the
// replica that lacked the name records that the one away missed it.
func TestRemovalWhereAReplicaMissedTheCreate(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	g.kill(1)
	if err := g.writeFile("/d/f", []byte("made while 1 was away")); err != nil {
		t.Fatal(err)
	}
	g.revive(1)
	g.kill(0)
	if err := g.r.Unlink(g.ctx, "/d/f"); err != nil {
		t.Fatalf("unlink with replica 0 away and replica 1 lacking the name: %v", err)
	}
	if _, err := g.r.Lookup(g.ctx, "/d/f"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup after the unlink: %v, want ENOENT", err)
	}
	if m := g.pending(1, "/d"); !m.Has(0) {
		t.Errorf("replica 1's /d blames %b; want replica 0, which missed the removal", m)
	}
}

// A rename whose source one replica lacks because it missed the file's
// creation, the other replica up having done it, the third away, with
// the copies of the directory blaming each other (so that both count as
// good): the file exists, and ENOENT would be a wrong answer. The rename
// stands where it was done, on too few replicas (EIO), and the replica
// that lacked the source is marked for heal (sim disperse2+1-full seed
// 64). When that replica recorded the name as removed, its ENOENT
// stands.
func TestRenameWhereAReplicaMissedTheCreate(t *testing.T) {
	for _, removed := range []bool{false, true} {
		t.Run(fmt.Sprintf("removed=%v", removed), func(t *testing.T) {
			g := newRig(t, 3, false, Options{})
			if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
				t.Fatal(err)
			}
			if removed {
				// Made everywhere, then removed while replica 2 was away.
				if err := g.writeFile("/d/f", []byte("removed while 2 was away")); err != nil {
					t.Fatal(err)
				}
				g.kill(2)
				if err := g.r.Unlink(g.ctx, "/d/f"); err != nil {
					t.Fatal(err)
				}
				g.revive(2)
			} else {
				g.kill(1)
				if err := g.writeFile("/d/f", []byte("made while 1 was away")); err != nil {
					t.Fatal(err)
				}
				g.revive(1)
			}
			// Copies 1 and 2 of /d blame each other.
			for i, blamed := range map[int]uint64{1: 1 << 2, 2: 1 << 1} {
				if err := g.bricks[i].Store.MarkPending(g.ctx, "/d", layer.Gfid{}, blamed); err != nil {
					t.Fatal(err)
				}
			}
			g.kill(0)
			err := g.r.Rename(g.ctx, "/d/f", "/d/g", 0)
			if removed {
				if !errors.Is(err, syscall.ENOENT) {
					t.Fatalf("rename of a name replica 1 removed: %v, want ENOENT", err)
				}
				return
			}
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("rename with replica 0 away and replica 1 lacking the source: %v, want EIO", err)
			}
			if _, err := g.onBrick(2).Lookup(g.ctx, "/d/g"); err != nil {
				t.Errorf("the renamed file on replica 2: %v", err)
			}
			if m := g.pending(2, "/d"); !m.Has(1) {
				t.Errorf("replica 2's /d blames %b; want replica 1, which lacked the source", m)
			}
		})
	}
}

// The same, with the source and the target in two directories and each
// replica up blamed on one of them: replica 0, which renamed the file,
// is good for the source's directory, replica 2, which lacks the file,
// only for the target's. Replica 2's view of the source's directory is
// stale: its ENOENT does not stand either (sim disperse2+1-full seed 65).
func TestRenameAcrossDirectoriesEachReplicaBlamedOnOne(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	for _, d := range []string{"/a", "/b"} {
		if _, err := g.r.Mkdir(g.ctx, d, layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	g.kill(2)
	if err := g.writeFile("/a/f", []byte("made while 2 was away")); err != nil {
		t.Fatal(err)
	}
	g.revive(2)
	if err := g.bricks[2].Store.MarkPending(g.ctx, "/b", layer.Gfid{}, 1<<0); err != nil {
		t.Fatal(err)
	}
	g.kill(1)
	if err := g.r.Rename(g.ctx, "/a/f", "/b/f", 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("rename with replica 1 away and replica 2 lacking the source: %v, want EIO", err)
	}
	if _, err := g.onBrick(0).Lookup(g.ctx, "/b/f"); err != nil {
		t.Errorf("the renamed file on replica 0: %v", err)
	}
	if m := g.pending(0, "/b"); !m.Has(2) {
		t.Errorf("replica 0's /b blames %b; want replica 2, which lacked the source", m)
	}
}

// A name removed while one replica was away, the copies of its directory
// blaming each other: looked up alone, it must be as absent as a listing
// shows it, not found on the replica that missed the removal (sim
// disperse2+1-full seed 73 read such a file back, empty).
func TestLookupOfANameRemovedUnderAMergedDirectory(t *testing.T) {
	g := dirWithFile(t)
	// Replica 0 removes it while 1 misses it (recorded, with 1 blamed),
	// replica 1 blames 0 for something else; replica 2 is away, so that
	// the blame on either side counts and the copies are merged.
	t1 := layer.WithTxn(g.ctx, layer.Txn{Pending: 1 << 1})
	if err := g.bricks[0].Store.Unlink(t1, "/d/f"); err != nil {
		t.Fatal(err)
	}
	if err := g.bricks[1].Store.MarkPending(g.ctx, "/d", layer.Gfid{}, 1<<0); err != nil {
		t.Fatal(err)
	}
	g.kill(2)
	if a, err := g.r.Lookup(g.ctx, "/d/f"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup of /d/f: %v (gfid %s), want ENOENT", err, a.Gfid)
	}
	if _, err := g.onBrick(1).Lookup(g.ctx, "/d/f"); err != nil {
		t.Fatalf("replica 1 should still hold the stale name: %v", err)
	}
}

// The same, but the removal recorded on the replica that is down: the
// two up blame each other, one holds the name and neither recorded its
// removal. The name may have been removed (as here) or made: the lookup
// cannot tell, and answers EIO rather than bring a removed file back
// (sim disperse2+1 seed 74); so does a listing of the directory (seeds
// 85 and 89 listed the removed file).
func TestLookupUndecidedWhileTheRemovalRecordIsDown(t *testing.T) {
	g := dirWithFile(t)
	// Replica 2 removes it (recorded, 1 blamed); replica 0 never had
	// it (removed there too, without a record: it missed the create);
	// 0 and 1 blame each other. Then 2 is away.
	t1 := layer.WithTxn(g.ctx, layer.Txn{Pending: 1 << 1})
	if err := g.bricks[2].Store.Unlink(t1, "/d/f"); err != nil {
		t.Fatal(err)
	}
	if err := g.bricks[0].Store.Unlink(g.ctx, "/d/f"); err != nil {
		t.Fatal(err)
	}
	if err := g.bricks[0].Store.MarkPending(g.ctx, "/d", layer.Gfid{}, 1<<1); err != nil {
		t.Fatal(err)
	}
	if err := g.bricks[1].Store.MarkPending(g.ctx, "/d", layer.Gfid{}, 1<<0); err != nil {
		t.Fatal(err)
	}
	g.kill(2)
	if a, err := g.r.Lookup(g.ctx, "/d/f"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("lookup of /d/f: %v (gfid %s), want EIO", err, a.Gfid)
	}
	if page, err := g.r.Readdir(g.ctx, "/d", 0, 100); !errors.Is(err, syscall.EIO) {
		t.Fatalf("listing of /d: %v (%d entries), want EIO", err, len(page.Entries))
	}
}

// A create that is not exclusive, over a name one replica holds alone
// (a create of a client that died reached it only) while another lacks
// it and nothing blames either: the replicas would open the one and make
// a new inode on the other, and the writes go to both, one file under
// two gfids that heal cannot join (sim disperse2+1 seed 11). The create
// fails with EIO instead, partly done.
func TestCreateOverANameOneReplicaHoldsAlone(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	g.mkdirD()
	if _, err := g.onBrick(1).Mknod(g.ctx, "/d/f", layer.MknodIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: syscall.S_IFREG | 0o644}); err != nil {
		t.Fatal(err)
	}
	g.kill(2)
	f, _, err := g.r.Create(g.ctx, "/d/f", layer.CreateIn{Flags: syscall.O_WRONLY | syscall.O_TRUNC, Mode: 0o644})
	if err == nil {
		f.Release(g.ctx)
		a0, _ := g.onBrick(0).Lookup(g.ctx, "/d/f")
		a1, _ := g.onBrick(1).Lookup(g.ctx, "/d/f")
		t.Fatalf("create over a name one replica holds alone: succeeded, gfids %s and %s", a0.Gfid, a1.Gfid)
	}
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("create: %v, want EIO", err)
	}
}

// dirWithFile is a rig of 3 replicas holding /d and a file /d/f.
func dirWithFile(t *testing.T) *rig {
	g := newRig(t, 3, false, Options{})
	g.mkdirD()
	if err := g.writeFile("/d/f", []byte("removed while 1 was away")); err != nil {
		t.Fatal(err)
	}
	return g
}

// mkdirD makes the directory /d through the set.
func (g *rig) mkdirD() {
	g.t.Helper()
	if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		g.t.Fatal(err)
	}
}

// Two clients removing one name at once each get there first on some
// replicas and find it gone on the others: exactly one of them succeeds
// (the lowest replica that answered decides), as on a local file system,
// and no copy is marked. Each test plays one client, the other's removal
// having landed already on the replicas in other.
func TestRemovalRacingAnotherClient(t *testing.T) {
	for _, tc := range []struct {
		other []int
		want  error
	}{
		{[]int{1}, nil},            // ours was first on replica 0
		{[]int{0}, syscall.ENOENT}, // the other's was
		{[]int{0, 2}, syscall.ENOENT},
		{[]int{1, 2}, nil},
	} {
		g := dirWithFile(t)
		for _, i := range tc.other {
			if err := g.onBrick(i).Unlink(g.ctx, "/d/f"); err != nil {
				t.Fatal(err)
			}
		}
		err := g.r.Unlink(g.ctx, "/d/f")
		if !errors.Is(err, tc.want) && !(err == nil && tc.want == nil) {
			t.Errorf("other client first on %v: unlink %v, want %v", tc.other, err, tc.want)
		}
		for i := 0; i < 3; i++ {
			if _, err := g.onBrick(i).Lookup(g.ctx, "/d/f"); !errors.Is(err, syscall.ENOENT) {
				t.Errorf("other client first on %v: replica %d still has /d/f (%v)", tc.other, i, err)
			}
			if m := g.pending(i, "/d"); m != 0 {
				t.Errorf("other client first on %v: replica %d's /d blames %b", tc.other, i, m)
			}
		}
	}
}

// Two clients (two replicate layers over the same bricks) remove the same
// names at once: each name is removed by exactly one of them.
func TestConcurrentRemovalsOneWins(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	g.mkdirD()
	var children []Child
	for i, c := range g.set.Clients {
		children = append(children, Child{Name: g.set.Name(i), Layer: c, Up: c.Connected})
	}
	other, err := New(children, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const files = 100
	for n := 0; n < files; n++ {
		if err := g.writeFile(fmt.Sprintf("/d/f%d", n), nil); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; n < files; n++ {
		p := fmt.Sprintf("/d/f%d", n)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for c, r := range []*Replicate{g.r, other} {
			wg.Go(func() { errs[c] = r.Unlink(g.ctx, p) })
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("%s removed by two clients at once: %v and %v, want one success", p, errs[0], errs[1])
		}
		for _, err := range errs {
			if err != nil && !errors.Is(err, syscall.ENOENT) {
				t.Fatalf("%s: %v", p, err)
			}
		}
	}
}
