package disperse

import (
	"bytes"
	"math/rand"
	"syscall"
	"testing"
)

// A small overwrite reads and writes only the headers and the blocks it
// covers, not the blocks before them in the chunk (layer.GapWriter): a
// block before it that fails its checksum on a brick is still there, as
// it was, afterwards. (A small write that read it would see the bad
// checksum and rewrite the whole stripe, putting it right.) The file reads
// back whole: the bad block is decoded from the others.
func TestSmallWriteTouchesOnlyItsBlocks(t *testing.T) {
	g := newRig(t, 6, 2)
	ctx := g.ctx
	r := rand.New(rand.NewSource(1))
	want := make([]byte, g.d.g.Stripe())
	r.Read(want)
	g.writeFile("/f", want)

	// Block 2 of brick 1's chunk (data chunk 1), spoilt behind the
	// layer's back.
	bf, err := g.clients[1].Open(ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte{0xa5}, Block)
	if _, err := bf.Write(ctx, junk, HeaderSize+2*Block); err != nil {
		t.Fatal(err)
	}

	// 100 bytes into block 10 of chunk 1.
	f, err := g.d.Open(ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(Chunk + 10*Block + 100)
	p := []byte("a small write in the middle of a chunk")
	if _, err := f.Write(ctx, p, off); err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	g.d.Idle()
	copy(want[off:], p)

	got := make([]byte, Block)
	if _, err := bf.Read(ctx, got, HeaderSize+2*Block); err != nil || !bytes.Equal(got, junk) {
		t.Fatalf("the small write rewrote blocks before its own (err %v)", err)
	}
	bf.Release(ctx)
	g.readBack("/f", want)
}
