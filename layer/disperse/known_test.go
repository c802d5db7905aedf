package disperse

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// A file written piece by piece (4 KiB and odd sizes, across blocks,
// chunks and stripes), as a log or a direct-I/O writer writes it, through
// the known-stripe path: every fragment keeps FragmentLen of the size
// after every write, the content reads back, and so it does with M data
// bricks down (the parity is right).
func TestWritesOfAKnownStripe(t *testing.T) {
	g := newRig(t, 6, 2)
	ctx := g.ctx
	r := rand.New(rand.NewSource(3))
	want := make([]byte, 0, 3*g.d.g.Stripe())
	f, _, err := g.d.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	for len(want) < cap(want)-8192 {
		n := 4096
		if r.Intn(3) == 0 {
			n = 1 + r.Intn(9000)
		}
		p := make([]byte, n)
		r.Read(p)
		if _, err := f.Write(ctx, p, int64(len(want))); err != nil {
			t.Fatal(err)
		}
		want = append(want, p...)
		if r.Intn(4) == 0 { // and an overwrite behind the end
			at := r.Intn(len(want))
			q := make([]byte, min(1+r.Intn(5000), len(want)-at))
			r.Read(q)
			if _, err := f.Write(ctx, q, int64(at)); err != nil {
				t.Fatal(err)
			}
			copy(want[at:], q)
		}
		for i, b := range g.bricks {
			st, err := os.Stat(filepath.Join(b.Dir, "f"))
			if err != nil || st.Size() != g.d.g.FragmentLen(int64(len(want))) {
				t.Fatalf("size %d: brick %d's fragment is %v long (%v), want %d", len(want), i, st.Size(), err, g.d.g.FragmentLen(int64(len(want))))
			}
		}
	}
	f.Release(ctx)
	g.d.Idle()
	g.readBack("/f", want)
	g.kill(0)
	g.kill(2)
	g.readBack("/f", want)
}

// An O_TRUNC open truncates under the writers' lock: another open file of
// the inode that holds the lock and knows the stripe (its cache and kept
// headers) lets go first, and its next write reads the stripe anew. (Found
// by review: the bricks truncated at the open, behind the holder's back,
// and its next small write left headers no data matched: EIO for every
// read.)
func TestTruncatingOpenWhileAnotherFileWrites(t *testing.T) {
	g := newRig(t, 6, 2)
	ctx := g.ctx
	f1, _, err := g.d.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f1.Write(ctx, bytes.Repeat([]byte{'a'}, 12288), 0); err != nil {
		t.Fatal(err)
	}
	f2, err := g.d.Open(ctx, "/f", syscall.O_RDWR|syscall.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := f2.Getattr(ctx); err != nil || a.Size != 0 {
		t.Fatalf("after the O_TRUNC open: size %d, %v", a.Size, err)
	}
	if _, err := f1.Write(ctx, bytes.Repeat([]byte{'b'}, 4096), 4096); err != nil {
		t.Fatal(err)
	}
	f1.Release(ctx)
	f2.Release(ctx)
	g.d.Idle()
	want := append(make([]byte, 4096), bytes.Repeat([]byte{'b'}, 4096)...)
	g.readBack("/f", want)
}
