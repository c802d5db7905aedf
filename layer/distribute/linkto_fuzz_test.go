package distribute

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
)

// FuzzLinkto puts a pointer file on /f's hashed brick whose linkto xattr
// holds arbitrary bytes, with the data file on another brick or on none,
// and looks /f up and lists / through distribute. Nothing may panic; the
// pointer resolves only when it names another child that holds the data,
// and is ENOENT (dangling) otherwise; an empty linkto is no pointer (the
// file is a plain, empty data file); listings never show a pointer, and
// show /f when a lookup finds it or data for it exists.
func FuzzLinkto(f *testing.F) {
	const n = 3
	var roots []string
	var children []Child
	for i := range n {
		root := f.TempDir()
		if err := posix.Mark(root, testVolume, true); err != nil {
			f.Fatal(err)
		}
		s, err := posix.New(root, posix.Options{VolumeID: testVolume})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { s.Close() })
		roots = append(roots, root)
		children = append(children, Child{ID: brickID(i), Layer: s})
	}
	d, err := New(children, Options{})
	if err != nil {
		f.Fatal(err)
	}
	ctx := f.Context()
	h, err := d.hashedChild(ctx, "/f")
	if err != nil {
		f.Fatal(err)
	}
	for i := range n {
		for data := range uint8(n + 1) {
			f.Add([]byte(brickID(i)), data)
		}
	}
	f.Add([]byte(""), uint8(0))
	f.Add([]byte("b1\x00"), uint8(1))
	f.Add([]byte("b11"), uint8(1))
	f.Fuzz(func(t *testing.T, linkto []byte, dataOn uint8) {
		for _, root := range roots {
			os.Remove(filepath.Join(root, "f"))
		}
		p := filepath.Join(roots[h], "f")
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		if err := unix.Chmod(p, 01000); err != nil {
			t.Fatal(err)
		}
		if err := unix.Lsetxattr(p, posix.XattrLinkto, linkto, 0); err != nil {
			t.Skip("xattr refused by the file system:", err)
		}
		data := int(dataOn) % (n + 1)
		hasData := data < n && data != h
		if hasData {
			if err := os.WriteFile(filepath.Join(roots[data], "f"), []byte("data"), 0o644); err != nil {
				t.Fatal(err)
			}
		}

		a, lerr := d.Lookup(ctx, "/f")
		switch {
		case len(linkto) == 0:
			if lerr != nil || a.Mode != syscall.S_IFREG|01000 || a.Size != 0 || a.Linkto != "" {
				t.Fatalf("a pointer without linkto: %+v, %v; want the empty file itself", a, lerr)
			}
		case hasData && string(linkto) == brickID(data):
			if lerr != nil || a.Size != 4 || a.Linkto != "" || !a.IsReg() {
				t.Fatalf("pointer to %s holding the data: %+v, %v", linkto, a, lerr)
			}
		default:
			if !errors.Is(lerr, syscall.ENOENT) {
				t.Fatalf("pointer %q with data on %d: %+v, %v; want ENOENT", linkto, data, a, lerr)
			}
		}

		entries, err := layer.ReadDirAll(ctx, d, "/")
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(entries, func(e layer.Entry) bool { return e.Name == "f" })
		if listed, want := i >= 0, lerr == nil || hasData; listed != want {
			t.Fatalf("pointer %q, data on %d: listed %v, want %v", linkto, data, listed, want)
		}
		for _, e := range entries {
			if e.Attr.Linkto != "" {
				t.Fatalf("listing shows the pointer %+v", e)
			}
		}
	})
}
