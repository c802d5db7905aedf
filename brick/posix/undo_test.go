package posix

import (
	"bytes"
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
// undo copy (the latest write's at each offset; zeros where none wrote;
// nothing at all where no write kept anything); plain writes keep
// nothing; the copy goes with the Dirty mark, and with the file.
func TestUndoCopy(t *testing.T) {
	s, _ := newDisperseBrick(t)
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
	if got, want := undo(0, 16), pad(append(make([]byte, 6), "6789"...)); !bytes.Equal(got, want) {
		t.Fatalf("undo copy after a write over 6..13: %q, want %q", got, want)
	}
	gw := f.(layer.GapWriter)
	if _, err := gw.WriteGap(dirty, []byte("XY"), 0, layer.Gap{At: 1, Len: 10}); err != nil { // bytes 0 and 11
		t.Fatal(err)
	}
	if got, want := undo(0, 16), pad([]byte("0\x00\x00\x00\x00\x006789\x00f")); !bytes.Equal(got, want) {
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
	if got, want := undo(0, 16), pad([]byte("X1234")); !bytes.Equal(got, want) {
		t.Fatalf("undo copy of a new write: %q, want %q", got, want)
	}
	if err := s.Unlink(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	if got := undo(0, 16); len(got) != 0 {
		t.Fatalf("undo copy after the file's last name went: %q, want none", got)
	}
}

// pad is b with zeros to 16 bytes, as an undo copy reads where nothing
// was kept.
func pad(b []byte) []byte { return append(b, make([]byte, 16-len(b))...) }

// ctimeOf is the ctime of path on s.
func ctimeOf(t *testing.T, s *Store, path string) layer.Timespec {
	t.Helper()
	a, err := s.Lookup(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	return a.Ctime
}

// Over its budget the keeper forgets the oldest pieces first, so what the
// latest writes replaced stays; forgetting an inode drops its pieces.
func TestUndoKeeperBudget(t *testing.T) {
	k := undoKeeper{budget: 3 * 4096}
	a, b := layer.NewGfid(), layer.NewGfid()
	piece := func(c byte) []byte { return bytes.Repeat([]byte{c}, 4096) }
	k.keep(a, 0, piece('1'))
	k.keep(b, 0, piece('2'))
	k.keep(a, 4096, piece('3'))
	k.keep(a, 8192, piece('4')) // over budget: a's first piece goes
	p := make([]byte, 3*4096)
	if n := k.read(a, p, 0); n != len(p) || !bytes.Equal(p, append(append(make([]byte, 4096), piece('3')...), piece('4')...)) {
		t.Fatalf("a after the budget was passed: %d bytes, %q...", n, p[:8])
	}
	k.forget(a)
	if n := k.read(a, p, 0); n != 0 {
		t.Fatalf("a forgotten: read %d bytes", n)
	}
	if n := k.read(b, p[:4096], 0); n != 4096 || !bytes.Equal(p[:4096], piece('2')) {
		t.Fatalf("b: %d bytes, %q...", n, p[:8])
	}
	if k.live != 1 || k.bytes != 4096 {
		t.Fatalf("kept %d pieces, %d bytes; want 1, 4096", k.live, k.bytes)
	}
}
