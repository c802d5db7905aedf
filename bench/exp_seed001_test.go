package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestSeed001Sizes(t *testing.T) {
	if got := seed001Sizes(true); !slices.Equal(got, []int{2, 16, 64}) {
		t.Errorf("quick sizes %v", got)
	}
	full := seed001Sizes(false)
	if len(full) != 8 || full[0] != 2 || full[7] != 256 {
		t.Errorf("full sizes %v: want 2^1..2^8 MiB", full)
	}
}

func TestWriteReadSeq(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "f")
	const size = 3<<20 + 12345 // not a whole number of records
	if err := writeSeq(ctx, path, size, true); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != size {
		t.Fatalf("size after write: %v %v", st, err)
	}
	// A rewrite keeps the file's length and content size.
	if err := writeSeq(ctx, path, size, false); err != nil {
		t.Fatal(err)
	}
	if err := readSeq(ctx, path, size); err != nil {
		t.Fatal(err)
	}
	if err := readSeq(ctx, path, size+1); err == nil {
		t.Error("readSeq of a short file did not fail")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := writeSeq(cctx, path, size, false); err == nil {
		t.Error("writeSeq ignored a cancelled context")
	}
}

// TestIozoneFile runs the four operations on a small file on the local
// disk; dropping caches needs root.
func TestIozoneFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("dropping caches needs root")
	}
	rates, err := iozoneFile(context.Background(), filepath.Join(t.TempDir(), "f"), 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range rates {
		if v <= 0 {
			t.Errorf("%s: %v MB/s", seed001Ops[i], v)
		}
	}
}
