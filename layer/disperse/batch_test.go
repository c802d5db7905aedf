package disperse

import (
	"fmt"
	"math/rand"
	"sync"
	"syscall"
	"testing"
)

// runs merges writes that overlap or adjoin the run before them, later
// bytes over earlier ones, and keeps the others apart, in order.
func TestRuns(t *testing.T) {
	w := func(off int64, s string) *queued { return &queued{off: off, p: []byte(s)} }
	writes := []*queued{w(4, "bb"), w(6, "cc"), w(2, "aaa"), w(5, "X"), w(20, "far"), w(0, "zz")}
	rs := runs(writes, 64)
	got := ""
	for _, r := range rs {
		got += fmt.Sprintf("%d:%s/%d ", r.off, r.p, len(r.writes))
	}
	if want := "2:aaaXcc/4 20:far/1 0:zz/1 "; got != want {
		t.Fatalf("runs %q, want %q", got, want)
	}
	if string(writes[0].p) != "bb" || string(writes[2].p) != "aaa" {
		t.Fatal("merging wrote into a write's own buffer")
	}
}

// Many small writes of one stripe at once, as a queue of direct writes
// sends them: every one lands, whichever run it went in.
func TestConcurrentWritesOfOneStripe(t *testing.T) {
	g := newRig(t, 6, 2)
	ctx := g.ctx
	stripe := g.d.g.Stripe()
	want := make([]byte, 2*stripe)
	rand.New(rand.NewSource(2)).Read(want)
	g.writeFile("/f", make([]byte, len(want)))
	f, err := g.d.Open(ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	const bs = 4096
	for off := int64(0); off < int64(len(want)); off += bs {
		wg.Go(func() {
			if _, err := f.Write(ctx, want[off:off+bs], off); err != nil {
				t.Errorf("write at %d: %v", off, err)
			}
		})
	}
	wg.Wait()
	f.Release(ctx)
	g.d.Idle()
	g.readBack("/f", want)
}
