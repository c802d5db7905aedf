package posix

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// idEntry reports whether the brick at dir has an index entry for g.
func idEntry(t *testing.T, dir string, g layer.Gfid) bool {
	t.Helper()
	_, err := os.Lstat(filepath.Join(dir, IDDir, idName(g)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func mustLookup(t *testing.T, s *Store, path string) layer.Attr {
	t.Helper()
	a, err := s.Lookup(ctx, path)
	if err != nil {
		t.Fatalf("Lookup %s: %v", path, err)
	}
	return a
}

func TestIDIndexFollowsTheNames(t *testing.T) {
	s, dir := newBrick(t, "")
	for _, d := range []string{"/a", "/b"} {
		if _, err := s.Mkdir(ctx, d, layer.MkdirIn{Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	f, attr, err := s.Create(ctx, "/a/f", layer.CreateIn{Flags: unix.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(ctx, []byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	g := attr.Gfid
	if attr.Nlink != 1 || !idEntry(t, dir, g) {
		t.Fatalf("new file: nlink %d, indexed %v; want 1, true", attr.Nlink, idEntry(t, dir, g))
	}
	byID := mustLookup(t, s, layer.IDPath(g))
	if byID.Gfid != g || byID.Size != 5 || byID.Nlink != 1 {
		t.Fatalf("lookup by id: %+v", byID)
	}
	// A link in another directory made from the id (what heal does).
	la, err := s.Link(ctx, layer.IDPath(g), "/b/g")
	if err != nil {
		t.Fatalf("link from id: %v", err)
	}
	if la.Gfid != g || la.Nlink != 2 || mustLookup(t, s, "/a/f").Nlink != 2 {
		t.Fatalf("after link: %+v", la)
	}
	r, err := s.Open(ctx, layer.IDPath(g), unix.O_RDONLY)
	if err != nil {
		t.Fatalf("open by id: %v", err)
	}
	buf := make([]byte, 16)
	n, _ := r.Read(ctx, buf, 0)
	r.Release(ctx)
	if string(buf[:n]) != "hello" {
		t.Fatalf("read by id: %q", buf[:n])
	}
	if _, err := s.Open(ctx, layer.IDPath(g), unix.O_RDWR); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("open by id for writing: %v, want ENOENT", err)
	}
	if err := s.Unlink(ctx, "/a/f"); err != nil {
		t.Fatal(err)
	}
	if a := mustLookup(t, s, layer.IDPath(g)); a.Nlink != 1 || !idEntry(t, dir, g) {
		t.Fatalf("one name left: nlink %d", a.Nlink)
	}
	// Renamed over: the replaced inode's last name goes, so does its entry.
	o, oattr, err := s.Create(ctx, "/b/h", layer.CreateIn{Flags: unix.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	o.Release(ctx)
	if err := s.Rename(ctx, "/b/h", "/b/g", 0); err != nil {
		t.Fatal(err)
	}
	if idEntry(t, dir, g) {
		t.Fatal("entry of an inode renamed over is left")
	}
	if _, err := s.Lookup(ctx, layer.IDPath(g)); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup of a removed id: %v", err)
	}
	if !idEntry(t, dir, oattr.Gfid) {
		t.Fatal("the renamed inode lost its entry")
	}
	if err := s.Unlink(ctx, "/b/g"); err != nil {
		t.Fatal(err)
	}
	if idEntry(t, dir, oattr.Gfid) {
		t.Fatal("entry left after the last name went")
	}
}

func TestIDIndexEveryKind(t *testing.T) {
	s, _ := newBrick(t, "")
	sym, err := s.Symlink(ctx, "/l", layer.SymlinkIn{Target: "nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	fifo, err := s.Mknod(ctx, "/p", layer.MknodIn{Mode: unix.S_IFIFO | 0o600})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []layer.Attr{sym, fifo} {
		if got := mustLookup(t, s, layer.IDPath(a.Gfid)); got.Mode != a.Mode || got.Nlink != 1 {
			t.Fatalf("by id: mode %o nlink %d, want %o 1", got.Mode, got.Nlink, a.Mode)
		}
	}
	if got := mustLookup(t, s, layer.IDPath(d.Gfid)); got.Gfid != d.Gfid || !got.IsDir() {
		t.Fatalf("directory by id: %+v", got)
	}
	// A link whose source is the symlink by its id links the symlink.
	if a, err := s.Link(ctx, layer.IDPath(sym.Gfid), "/d/l2"); err != nil || a.Mode != sym.Mode || a.Nlink != 2 {
		t.Fatalf("link a symlink by id: %+v %v", a, err)
	}
}

func TestIDPathsRefused(t *testing.T) {
	s, _ := newBrick(t, "")
	_, attr, err := s.Create(ctx, "/f", layer.CreateIn{Flags: unix.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	good := layer.IDPath(attr.Gfid)
	for _, p := range []string{"/.mortar/gfid/zz", "/.mortar/gfid/" + attr.Gfid.String()[:8],
		"/.mortar/gfid/" + idName(attr.Gfid), layer.IDPath(layer.RootGfid), good + "/x"} {
		if _, err := s.Lookup(ctx, p); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("Lookup %s: %v, want ENOENT", p, err)
		}
	}
	if _, err := s.Mknod(ctx, good, layer.MknodIn{Mode: 0o644}); err == nil {
		t.Error("made an inode at an id path")
	}
	if err := s.Unlink(ctx, good); err == nil {
		t.Error("unlinked an id path")
	}
	if err := s.Rename(ctx, good, "/g", 0); err == nil {
		t.Error("renamed an id path")
	}
	if _, err := s.Setattr(ctx, good, layer.SetattrIn{Valid: layer.SetMode, Mode: 0o600}); err == nil {
		t.Error("changed an inode through its id path")
	}
}

// A brick made before the index (or left by a crash) gets every inode
// indexed when it starts, hard links counted right, orphans removed.
func TestIDIndexMadeWholeAtStart(t *testing.T) {
	s, dir := newBrick(t, "")
	_, attr, err := s.Create(ctx, "/f", layer.CreateIn{Flags: unix.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	_, oattr, err := s.Create(ctx, "/orphan", layer.CreateIn{Flags: unix.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// As a brick made before the index: no entries, no version; an inode
	// put there by hand with two names; an orphan entry (a crash between
	// a removal and its entry's).
	if err := os.Remove(filepath.Join(dir, IDDir, idName(attr.Gfid))); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "orphan")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Removexattr(filepath.Join(dir, IDDir), xattrIDsVersion); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "f"), filepath.Join(dir, "f2")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "byhand"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "d1", "d2"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err = New(dir, Options{VolumeID: testVolume})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !idEntry(t, dir, attr.Gfid) || idEntry(t, dir, oattr.Gfid) {
		t.Fatalf("indexed: f %v (want true), orphan %v (want false)", idEntry(t, dir, attr.Gfid), idEntry(t, dir, oattr.Gfid))
	}
	if a := mustLookup(t, s, "/f2"); a.Nlink != 2 || a.Gfid != attr.Gfid {
		t.Fatalf("hard link after indexing: %+v", a)
	}
	h := mustLookup(t, s, "/byhand")
	if h.Nlink != 1 || mustLookup(t, s, layer.IDPath(h.Gfid)).Gfid != h.Gfid {
		t.Fatalf("a file made by hand: %+v", h)
	}
	d2 := mustLookup(t, s, "/d1/d2")
	if got := mustLookup(t, s, layer.IDPath(d2.Gfid)); got.Gfid != d2.Gfid || !got.IsDir() {
		t.Fatalf("a directory made by hand, by id: %+v", got)
	}
	added, removed, err := s.CheckIDs()
	if err != nil || added != 0 || removed != 0 {
		t.Fatalf("second check: added %d removed %d err %v, want 0 0 nil", added, removed, err)
	}
}

// A rename onto an inode's own id parks it: the name goes, the inode
// stays reachable by its id until a link gives it a name again, or the
// brick's next start removes it.
func TestParkKeepsTheInodeByItsID(t *testing.T) {
	s, dir := newBrick(t, "")
	_, a, err := s.Create(ctx, "/f", layer.CreateIn{Flags: unix.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := s.Create(ctx, "/other", layer.CreateIn{Flags: unix.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(ctx, "/f", layer.IDPath(b.Gfid), 0); !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("park under another inode's id: %v, want EXDEV", err)
	}
	if err := s.Rename(ctx, "/f", layer.IDPath(a.Gfid), 0); err != nil {
		t.Fatalf("park: %v", err)
	}
	if _, err := s.Lookup(ctx, "/f"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("parked name: %v, want ENOENT", err)
	}
	if got := mustLookup(t, s, layer.IDPath(a.Gfid)); got.Gfid != a.Gfid {
		t.Fatalf("parked inode by id: %+v", got)
	}
	if _, err := s.Link(ctx, layer.IDPath(a.Gfid), "/g"); err != nil {
		t.Fatal(err)
	}
	if got := mustLookup(t, s, "/g"); got.Gfid != a.Gfid || got.Nlink != 1 {
		t.Fatalf("linked back: %+v", got)
	}
	// Parked again and never linked: gone at the next start.
	if err := s.Rename(ctx, "/g", layer.IDPath(a.Gfid), 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = New(dir, Options{VolumeID: testVolume})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	<-s.Swept()
	if idEntry(t, dir, a.Gfid) || !idEntry(t, dir, b.Gfid) {
		t.Fatalf("after a restart: parked entry kept %v (want false), named entry kept %v (want true)",
			idEntry(t, dir, a.Gfid), idEntry(t, dir, b.Gfid))
	}
}

// Directories are found by id wherever renames took them (their entries
// name their parent and their name), and lose their entry with rmdir.
func TestIDIndexDirectories(t *testing.T) {
	s, dir := newBrick(t, "")
	a, err := s.Mkdir(ctx, "/a", layer.MkdirIn{Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Mkdir(ctx, "/a/b", layer.MkdirIn{Mode: 0o700})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Mkdir(ctx, "/z", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	f, fa, err := s.Create(ctx, "/a/b/f", layer.CreateIn{Flags: unix.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	// The parent renamed into another directory: b is found below it.
	if err := s.Rename(ctx, "/a", "/z/a2", 0); err != nil {
		t.Fatal(err)
	}
	for _, g := range []layer.Gfid{a.Gfid, b.Gfid, fa.Gfid} {
		if got := mustLookup(t, s, layer.IDPath(g)); got.Gfid != g {
			t.Fatalf("by id after a rename of an ancestor: %+v, want %s", got, g)
		}
	}
	if p, err := s.dirPath(b.Gfid); err != nil || p != "/z/a2/b" {
		t.Fatalf("path of b: %q %v", p, err)
	}
	// Heal asks for it by the directory's id (layer.XattrPath).
	if p, err := s.Getxattr(ctx, layer.IDPath(b.Gfid), layer.XattrPath); err != nil || string(p) != "/z/a2/b" {
		t.Fatalf("XattrPath of b: %q %v", p, err)
	}
	if _, err := s.Getxattr(ctx, layer.IDPath(fa.Gfid), layer.XattrPath); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("XattrPath of a file: %v, want ENOENT", err)
	}
	if _, err := s.Getxattr(ctx, "/z/a2/b", layer.XattrPath); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("XattrPath by a path: %v, want EINVAL", err)
	}
	// A brick restart keeps directory entries (they are no orphans).
	s.Close()
	if s, err = New(dir, Options{VolumeID: testVolume}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	<-s.Swept()
	if got := mustLookup(t, s, layer.IDPath(b.Gfid)); got.Gfid != b.Gfid {
		t.Fatalf("b by id after a restart: %+v", got)
	}
	if err := s.Unlink(ctx, "/z/a2/b/f"); err != nil {
		t.Fatal(err)
	}
	if err := s.Rmdir(ctx, "/z/a2/b"); err != nil {
		t.Fatal(err)
	}
	if idEntry(t, dir, b.Gfid) {
		t.Fatal("entry of a removed directory left")
	}
	if _, err := s.Lookup(ctx, layer.IDPath(b.Gfid)); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("removed directory by id: %v", err)
	}
	// A directory renamed over an empty one: the one replaced loses its
	// entry, the moved one's names where it went.
	e, err := s.Mkdir(ctx, "/empty", layer.MkdirIn{Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(ctx, "/z/a2", "/empty", 0); err != nil {
		t.Fatal(err)
	}
	if idEntry(t, dir, e.Gfid) {
		t.Fatal("entry of a directory renamed over left")
	}
	if p, err := s.dirPath(a.Gfid); err != nil || p != "/empty" {
		t.Fatalf("path of a: %q %v", p, err)
	}
}

// A directory made on the brick by hand gets its entry when a lookup
// first gives it a gfid (clients look up a path's components in order).
func TestIDIndexDirectoryMadeByHand(t *testing.T) {
	s, dir := newBrick(t, "")
	if err := os.MkdirAll(filepath.Join(dir, "h1", "h2"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustLookup(t, s, "/h1")
	h2 := mustLookup(t, s, "/h1/h2")
	if got := mustLookup(t, s, layer.IDPath(h2.Gfid)); got.Gfid != h2.Gfid {
		t.Fatalf("by id: %+v", got)
	}
}

// A rename that names the inode it moves (layer.SourceRenamer) refuses
// with ESTALE, changing nothing, when oldpath is another inode (a stale
// name, on a replica that missed a change of it); naming the inode there,
// or none, renames.
func TestRenameSourceRefusesAnotherInode(t *testing.T) {
	s, _ := newBrick(t, "")
	_, a, err := s.Create(ctx, "/f", layer.CreateIn{Flags: unix.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	other := layer.NewGfid()
	if err := s.RenameSource(ctx, "/f", "/g", 0, other); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("rename naming another inode: %v, want ESTALE", err)
	}
	if got := mustLookup(t, s, "/f"); got.Gfid != a.Gfid {
		t.Fatalf("after the refusal /f is %+v", got)
	}
	if _, err := s.Lookup(ctx, "/g"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("after the refusal /g: %v, want ENOENT", err)
	}
	if err := s.RenameSource(ctx, "/f", "/g", 0, a.Gfid); err != nil {
		t.Fatalf("rename naming the inode: %v", err)
	}
	if err := s.RenameSource(ctx, "/g", "/h", 0, layer.Gfid{}); err != nil {
		t.Fatalf("rename naming none: %v", err)
	}
	if got := mustLookup(t, s, "/h"); got.Gfid != a.Gfid {
		t.Fatalf("renamed twice: %+v", got)
	}
}

// A brick holds a directory under one name: a mkdir with the gfid of a
// directory it holds elsewhere is refused (EEXIST). A replica client
// made a half-renamed directory again under its old name on the replica
// that held it under the new one (undoing a rename it took for one that
// replaced the directory), and the brick held two directories of one
// gfid, names made in each (sim disperse2+1x2-dirs seed 62).
func TestMkdirOfADirectoryHeldElsewhereRefused(t *testing.T) {
	s, _ := newBrick(t, "")
	a, err := s.Mkdir(ctx, "/a", layer.MkdirIn{Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Mkdir(ctx, "/b", layer.MkdirIn{Owner: layer.Owner{Gfid: a.Gfid}, Mode: 0o755}); !errors.Is(err, unix.EEXIST) {
		t.Fatalf("mkdir /b with /a's gfid: %v, want EEXIST", err)
	}
	if _, err := s.Lookup(ctx, "/b"); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("/b after a refused mkdir: %v", err)
	}
	// Once /a is gone, its gfid may be given again (heal makes a
	// directory a sink lacks with the good copies' gfid).
	if err := s.Rmdir(ctx, "/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Mkdir(ctx, "/b", layer.MkdirIn{Owner: layer.Owner{Gfid: a.Gfid}, Mode: 0o755}); err != nil {
		t.Fatalf("mkdir /b with the gfid of a removed directory: %v", err)
	}
}

// A rename of a file done here forgets its record of an earlier rename
// done by too few replicas (layer.XattrRenamed); parking it (a rename
// onto its id, by heal) keeps the record, which heal reads after.
func TestRenameForgetsAnEarlierRenameRecord(t *testing.T) {
	s, _ := newBrick(t, "")
	f, a, err := s.Create(ctx, "/f", layer.CreateIn{Flags: unix.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	rec := layer.RenameRecord{From: "/e", To: "/f"}.Encode()
	if err := s.Setxattr(ctx, "/f", layer.XattrRenamed, rec, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(ctx, "/f", layer.IDPath(a.Gfid), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Getxattr(ctx, layer.IDPath(a.Gfid), layer.XattrRenamed); err != nil || string(v) != string(rec) {
		t.Fatalf("record after parking: %q, %v", v, err)
	}
	if _, err := s.Link(ctx, layer.IDPath(a.Gfid), "/g"); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(ctx, "/g", "/h", 0); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Getxattr(ctx, "/h", layer.XattrRenamed); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("record after a later rename: %q, %v; want ENODATA", v, err)
	}
}
