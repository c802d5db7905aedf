package posix

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// newDisperseBrick is newBrick for a brick of a disperse set.
func newDisperseBrick(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	if err := Mark(dir, testVolume, true); err != nil {
		t.Fatal(err)
	}
	s, err := New(dir, Options{VolumeID: testVolume, Disperse: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// A disperse brick's writes that carry the Dirty mark and ask for it keep what they
// replace, within the file's length, at the same offsets of the inode's
// undo copy (the latest write's at each offset; zeros where none wrote,
// nothing past the end); plain writes keep nothing; the copy goes with the
// Dirty mark, and with the file.
func TestUndoCopy(t *testing.T) {
	s, dir := newDisperseBrick(t)
	dirty := layer.WithTxn(ctx, layer.Txn{Pending: layer.Dirty, SetSize: true, Size: 16, KeepUndo: true})
	f, a, err := s.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	undo := func(off int64, n int) []byte {
		t.Helper()
		p := make([]byte, n)
		got, err := layer.ReadUndo(ctx, f, p, off)
		if err != nil {
			t.Fatal(err)
		}
		return p[:got]
	}
	if _, err := f.Write(ctx, []byte("0123456789"), 0); err != nil { // no mark: nothing kept
		t.Fatal(err)
	}
	notAsked := layer.WithTxn(ctx, layer.Txn{Pending: layer.Dirty, SetSize: true, Size: 16})
	if _, err := f.Write(notAsked, []byte("0123"), 0); err != nil {
		t.Fatal(err)
	}
	if got := undo(0, 16); len(got) != 0 {
		t.Fatalf("undo copy after writes that did not ask for one: %q, want none", got)
	}
	if _, err := f.Write(dirty, []byte("abcdefgh"), 6); err != nil { // 6..9 existed
		t.Fatal(err)
	}
	if got, want := undo(0, 16), append(make([]byte, 6), "6789"...); !bytes.Equal(got, want) {
		t.Fatalf("undo copy after a write over 6..13: %q, want %q", got, want)
	}
	gw := f.(layer.GapWriter)
	if _, err := gw.WriteGap(dirty, []byte("XY"), 0, layer.Gap{At: 1, Len: 10}); err != nil { // bytes 0 and 11
		t.Fatal(err)
	}
	if got, want := undo(0, 16), []byte("0\x00\x00\x00\x00\x006789\x00f"); !bytes.Equal(got, want) {
		t.Fatalf("undo copy after a gap write of bytes 0 and 11: %q, want %q", got, want)
	}
	if err := s.ClearPending(ctx, "/f", a.Gfid, layer.Dirty, ctimeOf(t, s, "/f")); err != nil {
		t.Fatal(err)
	}
	if got := undo(0, 16); len(got) != 0 {
		t.Fatalf("undo copy after the Dirty mark was cleared: %q, want none", got)
	}
	if _, err := f.Write(dirty, []byte("again"), 0); err != nil {
		t.Fatal(err)
	}
	if got := undo(0, 16); string(got) != "X1234" {
		t.Fatalf("undo copy of a new write: %q, want %q", got, "X1234")
	}
	if err := s.Unlink(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, UndoDir)); len(ents) != 0 {
		t.Fatalf("undo copies left after the file's last name went: %v", ents)
	}
}

// ctimeOf is the ctime of path on s.
func ctimeOf(t *testing.T, s *Store, path string) layer.Timespec {
	t.Helper()
	a, err := s.Lookup(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	return a.Ctime
}
