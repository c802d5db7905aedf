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

// A client that dies in the middle of a write leaves some bricks with the
// new chunks of a stripe and the others with the old ones, marked Dirty.
// Whatever the split, the stripe reads as the old or the new content of
// each 64 KiB chunk (never garbage, never an error), and the healer makes
// every brick agree, which a read with any M bricks down then proves.
// Also when another brick is blamed for the file: the heal is then for
// that sink, and finds the stripe torn (until 2026-11-28 the good bricks
// were opened read-only and the rewrite failed with EBADF). A write that
// reached more than M but fewer than K bricks is undone by the heal from
// what the bricks kept of the records it replaced: the stripe is wholly
// old again (until 2026-11-28 it stayed old or new per chunk), unless the
// volume keeps nothing (disperse.keep-undo off).
func TestClientDiesMidWrite(t *testing.T) {
	for _, tc := range []struct {
		got    int // bricks the dying write reached, of 6
		blame  bool
		noUndo bool
	}{{1, false, false}, {3, false, false}, {5, false, false}, {3, true, false}, {3, false, true}} {
		got := tc.got
		t.Run(fmt.Sprintf("reached=%d,blamed=%t,noUndo=%t", got, tc.blame, tc.noUndo), func(t *testing.T) {
			g := newRig(t, 6, 2)
			g.d.keepUndo = !tc.noUndo
			ctx := g.ctx
			r := rand.New(rand.NewSource(int64(got)))
			stripe := g.d.g.Stripe()
			old := make([]byte, 3*stripe)
			r.Read(old)
			// Its release clears the Dirty mark in the background: it
			// must not clear the mark of the dying write below.
			g.writeFile("/f", old)

			// The dying write: stripe 1 anew, sent to the first `got`
			// bricks only, as the layer sends it (Dirty, size).
			nw := make([]byte, stripe)
			r.Read(nw)
			bufs, err := g.d.records([]StripeWrite{{Stripe: 1, Data: nw}}, int64(len(old)))
			if err != nil {
				t.Fatal(err)
			}
			wctx := layer.WithTxn(ctx, layer.Txn{Pending: layer.Dirty, SetSize: true, Size: uint64(len(old)), KeepUndo: g.d.keepUndo})
			for i := 0; i < got; i++ {
				bf, err := g.clients[i].Open(ctx, "/f", syscall.O_RDWR)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := bf.Write(wctx, bufs[i], Record); err != nil {
					t.Fatal(err)
				}
				bf.Release(ctx)
			}

			// Old or new per chunk at most, through a fresh open.
			check := func(what string) []byte {
				t.Helper()
				rf, err := g.d.Open(ctx, "/f", syscall.O_RDONLY)
				if err != nil {
					t.Fatalf("%s: open: %v", what, err)
				}
				defer rf.Release(ctx)
				p := make([]byte, len(old))
				if n, err := rf.Read(ctx, p, 0); err != nil || n != len(p) {
					t.Fatalf("%s: read: %d, %v", what, n, err)
				}
				for c := int64(0); c < int64(len(p)); c += Chunk {
					have := p[c : c+Chunk]
					wasOld := bytes.Equal(have, old[c:c+Chunk])
					isNew := c >= stripe && c < 2*stripe && bytes.Equal(have, nw[c-stripe:c-stripe+Chunk])
					if !wasOld && !isNew {
						t.Fatalf("%s: chunk at %d is neither the old nor the new content", what, c)
					}
				}
				return p
			}
			before := check("after the crash")
			if got <= g.d.g.M && !bytes.Equal(before, old) {
				t.Fatal("a write that reached at most M bricks shows")
			}
			if got >= g.d.g.K && !bytes.Equal(before[stripe:2*stripe], nw) {
				t.Fatal("a write that reached K bricks does not show")
			}
			// Torn (more than M, fewer than K): read whole as it was
			// before the write, from what the bricks kept, as heal puts
			// it back.
			if got > g.d.g.M && got < g.d.g.K && !tc.noUndo && !bytes.Equal(before, old) {
				t.Fatal("a torn stripe reads other than as it was before the write that tore it")
			}

			if tc.blame { // brick 5 missed something: the others blame it
				for i := range 5 {
					if err := g.clients[i].MarkPending(ctx, "/f", layer.Gfid{}, uint64(replicate.Bit(5))); err != nil {
						t.Fatal(err)
					}
				}
			}
			dh, err := NewDataHealer([][]replicate.Child{g.children}, 2)
			if err != nil {
				t.Fatal(err)
			}
			dh.Quiet = 0 // the dying client is gone
			h, err := heal.New([]heal.Set{g.children}, heal.Options{Data: dh})
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Heal(ctx, 0, "/f"); err != nil {
				t.Fatal(err)
			}
			if tc.blame {
				// The torn stripe was written on the good bricks too,
				// which changed them since the healer looked: their
				// marks stay for the next pass, which clears them.
				if err := h.Heal(ctx, 0, "/f"); err != nil {
					t.Fatal(err)
				}
			}
			if info, err := h.Info(ctx); err != nil || info.Pending() != 0 {
				t.Fatalf("after heal: %+v, %v", info, err)
			}
			// Every brick holds one version of every stripe.
			for s := int64(0); s < 3; s++ {
				sc, corrupt := fetchStripe(ctx, g.d.g, openAll(t, g), g.d.all(), s)
				if corrupt != 0 {
					t.Fatalf("stripe %d: corrupt on %b after heal", s, corrupt)
				}
				for i := range sc.headers {
					if sc.headers[i].Version != sc.headers[0].Version {
						t.Fatalf("stripe %d: brick %d has version %x, brick 0 %x", s, i, sc.headers[i].Version, sc.headers[0].Version)
					}
				}
			}
			want := before
			if got > g.d.g.M && got < g.d.g.K && !tc.noUndo {
				want = old
			}
			for _, down := range [][]int{{0, 1}, {2, 3}, {4, 5}} {
				for _, i := range down {
					g.kill(i)
				}
				if p := check(fmt.Sprintf("after heal, %v down", down)); !bytes.Equal(p, want) {
					t.Fatalf("after heal with %v down: content changed", down)
				}
				for _, i := range down {
					g.revive(i)
				}
			}
		})
	}
}

// openAll opens /f on every brick for reading, closed with the test.
func openAll(t *testing.T, g *rig) []layer.File {
	files := make([]layer.File, len(g.clients))
	for i, c := range g.clients {
		f, err := c.Open(g.ctx, "/f", syscall.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Release(g.ctx) })
		files[i] = f
	}
	return files
}

// A sink whose fragment the heal of its name made anew holds a hole
// where the file has data: with one other current fragment reachable,
// the stripe cannot be rebuilt, and the healer must say so rather than
// take the hole for a data chunk of a torn stripe (sim disperse2+1 seed
// 45: the file rebuilt from zeros and its one reachable current chunk).
func TestHealNewFragmentIsNoSource(t *testing.T) {
	g := newRig(t, 3, 1)
	ctx := g.ctx
	data := bytes.Repeat([]byte("mortar "), 800)
	g.writeFile("/f", data)
	a, err := g.clients[1].Lookup(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	// Brick 0's fragment made anew (empty), brick 2 out of reach.
	if err := g.clients[0].Unlink(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.clients[0].Mknod(ctx, "/f", layer.MknodIn{Owner: layer.Owner{Gfid: a.Gfid}, Mode: syscall.S_IFREG | 0o644}); err != nil {
		t.Fatal(err)
	}
	g.kill(2)
	dh, err := NewDataHealer([][]replicate.Child{g.children}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dh.HealData(ctx, 0, "/f", a.Gfid, replicate.Bit(1), replicate.Bit(0), uint64(len(data))); !errors.Is(err, heal.ErrNoSource) {
		t.Fatalf("healing a new fragment from one current one: %v, want ErrNoSource", err)
	}
	g.revive(2)
	if _, err := dh.HealData(ctx, 0, "/f", a.Gfid, replicate.Bit(1)|replicate.Bit(2), replicate.Bit(0), uint64(len(data))); err != nil {
		t.Fatal(err)
	}
	g.kill(1)
	g.readBack("/f", data)
}

// tear writes stripe 1 of /f anew (data nw) to the bricks in idx only, as a
// dying client would.
func (g *rig) tear(t *testing.T, nw []byte, size int64, idx []int) { g.tearS(t, 1, nw, size, idx) }

func (g *rig) tearS(t *testing.T, s int64, nw []byte, size int64, idx []int) {
	bufs, err := g.d.records([]StripeWrite{{Stripe: s, Data: nw}}, size)
	if err != nil {
		t.Fatal(err)
	}
	wctx := layer.WithTxn(g.ctx, layer.Txn{Pending: layer.Dirty, SetSize: true, Size: uint64(size), KeepUndo: true})
	for _, i := range idx {
		bf, err := g.clients[i].Open(g.ctx, "/f", syscall.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bf.Write(wctx, bufs[i], s*Record); err != nil {
			t.Fatal(err)
		}
		bf.Release(g.ctx)
	}
}

func (g *rig) readAt(t *testing.T, off, n int64) []byte {
	rf, err := g.d.Open(g.ctx, "/f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Release(g.ctx)
	p := make([]byte, n)
	if got, err := rf.Read(g.ctx, p, off); err != nil || int64(got) != n {
		t.Fatalf("read: %d %v", got, err)
	}
	return p
}

func (g *rig) healF(t *testing.T) {
	dh, err := NewDataHealer([][]replicate.Child{g.children}, 2)
	if err != nil {
		t.Fatal(err)
	}
	dh.Quiet = 0
	h, err := heal.New([]heal.Set{g.children}, heal.Options{Data: dh})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := h.Heal(g.ctx, 0, "/f"); err != nil {
			t.Fatal(err)
		}
	}
}

// An acknowledged write W1 reaching K bricks (two down, behind), then a
// dying write reaching two of them, while the file stayed Dirty from an
// earlier dying writer: the copies of the bricks W2 reached make W1 whole,
// the copies W1's bricks kept make V0 whole with the bricks behind. Read
// and healed, the stripe is W1: the bricks behind do not count (a review,
// 2026-11-28: V0 came back, the acknowledged W1 lost).
func TestTornStripeNotPutBackBeforeAnAcknowledgedWrite(t *testing.T) {
	g, r, v0 := undoRig(t, 2, 3)
	stripe := g.d.g.Stripe()

	// An earlier client died writing stripe 0, reaching brick 0 only: the
	// file stays Dirty (heal-quiet), and undo copies pile up.
	g.tearS(t, 0, v0[:stripe], int64(len(v0)), []int{0})

	// W1, acknowledged, with bricks 4 and 5 down.
	g.kill(4)
	g.kill(5)
	w1 := make([]byte, stripe)
	r.Read(w1)
	f, err := g.d.Open(g.ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(g.ctx, w1, stripe); err != nil {
		t.Fatal(err)
	}
	f.Release(g.ctx)
	g.d.Idle()
	g.revive(4)
	g.revive(5)

	// W2 of a dying client reaches bricks 2 and 3 only.
	w2 := make([]byte, stripe)
	r.Read(w2)
	g.tear(t, w2, int64(len(v0)), []int{2, 3})

	if got := g.readAt(t, stripe, stripe); !bytes.Equal(got, w1) {
		t.Errorf("read: the acknowledged W1 %v, V0 %v, the torn W2 %v; want W1", bytes.Equal(got, w1), bytes.Equal(got, v0[stripe:2*stripe]), bytes.Equal(got, w2))
	}
	g.healF(t)
	if got := g.readAt(t, stripe, stripe); !bytes.Equal(got, w1) {
		t.Errorf("after heal: the acknowledged W1 %v, V0 %v, the torn W2 %v; want W1", bytes.Equal(got, w1), bytes.Equal(got, v0[stripe:2*stripe]), bytes.Equal(got, w2))
	}
}

// undoRig returns a 4 + 2 rig keeping undo copies, whose /f holds
// `stripes` random stripes (v0), and the source (seeded) they came from.
func undoRig(t *testing.T, seed int64, stripes int) (*rig, *rand.Rand, []byte) {
	g := newRig(t, 6, 2)
	g.d.keepUndo = true
	r := rand.New(rand.NewSource(seed))
	v0 := make([]byte, int64(stripes)*g.d.g.Stripe())
	r.Read(v0)
	g.writeFile("/f", v0)
	return g, r, v0
}

// A brick holding the current fragment under another name than the one
// healed (a rename it missed, or parked by the heal of its stale name)
// still serves it, by its id; and a stripe is never taken for torn while
// a brick's fragment is out of reach: the sink's stale chunk and the one
// current chunk reachable by the name made the file old and new at once
// (sim disperse2+1x2-dirs seed 60).
func TestHealReadsAFragmentNamedElsewhere(t *testing.T) {
	g := newRig(t, 3, 1)
	ctx := g.ctx
	stripe := int(g.d.g.Stripe())
	v0 := bytes.Repeat([]byte("old "), stripe/4)
	v1 := bytes.Repeat([]byte("new "), stripe/4)
	g.writeFile("/f", v0)
	g.kill(0)
	g.writeFile("/f", v1) // brick 0 misses it
	g.revive(0)
	a, err := g.clients[1].Lookup(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.clients[2].Rename(ctx, "/f", "/g", 0); err != nil {
		t.Fatal(err)
	}
	dh, err := NewDataHealer([][]replicate.Child{g.children}, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dh.HealData(ctx, 0, "/f", a.Gfid, replicate.Bit(1)|replicate.Bit(2), replicate.Bit(0), uint64(len(v1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.clients[2].Rename(ctx, "/g", "/f", 0); err != nil {
		t.Fatal(err)
	}
	sc, corrupt := fetchStripe(ctx, g.d.g, openAll(t, g), g.d.all(), 0)
	if corrupt != 0 {
		t.Fatalf("corrupt on %b after heal", corrupt)
	}
	for i := range sc.headers {
		if sc.headers[i].Version != sc.headers[1].Version {
			t.Fatalf("brick %d has version %x, brick 1 (current) %x", i, sc.headers[i].Version, sc.headers[1].Version)
		}
	}
}

// The data healer is the one heal's Options.Data takes (disperse does
// not import heal: the errors it returns are layer's).
var _ heal.DataHealer = (*DataHealer)(nil)
