package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// layouts are the volume types the create-behind tests run on: a
// replicated set, where every brick holds the file, and a dispersed one,
// where each holds its fragment.
var layouts = []struct {
	name     string
	bricks   int
	keywords []string
}{
	{"replica3", 3, []string{"replica", "3"}},
	{"disperse4+2", 6, []string{"disperse", "6", "redundancy", "2"}},
}

// Create-behind on two mounts of one volume: files written in a
// directory mount a made are seen at once, content and all, by mount b
// (its access recalls a's lease, which sends what a held back first),
// even while a keeps them open; O_EXCL stays exclusive across the mounts;
// a shell's redirect and tar work; fsync of a directory puts the names
// made in it on the bricks.
func TestCreateBehindTwoMounts(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) { createBehindTwoMounts(t, l.bricks, l.keywords) })
	}
}

func createBehindTwoMounts(t *testing.T, nbricks int, keywords []string) {
	n := startNode(t)
	bricks := n.createVolume("cb", nbricks, keywords, nil)
	a, b := n.mount("cb"), n.mount("cb")

	// Written and closed on a, read on b at once.
	for _, dir := range []string{"d1", "d2"} {
		if err := os.Mkdir(filepath.Join(a, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			name := filepath.Join(dir, fmt.Sprint("f", i))
			want := fmt.Sprintf("content of %s\n", name)
			if err := os.WriteFile(filepath.Join(a, name), []byte(want), 0o640); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(b, name))
			if err != nil || string(got) != want {
				t.Fatalf("b reads %s right after a wrote it: %q, %v", name, got, err)
			}
		}
	}

	// Written on a and kept open: b sees it with what was written.
	if err := os.Mkdir(filepath.Join(a, "open"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(a, "open", "f"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("still open"); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(b, "open", "f")); err != nil || string(got) != "still open" {
		t.Fatalf("b reads a file a holds open: %q, %v", got, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	// A lock file: a made it (and holds it open), b's exclusive create
	// fails.
	if err := os.Mkdir(filepath.Join(a, "locks"), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(a, "locks", "lock"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := os.OpenFile(filepath.Join(b, "locks", "lock"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("b's exclusive create of a's lock file: %v, want EEXIST", err)
	}

	// The shell's `echo > f` (dup2, close, write, close).
	if err := os.Mkdir(filepath.Join(a, "sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	sh(t, filepath.Join(a, "sh"), `for i in 1 2 3 4 5; do echo "line $i" > f$i; done`)
	for i := 1; i <= 5; i++ {
		if got, err := os.ReadFile(filepath.Join(b, "sh", fmt.Sprint("f", i))); err != nil || string(got) != fmt.Sprintf("line %d\n", i) {
			t.Fatalf("b reads sh/f%d: %q, %v", i, got, err)
		}
	}

	// tar x on a, the same tree on b.
	src := t.TempDir()
	for i := range 30 {
		d := filepath.Join(src, "t", fmt.Sprint("d", i%4))
		os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprint("f", i)), []byte(fmt.Sprint("tar file ", i)), 0o604); err != nil {
			t.Fatal(err)
		}
	}
	tarball := filepath.Join(t.TempDir(), "t.tar")
	sh(t, src, "tar cf "+tarball+" t")
	sh(t, a, "tar xf "+tarball)
	if got := sh(t, b, "find t -type f | sort | xargs cat | md5sum; find t | sort | xargs stat -c '%n %a %s %Y'"); got !=
		sh(t, src, "find t -type f | sort | xargs cat | md5sum; find t | sort | xargs stat -c '%n %a %s %Y'") {
		t.Fatalf("the tree b sees differs from the one a untarred:\n%s", got)
	}

	// Removals answered before they are sent (unlink-behind, in a
	// directory a made and still leases): b's listing right after sees
	// them done, and so do the bricks once rm -rf has removed the tree
	// (its rmdirs wait for them). tar sets a directory's times last:
	// a keeps the lease across that.
	if err := os.Mkdir(filepath.Join(a, "rm"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(a, "rm", fmt.Sprint("f", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 15 {
		if err := os.Remove(filepath.Join(a, "rm", fmt.Sprint("f", i))); err != nil {
			t.Fatal(err)
		}
	}
	if ents, err := os.ReadDir(filepath.Join(b, "rm")); err != nil || len(ents) != 5 {
		t.Fatalf("b lists %d names in rm/ after a removed 15 of 20: %v", len(ents), err)
	}
	sh(t, a, "mkdir u && tar xf "+tarball+" -C u && rm -rf u")
	for _, br := range bricks {
		if _, err := os.Lstat(filepath.Join(br, "u")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after rm -rf on a, brick %s still has u: %v", br, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(b, "u")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("b after a's rm -rf of u: %v", err)
	}

	// fsync of a directory: an empty file made in it (no O_EXCL, still
	// open, nothing written: a close would not send it) is on the bricks.
	if err := os.Mkdir(filepath.Join(a, "sync"), 0o755); err != nil {
		t.Fatal(err)
	}
	empty, err := os.OpenFile(filepath.Join(a, "sync", "empty"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	dir, err := os.Open(filepath.Join(a, "sync"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, br := range bricks {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(br, "sync", "empty"), &st); err != nil {
			t.Fatalf("after fsync of its directory, the file is not on brick %s: %v", br, err)
		}
	}
}

// Files a mount made in one go in a directory it made are served to it
// from memory while it holds the directory's lease (quick-read's owned
// entries): whatever another mount then does to one — overwrite, chmod,
// truncate, unlink — recalls the lease, and the first mount sees it
// within the kernel's own caching (its attribute timeout), as for any
// other file.
func TestOwnedFilesTwoMounts(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) { ownedFilesTwoMounts(t, l.bricks, l.keywords) })
	}
}

func ownedFilesTwoMounts(t *testing.T, nbricks int, keywords []string) {
	n := startNode(t)
	n.createVolume("own", nbricks, keywords, nil)
	a, b := n.mount("own"), n.mount("own")
	if err := os.Mkdir(filepath.Join(a, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := os.WriteFile(filepath.Join(a, "d", fmt.Sprint("f", i)), []byte("made on a"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 { // read back on a: from memory
		if got, err := os.ReadFile(filepath.Join(a, "d", fmt.Sprint("f", i))); err != nil || string(got) != "made on a" {
			t.Fatalf("a reads f%d: %q, %v", i, got, err)
		}
	}
	changes := []struct {
		what   string
		change func(path string) error
		seen   func(path string) bool
	}{
		{"overwrite", func(p string) error { return os.WriteFile(p, []byte("b wrote more"), 0o644) },
			func(p string) bool { got, err := os.ReadFile(p); return err == nil && string(got) == "b wrote more" }},
		{"chmod", func(p string) error { return os.Chmod(p, 0o600) },
			func(p string) bool { st, err := os.Stat(p); return err == nil && st.Mode().Perm() == 0o600 }},
		{"truncate", func(p string) error { return os.Truncate(p, 2) },
			func(p string) bool { got, err := os.ReadFile(p); return err == nil && string(got) == "ma" }},
		{"unlink", os.Remove,
			func(p string) bool { _, err := os.Stat(p); return errors.Is(err, fs.ErrNotExist) }},
	}
	for i, c := range changes {
		name := filepath.Join("d", fmt.Sprint("f", i))
		if err := c.change(filepath.Join(b, name)); err != nil {
			t.Fatalf("%s on b: %v", c.what, err)
		}
		waitFor(t, "a to see b's "+c.what+" of "+name, 5*time.Second, func() bool { return c.seen(filepath.Join(a, name)) })
	}
}
