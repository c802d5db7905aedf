package posix

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// migCmd sends a migration command for the inode at path (gfid g).
func migCmd(s *Store, path, cmd string, g layer.Gfid, extra ...string) error {
	v := cmd + " " + g.String()
	for _, e := range extra {
		v += " " + e
	}
	return s.Setxattr(ctx, path, XattrMigrate, []byte(v), 0)
}

// migFile makes /f with content "hello" and returns it open read-write.
func migFile(t *testing.T, s *Store) (layer.File, layer.Gfid) {
	t.Helper()
	f, a, err := s.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Release(ctx) })
	if _, err := f.Write(ctx, []byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	return f, a.Gfid
}

// goWrite writes p at off through f in the background.
func goWrite(f layer.File, p string, off int64) chan error {
	done := make(chan error, 1)
	go func() {
		_, err := f.Write(ctx, []byte(p), off)
		done <- err
	}()
	return done
}

// held checks that a write is still blocked: it must not finish while the
// brick is asked something else (a round of its own locks) and a short
// grace passes.
func held(t *testing.T, done chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("write not held by the freeze: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestMigrateFreezeHoldsWrites(t *testing.T) {
	s, _ := newBrick(t, "")
	f, g := migFile(t, s)
	if err := migCmd(s, "/f", "watch", g); err != nil {
		t.Fatal(err)
	}
	if err := migCmd(s, "/f", "freeze", g); err != nil {
		t.Fatalf("freeze of an unchanged file: %v", err)
	}
	done := goWrite(f, "HE", 0)
	held(t, done)
	// Reads go on.
	buf := make([]byte, 5)
	if n, err := f.Read(ctx, buf, 0); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read while frozen: %q %v", buf[:n], err)
	}
	// A path truncate is held too.
	tr := make(chan error, 1)
	go func() {
		_, err := s.Setattr(ctx, "/f", layer.SetattrIn{Valid: layer.SetSize, Size: 1})
		tr <- err
	}()
	held(t, tr)
	if err := migCmd(s, "/f", "thaw", g); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("write after thaw: %v", err)
	}
	if err := <-tr; err != nil {
		t.Fatalf("truncate after thaw: %v", err)
	}
}

func TestMigrateFreezeSeesChanges(t *testing.T) {
	s, _ := newBrick(t, "")
	f, g := migFile(t, s)
	if err := migCmd(s, "/f", "freeze", g); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("freeze without watch: %v, want ESTALE", err)
	}
	migCmd(s, "/f", "thaw", g)
	migCmd(s, "/f", "watch", g)
	if _, err := f.Write(ctx, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := migCmd(s, "/f", "freeze", g); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("freeze after a write: %v, want ESTALE", err)
	}
	migCmd(s, "/f", "thaw", g)
	if err := migCmd(s, "/f", "watch", layer.NewGfid()); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("watch with another gfid: %v, want ESTALE", err)
	}
	if _, err := s.Link(ctx, "/f", "/g"); err != nil {
		t.Fatal(err)
	}
	migCmd(s, "/f", "watch", g)
	if err := migCmd(s, "/f", "freeze", g); !errors.Is(err, syscall.EMLINK) {
		t.Fatalf("freeze of a file with two links: %v, want EMLINK", err)
	}
	migCmd(s, "/f", "thaw", g)
}

func TestMigrateFreezeExpires(t *testing.T) {
	dir := t.TempDir()
	if err := Mark(dir, testVolume, true); err != nil {
		t.Fatal(err)
	}
	s, err := New(dir, Options{VolumeID: testVolume, FreezeTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, g := migFile(t, s)
	migCmd(s, "/f", "watch", g)
	if err := migCmd(s, "/f", "freeze", g); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case err := <-goWrite(f, "HE", 0):
		if err != nil {
			t.Fatalf("write after the freeze expired: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("freeze never expired")
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("write not held at all")
	}
	if err := migCmd(s, "/f", "moved", g, "b9"); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("moved after the freeze expired: %v, want ESTALE", err)
	}
}

func TestMigrateMoved(t *testing.T) {
	s, dir := newBrick(t, "")
	f, g := migFile(t, s)
	migCmd(s, "/f", "watch", g)
	if err := migCmd(s, "/f", "moved", g, "b9"); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("moved without freeze: %v, want ESTALE", err)
	}
	if err := migCmd(s, "/f", "freeze", g); err != nil {
		t.Fatal(err)
	}
	done := goWrite(f, "HE", 0)
	held(t, done)
	if err := migCmd(s, "/f", "moved", g, "b9"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, syscall.EREMOTE) {
		t.Fatalf("held write after move: %v, want EREMOTE", err)
	}
	if _, err := f.Read(ctx, make([]byte, 5), 0); !errors.Is(err, syscall.EREMOTE) {
		t.Fatalf("read after move: %v, want EREMOTE", err)
	}
	if _, err := f.Write(ctx, []byte("x"), 0); !errors.Is(err, syscall.EREMOTE) {
		t.Fatalf("write after move: %v, want EREMOTE", err)
	}
	if err := f.Fsync(ctx, false); !errors.Is(err, syscall.EREMOTE) {
		t.Fatalf("fsync after move: %v, want EREMOTE", err)
	}
	a, err := f.Getattr(ctx)
	if err != nil || a.Linkto != "b9" || a.Gfid != g || a.Size != 0 {
		t.Fatalf("getattr after move: %+v %v", a, err)
	}
	// The name went with the move: the file is where it moved.
	if _, err := s.Open(ctx, "/f", syscall.O_RDONLY); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("open after move: %v, want ENOENT", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("name on disk after move: %v", err)
	}
	// The entry goes once the file is closed.
	f.Release(ctx)
	s.mig.mu.Lock()
	n := len(s.mig.m)
	s.mig.mu.Unlock()
	if n != 0 || s.mig.active.Load() != 0 {
		t.Fatalf("registry not empty: %d entries, %d active", n, s.mig.active.Load())
	}
}

func TestMigrateBadCommands(t *testing.T) {
	s, _ := newBrick(t, "")
	_, g := migFile(t, s)
	for _, v := range []string{"", "watch", "bogus " + g.String(), "watch nothex", "moved " + g.String()} {
		if err := s.Setxattr(ctx, "/f", XattrMigrate, []byte(v), 0); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("command %q: %v, want EINVAL", v, err)
		}
	}
	if _, err := s.Getxattr(ctx, "/f", XattrMigrate); err == nil {
		t.Error("migrate xattr readable")
	}
	if err := migCmd(s, "/", "watch", layer.RootGfid); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("watch of the root: %v", err)
	}
}

// A file with several names moves with all of them: the freeze and the
// move expect their number, the move lists them, and the operations on
// them the freeze holds (a link, a rename away or over one, an unlink)
// then answer EREMOTE, having done nothing; the names are gone.
func TestMigrateMovesEveryName(t *testing.T) {
	s, dir := newBrick(t, "")
	_, g := migFile(t, s)
	if _, err := s.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/g", "/d/h"} {
		if _, err := s.Link(ctx, "/f", p); err != nil {
			t.Fatal(err)
		}
	}
	other, _, err := s.Create(ctx, "/o", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	other.Release(ctx)
	migCmd(s, "/f", "watch", g)
	if err := migCmd(s, "/f", "freeze", g); !errors.Is(err, syscall.EMLINK) {
		t.Fatalf("freeze expecting one name: %v, want EMLINK", err)
	}
	if err := migCmd(s, "/f", "freeze", g, "3"); err != nil {
		t.Fatal(err)
	}
	ops := map[string]func() error{
		"unlink /g":        func() error { return s.Unlink(ctx, "/g") },
		"rename /d/h /d/x": func() error { return s.Rename(ctx, "/d/h", "/d/x", 0) },
		"rename /o /g":     func() error { return s.Rename(ctx, "/o", "/g", 0) },
		"link /f /y":       func() error { _, err := s.Link(ctx, "/f", "/y"); return err },
	}
	results := map[string]chan error{}
	for name, op := range ops {
		results[name] = make(chan error, 1)
		go func() { results[name] <- op() }()
	}
	for name, ch := range results {
		select {
		case err := <-ch:
			t.Fatalf("%s not held by the freeze: %v", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	enc := func(paths ...string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, base64.RawURLEncoding.EncodeToString([]byte(p)))
		}
		return out
	}
	if err := migCmd(s, "/f", "moved", g, append([]string{"b9", "3"}, enc("/f", "/g")...)...); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("moved listing 2 of 3 names: %v, want EINVAL", err)
	}
	if err := migCmd(s, "/f", "moved", g, append([]string{"b9", "3"}, enc("/f", "/g", "/o")...)...); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("moved listing another file's name: %v, want ESTALE", err)
	}
	if err := migCmd(s, "/f", "moved", g, append([]string{"b9", "3"}, enc("/f", "/g", "/d/h")...)...); err != nil {
		t.Fatal(err)
	}
	for name, ch := range results {
		if err := <-ch; !errors.Is(err, syscall.EREMOTE) {
			t.Errorf("%s after the move: %v, want EREMOTE", name, err)
		}
	}
	for _, p := range []string{"f", "g", "d/h", "d/x", "y"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after the move: %v, want gone", p, err)
		}
	}
	if a, err := s.Lookup(ctx, "/o"); err != nil || a.Linkto != "" {
		t.Errorf("/o, which a held rename would have moved: %+v %v", a, err)
	}
}
