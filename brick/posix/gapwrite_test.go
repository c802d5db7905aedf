package posix

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// WriteGap writes the data on both sides of the gap and leaves the gap as
// it was, with one pending mark; a gap past the data is refused.
func TestWriteGap(t *testing.T) {
	s, dir := newBrick(t, "")
	f, _, err := s.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	if _, err := f.Write(ctx, bytes.Repeat([]byte("."), 20), 0); err != nil {
		t.Fatal(err)
	}
	gw := f.(layer.GapWriter)
	wctx := layer.WithTxn(ctx, layer.Txn{Pending: 2})
	if n, err := gw.WriteGap(wctx, []byte("abcXYZ"), 2, layer.Gap{At: 3, Len: 5}); n != 6 || err != nil {
		t.Fatalf("WriteGap: %d, %v", n, err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "f"))
	if err != nil || string(got) != "..abc.....XYZ......." {
		t.Fatalf("file holds %q, %v", got, err)
	}
	if a, err := f.Getattr(ctx); err != nil || a.Pending != 2 {
		t.Fatalf("pending %b, %v; want the Txn's mark", a.Pending, err)
	}
	if _, err := gw.WriteGap(ctx, []byte("ab"), 0, layer.Gap{At: 3, Len: 1}); err != syscall.EINVAL {
		t.Fatalf("a gap past the data: %v, want EINVAL", err)
	}
}
