package readahead

import (
	"bytes"
	"context"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
	"github.com/mortarfs/mortar/layer/locks"
)

const vol = "readahead-test-volume"

// counting counts reads that reach the storage.
type counting struct {
	layer.Base
	reads chan int64
}

type countingFile struct {
	layer.File
	c *counting
}

func (c *counting) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	f, err := c.Child.Open(ctx, path, flags)
	if err != nil {
		return nil, err
	}
	return countingFile{f, c}, nil
}

func (f countingFile) Read(ctx context.Context, p []byte, off int64) (int, error) {
	f.c.reads <- off
	return f.File.Read(ctx, p, off)
}

func newStore(t *testing.T) *posix.Store {
	t.Helper()
	dir := t.TempDir()
	if err := posix.Mark(dir, vol, true); err != nil {
		t.Fatal(err)
	}
	st, err := posix.New(dir, posix.Options{VolumeID: vol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestConformance(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer { return New(newStore(t)) })
}

func TestLocksConformance(t *testing.T) {
	layertest.RunLocks(t, func(t *testing.T) layer.Layer { return New(locks.New(newStore(t))) })
}

func fill(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i/4096)
	}
	return b
}

// Sequential direct reads are served from blocks read ahead, and a write
// through another open file (another client) is never hidden by them.
func TestSequentialReadAheadAndCoherence(t *testing.T) {
	st := newStore(t)
	c := &counting{Base: layer.Base{Child: st}, reads: make(chan int64, 100)}
	l := New(c)
	ctx := context.Background()
	const block = 64 << 10
	w, _, err := l.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(ctx)
	old := fill(4*block, 1)
	if _, err := w.Write(ctx, old, 0); err != nil {
		t.Fatal(err)
	}
	r, err := l.Open(ctx, "/f", syscall.O_RDONLY|syscall.O_DIRECT)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	buf := make([]byte, block)
	read := func(off int64) []byte {
		t.Helper()
		if n, err := r.Read(ctx, buf, off); err != nil || n != block {
			t.Fatalf("read at %d: %d, %v", off, n, err)
		}
		return buf
	}
	// Block 0 is read on demand; it is the first read, not "sequential".
	read(0)
	if got := <-c.reads; got != 0 {
		t.Fatalf("first storage read at %d", got)
	}
	// Block 1 is sequential: read on demand, and block 2 ahead.
	read(block)
	<-c.reads
	if got := <-c.reads; got != 2*block {
		t.Fatalf("read-ahead at %d, want %d", got, 2*block)
	}
	// Block 2 comes from the read-ahead (no storage read at its offset)
	// and triggers block 3.
	if !bytes.Equal(read(2*block), old[2*block:3*block]) {
		t.Fatal("block 2 from read-ahead differs")
	}
	if got := <-c.reads; got != 3*block {
		t.Fatalf("next read-ahead at %d, want %d", got, 3*block)
	}
	// Another file rewrites block 3 after it was read ahead: the reader
	// must see the new data.
	fresh := fill(block, 99)
	if _, err := w.Write(ctx, fresh, 3*block); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(3*block), fresh) {
		t.Fatal("a block read ahead hid a later write")
	}
}
