package crypt

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
)

// TestConformance runs the layer conformance suite on crypt over
// distribute over two real bricks.
func TestConformance(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer { return newRig(t, 2).c })
}

func TestSizes(t *testing.T) {
	for _, n := range []int64{0, 1, BlockSize - 1, BlockSize, BlockSize + 1, 5*BlockSize + 17, 1 << 30} {
		c := cipherSize(n)
		if got := plainSize(uint64(c)); got != uint64(n) {
			t.Errorf("plainSize(cipherSize(%d) = %d) = %d", n, c, got)
		}
	}
	if cipherSize(1) != HeaderSize+1+Overhead || cipherSize(BlockSize) != HeaderSize+StoredBlock {
		t.Errorf("cipherSize(1) = %d, cipherSize(BlockSize) = %d", cipherSize(1), cipherSize(BlockSize))
	}
}

func TestKeys(t *testing.T) {
	k := NewKey()
	if len(k) != KeySize {
		t.Fatalf("NewKey: %d bytes", len(k))
	}
	for _, in := range [][]byte{[]byte(EncodeKey(k)), []byte("  " + EncodeKey(k) + "\n"), k} {
		got, err := ParseKey(in)
		if err != nil || !bytes.Equal(got, k) {
			t.Errorf("ParseKey(%q) = %x, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "abc", EncodeKey(k)[:63] + "g"} {
		if _, err := ParseKey([]byte(bad)); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
	t.Setenv(EnvKey, EncodeKey(k))
	if got, err := ResolveKey(nil, ""); err != nil || !bytes.Equal(got, k) {
		t.Errorf("ResolveKey from %s: %x, %v", EnvKey, got, err)
	}
	t.Setenv(EnvKey, "nothex")
	if _, err := ResolveKey(nil, ""); err == nil {
		t.Errorf("ResolveKey accepted a bad %s", EnvKey)
	}
	if _, err := New(nil, k[:16], Options{}); err == nil {
		t.Error("New accepted a 16-byte key")
	}
}

// TestModel runs random writes (at random offsets and sizes, through
// O_APPEND files too), truncations, reopens and reads on one encrypted
// file and on a byte slice, and requires the same contents and size.
func TestModel(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed, 250) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	r := newRig(t, 2)
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := r.ctx
	var model []byte
	f, _, err := r.c.Create(ctx, "/m", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
	r.ok(err, "create")
	defer func() { f.Release(ctx) }()
	randOff := func() int64 {
		switch rng.IntN(4) {
		case 0: // near a block boundary
			return int64(rng.IntN(6))*BlockSize + int64(rng.IntN(9)) - 4
		case 1: // near the end
			return int64(len(model)) + int64(rng.IntN(200)) - 100
		default:
			return int64(rng.IntN(5 * BlockSize))
		}
	}
	randLen := func() int {
		if rng.IntN(3) == 0 {
			return 1 + rng.IntN(3*BlockSize)
		}
		return 1 + rng.IntN(5000)
	}
	for step := range steps {
		what := ""
		switch op := rng.IntN(10); {
		case op < 5: // write
			off, n := max(randOff(), 0), randLen()
			data := pattern(n, byte(step))
			what = fmt.Sprintf("write %d at %d", n, off)
			m, err := f.Write(ctx, data, off)
			r.ok(err, what)
			if m != n {
				t.Fatalf("%s: wrote %d", what, m)
			}
			if end := off + int64(n); end > int64(len(model)) {
				model = append(model, make([]byte, end-int64(len(model)))...)
			}
			copy(model[off:], data)
		case op == 5: // append through another file
			g, err := r.c.Open(ctx, "/m", syscall.O_WRONLY|syscall.O_APPEND)
			r.ok(err, "open O_APPEND")
			data := pattern(randLen(), byte(step))
			what = fmt.Sprintf("append %d", len(data))
			_, err = g.Write(ctx, data, 0)
			r.ok(err, what)
			r.ok(g.Release(ctx), "release")
			model = append(model, data...)
		case op == 6: // truncate, through the path or the file
			n := max(randOff(), 0)
			if rng.IntN(8) == 0 {
				n = 0
			}
			what = fmt.Sprintf("truncate to %d", n)
			var a layer.Attr
			if rng.IntN(2) == 0 {
				a, err = r.c.Setattr(ctx, "/m", layer.SetattrIn{Valid: layer.SetSize, Size: uint64(n)})
			} else {
				a, err = f.Setattr(ctx, layer.SetattrIn{Valid: layer.SetSize, Size: uint64(n)})
			}
			r.ok(err, what)
			if a.Size != uint64(n) {
				t.Fatalf("%s: setattr says size %d", what, a.Size)
			}
			if n < int64(len(model)) {
				model = model[:n]
			} else {
				model = append(model, make([]byte, n-int64(len(model)))...)
			}
		case op == 7: // reopen: the layer forgets the file
			what = "reopen"
			r.ok(f.Release(ctx), "release")
			f, err = r.c.Open(ctx, "/m", syscall.O_RDWR)
			r.ok(err, "reopen")
		default: // read
			off, n := max(randOff(), 0), randLen()
			what = fmt.Sprintf("read %d at %d", n, off)
			p := make([]byte, n)
			m, err := f.Read(ctx, p, off)
			r.ok(err, what)
			var want []byte
			if off < int64(len(model)) {
				want = model[off:min(int64(len(model)), off+int64(n))]
			}
			wantBytes(t, fmt.Sprintf("step %d: %s", step, what), p[:m], want)
		}
		a, err := r.c.Lookup(ctx, "/m")
		r.ok(err, "lookup")
		if a.Size != uint64(len(model)) {
			t.Fatalf("step %d: after %s: size %d, model %d", step, what, a.Size, len(model))
		}
	}
	// The whole file, through a fresh client.
	got, err := r.readAt(r.layer(r.key), "/m", len(model)+10, 0)
	r.ok(err, "read all")
	wantBytes(t, "whole file", got, model)
}

// Concurrent writes of one client to parts of the same blocks lose
// nothing: each rewrites its blocks under the file's lock.
func TestConcurrentWrites(t *testing.T) {
	r := newRig(t, 1)
	const writers, pieces, piece = 4, 16, 1000
	f, _, err := r.c.Create(r.ctx, "/c", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
	r.ok(err, "create")
	defer f.Release(r.ctx)
	want := make([]byte, writers*pieces*piece)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range pieces {
				off := (i*writers + w) * piece // interleaved: every block is shared
				data := bytes.Repeat([]byte{byte(1 + w)}, piece)
				copy(want[off:], data)
				if _, err := f.Write(r.ctx, data, int64(off)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := r.readAt(r.c, "/c", len(want)+1, 0)
	r.ok(err, "read")
	wantBytes(t, "after concurrent writes", got, want)
}
