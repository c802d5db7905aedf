package posix

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// Names removed by operations some replicas miss (unlink, rmdir, a
// rename's source and the inode it replaced) are recorded for their
// directory; names removed with every replica there are not; the records
// go with the directory's last mark, and with the directory.
func TestRemovalRecords(t *testing.T) {
	s, dir := newBrick(t, "")
	missed := layer.WithTxn(ctx, layer.Txn{Pending: 4})
	gfid := func(p string) layer.Gfid {
		t.Helper()
		a, err := s.Lookup(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return a.Gfid
	}
	if _, err := s.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/d/f", "/d/g", "/d/h", "/d/k", "/d/both"} {
		f, _, err := s.Create(ctx, p, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		f.Release(ctx)
	}
	if _, err := s.Mkdir(ctx, "/d/sub", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	rm := func(name string) layer.Removal { return layer.Removal{Name: name, Gfid: gfid("/d/" + name)} }
	want := []layer.Removal{rm("f"), rm("sub"), rm("g"), rm("k")}
	if err := s.Unlink(ctx, "/d/both"); err != nil { // every replica: not recorded
		t.Fatal(err)
	}
	if err := s.Unlink(missed, "/d/f"); err != nil {
		t.Fatal(err)
	}
	if err := s.Rmdir(missed, "/d/sub"); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(missed, "/d/g", "/d/k", 0); err != nil { // g goes, and k's inode
		t.Fatal(err)
	}
	got, err := s.Removed(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("removal records of /d: %v; want %v", got, want)
	}
	if got, err := s.Removed(ctx, "/"); err != nil || len(got) != 0 {
		t.Fatalf("removal records of /: %v, %v; want none", got, err)
	}
	a, err := s.Lookup(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ClearPending(ctx, "/d", a.Gfid, 4, a.Ctime); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Removed(ctx, "/d"); err != nil || len(got) != 0 {
		t.Fatalf("removal records of /d once its marks are cleared: %v, %v; want none", got, err)
	}
	if err := s.Unlink(missed, "/d/h"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlink(ctx, "/d/k"); err != nil {
		t.Fatal(err)
	}
	if err := s.Rmdir(ctx, "/d"); err != nil {
		t.Fatal(err)
	}
	if left, err := os.ReadDir(filepath.Join(dir, RemovedDir)); err != nil || len(left) != 0 {
		t.Fatalf("removal records left after their directory went: %v, %v", left, err)
	}
}

// A removal that blames no replica is recorded all the same in a
// directory that already blames one: a replica sent it may be found to
// have missed it only from its answer, and be marked after the fact
// (sim disperse2+1 seed 85).
func TestRemovalRecordedWhereTheDirectoryBlames(t *testing.T) {
	s, _ := newBrick(t, "")
	if _, err := s.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/d/f", "/d/g"} {
		f, _, err := s.Create(ctx, p, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		f.Release(ctx)
	}
	if err := s.Unlink(ctx, "/d/f"); err != nil { // the directory blames none: not recorded
		t.Fatal(err)
	}
	a, err := s.Lookup(ctx, "/d/g")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkPending(ctx, "/d", layer.Gfid{}, 1<<2); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlink(ctx, "/d/g"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Removed(ctx, "/d")
	if want := []layer.Removal{{Name: "g", Gfid: a.Gfid}}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("removal records of /d: %v, %v; want %v", got, err, want)
	}
}
