package disperse

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/heal"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// Torn stripes whose bricks' undo copies make more than one version whole
// (copies pile up while a file stays Dirty): revert takes the newest, as
// a brick's copy and current chunk order them.

// writeAck writes data at off through the layer with the bricks down
// away (acknowledged: they are blamed).
func (g *rig) writeAck(t *testing.T, data []byte, off int64, down ...int) {
	t.Helper()
	for _, i := range down {
		g.kill(i)
	}
	f, err := g.d.Open(g.ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatalf("open with %v down: %v", down, err)
	}
	if _, err := f.Write(g.ctx, data, off); err != nil {
		t.Fatalf("write with %v down: %v", down, err)
	}
	f.Release(g.ctx)
	g.d.Idle()
	for _, i := range down {
		g.revive(i)
	}
}

// healerNow is a healer of the rig's set with quorum K that checks Dirty
// files at once (Quiet 0).
func (g *rig) healerNow(t *testing.T) *heal.Healer {
	dh, err := NewDataHealer([][]replicate.Child{g.children}, g.d.g.M)
	if err != nil {
		t.Fatal(err)
	}
	dh.Quiet = 0
	h, err := heal.New([]heal.Set{g.children}, heal.Options{Data: dh,
		Quorate: func(_ int, b replicate.Mask) bool { return b.Count() >= g.d.g.K }})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// An acknowledged A on stripe 1 with bricks 0 and 1 away (behind), then a
// dying write T reaching some of the others, while the file stayed Dirty
// from an earlier dying writer. Heal heals one sink at a time: with the
// other behind brick counted, the copies make both V0 (brick 1 current,
// the copies A replaced) and A (current, the copy T replaced) whole; a
// refusal then rebuilt the stripe from its data chunks as they were, V0
// and A mixed (a third review, 2026-11-28). The newest, A, is taken.
func TestTornStripeAfterTwoAcknowledgedWrites(t *testing.T) {
	for _, withB := range []bool{true, false} {
		for _, tear := range [][]int{{4, 5}, {2, 3}, {5}, {4}} {
			t.Run(fmt.Sprint(withB, tear), func(t *testing.T) {
				g, r, v0 := undoRig(t, 3, 4)
				stripe := g.d.g.Stripe()
				size := int64(len(v0))
				g.tearS(t, 0, v0[:stripe], size, []int{2}) // Dirty stays: copies pile up
				a, b, tt := make([]byte, stripe), make([]byte, stripe), make([]byte, stripe)
				r.Read(a)
				r.Read(b)
				r.Read(tt)
				g.writeAck(t, a, stripe, 0, 1)
				if withB { // bricks 2 and 3 blamed for another stripe
					g.writeAck(t, b, 2*stripe, 2, 3)
				}
				g.tear(t, tt, size, tear)
				if !withB { // with B, only bricks 4 and 5 are good: too few to read before heal
					if got := g.readAt(t, stripe, stripe); !bytes.Equal(got, a) {
						t.Errorf("stripe 1 before heal is not the acknowledged A")
					}
				}
				h := g.healerNow(t)
				for range 3 {
					if err := h.Heal(g.ctx, 0, "/f"); err != nil {
						t.Logf("heal: %v", err)
					}
				}
				if got := g.readAt(t, stripe, stripe); !bytes.Equal(got, a) {
					t.Errorf("stripe 1 after heal is not the acknowledged A")
				}
			})
		}
	}
}

// The healer's verify pass (every brick a sink: what heal does for
// fragments blaming each other in a cycle) counts every brick: an
// acknowledged W1 that bricks behind missed and a dying W2 make both V0
// and W1 whole. The newest, W1, is put back.
func TestVerifyHealOfATornStripePutsBackTheNewest(t *testing.T) {
	for _, tc := range []struct{ first, down, tear []int }{
		{[]int{0}, []int{4, 5}, []int{2, 3}},
		{[]int{2}, []int{0, 1}, []int{4, 5}},
	} {
		t.Run(fmt.Sprint(tc.down, tc.tear), func(t *testing.T) {
			g, r, v0 := undoRig(t, 2, 3)
			stripe := g.d.g.Stripe()
			g.tearS(t, 0, v0[:stripe], int64(len(v0)), tc.first)
			w1, w2 := make([]byte, stripe), make([]byte, stripe)
			r.Read(w1)
			r.Read(w2)
			g.writeAck(t, w1, stripe, tc.down...)
			g.tear(t, w2, int64(len(v0)), tc.tear)
			dh, err := NewDataHealer([][]replicate.Child{g.children}, 2)
			if err != nil {
				t.Fatal(err)
			}
			dh.Quiet = 0 // the dying client is gone
			a, err := g.clients[0].Lookup(g.ctx, "/f")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dh.HealData(g.ctx, 0, "/f", a.Gfid, g.d.all(), 0, uint64(len(v0))); err != nil {
				t.Fatal(err)
			}
			if got := g.readAt(t, stripe, stripe); !bytes.Equal(got, w1) {
				t.Errorf("stripe 1 after a verify heal is not the acknowledged W1")
			}
		})
	}
}

// Undo copies outlived a truncate (nothing dropped them but the Dirty
// mark's clearing and the inode's last name). A write that extends the
// file again keeps none, so after it tore, the copies an earlier
// acknowledged overwrite left made the version before it whole, and
// revert put back data an acknowledged write replaced and an
// acknowledged truncate removed (a fourth review, 2026-11-28). A brick
// now drops the copies a truncate or a write keeping none makes stale.
func TestUndoCopiesDroppedByATruncate(t *testing.T) {
	for _, tear := range [][]int{{2, 3}, {0, 1, 2}, {1, 2, 3}, {3, 4, 5}} {
		t.Run(fmt.Sprint(tear), func(t *testing.T) { staleCopies(t, tear) })
	}
}

func staleCopies(t *testing.T, tear []int) {
	g, r, v0 := undoRig(t, 7, 2)
	stripe := g.d.g.Stripe()
	// The file stays Dirty (an earlier dying writer), so copies pile up.
	g.tearS(t, 0, v0[:stripe], int64(len(v0)), []int{0})
	// W1, acknowledged, with bricks 4 and 5 down: bricks 0-3 keep V0's
	// stripe 1 as their copy.
	w1 := make([]byte, stripe)
	r.Read(w1)
	g.writeAck(t, w1, stripe, 4, 5)
	// An acknowledged truncate to one stripe: stripe 1 is gone.
	f, err := g.d.Open(g.ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Setattr(g.ctx, layer.SetattrIn{Valid: layer.SetSize, Size: uint64(stripe)}); err != nil {
		t.Fatal(err)
	}
	f.Release(g.ctx)
	g.d.Idle()
	// A dying client extends the file again with stripe 1 (keeping
	// nothing: nothing to replace), reaching bricks 2 and 3.
	nw := make([]byte, stripe)
	r.Read(nw)
	g.tear(t, nw, 2*stripe, tear)
	check := func(what string) {
		rf, err := g.d.Open(g.ctx, "/f", syscall.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		defer rf.Release(g.ctx)
		p := make([]byte, 2*stripe)
		n, err := rf.Read(g.ctx, p, 0)
		p = p[:n]
		if int64(n) > stripe {
			s1 := p[stripe:]
			if bytes.Equal(s1, v0[stripe:len(s1)+int(stripe)]) {
				t.Errorf("%s: data an acknowledged write replaced and an acknowledged truncate removed came back", what)
			}
		}
	}
	check("before heal")
	g.healF(t)
	check("after heal")
}
