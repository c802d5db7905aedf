package posixtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// dirent is one entry returned by getdents64.
type dirent struct {
	ino  uint64
	off  int64
	typ  uint8
	name string
}

// getdents reads one batch of entries from the directory descriptor fd
// into a buffer of size bytes; an empty result is the end.
func getdents(t *testing.T, fd, size int) []dirent {
	t.Helper()
	buf := make([]byte, size)
	n, err := unix.Getdents(fd, buf)
	noErr(t, "getdents", err)
	var out []dirent
	for b := buf[:n]; len(b) > 0; {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		name := b[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		out = append(out, dirent{
			ino:  binary.NativeEndian.Uint64(b[0:8]),
			off:  int64(binary.NativeEndian.Uint64(b[8:16])),
			typ:  b[18],
			name: string(name),
		})
		b = b[reclen:]
	}
	return out
}

// readAll reads the directory fd to its end in batches of size bytes.
func readAll(t *testing.T, fd, size int) []dirent {
	t.Helper()
	var all []dirent
	for {
		batch := getdents(t, fd, size)
		if len(batch) == 0 {
			return all
		}
		all = append(all, batch...)
	}
}

func names(ents []dirent) []string {
	var out []string
	for _, e := range ents {
		out = append(out, e.name)
	}
	slices.Sort(out)
	return out
}

// populate creates n files and a few directories in dir and returns the
// sorted names including "." and "..".
func populate(t *testing.T, dir string, n int) []string {
	t.Helper()
	want := []string{".", ".."}
	for i := range n {
		name := fmt.Sprintf("file-with-a-longish-name-%04d", i)
		writeFile(t, filepath.Join(dir, name), nil, 0o644)
		want = append(want, name)
	}
	for i := range 5 {
		name := fmt.Sprintf("dir%d", i)
		noErr(t, "mkdir", os.Mkdir(filepath.Join(dir, name), 0o755))
		want = append(want, name)
	}
	slices.Sort(want)
	return want
}

func testReaddir(t *testing.T, dir string) {
	d := filepath.Join(dir, "d")
	noErr(t, "mkdir", os.Mkdir(d, 0o755))
	want := populate(t, d, 300)
	fd := open(t, d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	ents := readAll(t, fd, 4096)
	if got := names(ents); !slices.Equal(got, want) {
		t.Fatalf("listing has %d names, want %d (%q...)", len(got), len(want), got[:min(5, len(got))])
	}
	for _, e := range ents {
		if e.name == "." || e.name == ".." {
			if e.typ != unix.DT_DIR && e.typ != unix.DT_UNKNOWN {
				t.Errorf("%s: type %d", e.name, e.typ)
			}
			continue
		}
		st := lstat(t, filepath.Join(d, e.name))
		if e.ino != st.Ino {
			t.Fatalf("%s: dirent ino %d, stat ino %d", e.name, e.ino, st.Ino)
		}
		wantTyp := uint8(unix.DT_REG)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			wantTyp = unix.DT_DIR
		}
		if e.typ != wantTyp && e.typ != unix.DT_UNKNOWN {
			t.Fatalf("%s: dirent type %d, want %d", e.name, e.typ, wantTyp)
		}
	}
	// An empty directory has only "." and "..".
	e := filepath.Join(dir, "empty")
	noErr(t, "mkdir", os.Mkdir(e, 0o755))
	efd := open(t, e, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if got := names(readAll(t, efd, 4096)); !slices.Equal(got, []string{".", ".."}) {
		t.Fatalf("empty dir lists %q", got)
	}
	// The root of the test directory lists what the test made.
	list, err := os.ReadDir(dir)
	noErr(t, "readdir", err)
	if len(list) != 2 || list[0].Name() != "d" || list[1].Name() != "empty" || !list[0].IsDir() {
		t.Fatalf("os.ReadDir: %v", list)
	}
}

func testReaddirSeek(t *testing.T, dir string) {
	want := populate(t, dir, 100)
	fd := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	// Small batches: many getdents calls, many kernel requests.
	ents := readAll(t, fd, 512)
	if got := names(ents); !slices.Equal(got, want) {
		t.Fatalf("listing has %d names, want %d", len(got), len(want))
	}
	// Seeking to the offset of entry k continues with entry k+1.
	for _, k := range []int{0, 1, 2, 3, 17, 50, len(ents) / 2, len(ents) - 2} {
		_, err := unix.Seek(fd, ents[k].off, 0)
		noErr(t, "seekdir", err)
		batch := getdents(t, fd, 512)
		if len(batch) == 0 || batch[0].name != ents[k+1].name {
			var first string
			if len(batch) > 0 {
				first = batch[0].name
			}
			t.Fatalf("after seek to offset of entry %d (%q): got %q, want %q", k, ents[k].name, first, ents[k+1].name)
		}
	}
	_, err := unix.Seek(fd, ents[len(ents)-1].off, 0)
	noErr(t, "seekdir to end", err)
	if batch := getdents(t, fd, 512); len(batch) != 0 {
		t.Fatalf("after seek to last offset: %d entries", len(batch))
	}
	// Seeking back to 0 lists everything again.
	_, err = unix.Seek(fd, 0, 0)
	noErr(t, "rewinddir", err)
	if got := names(readAll(t, fd, 2048)); !slices.Equal(got, want) {
		t.Fatalf("after rewind: %d names, want %d", len(got), len(want))
	}
}

func testReaddirRewind(t *testing.T, dir string) {
	want := populate(t, dir, 10)
	fd := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if got := names(readAll(t, fd, 4096)); !slices.Equal(got, want) {
		t.Fatalf("listing %q, want %q", got, want)
	}
	writeFile(t, filepath.Join(dir, "added"), nil, 0o644)
	const gone = "file-with-a-longish-name-0003"
	noErr(t, "unlink", unix.Unlink(filepath.Join(dir, gone)))
	want = slices.DeleteFunc(want, func(s string) bool { return s == gone })
	want = append(want, "added")
	slices.Sort(want)
	_, err := unix.Seek(fd, 0, 0)
	noErr(t, "rewinddir", err)
	if got := names(readAll(t, fd, 4096)); !slices.Equal(got, want) {
		t.Fatalf("after rewind: %q, want %q", got, want)
	}
	// A second descriptor sees the same.
	fd2 := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if got := names(readAll(t, fd2, 4096)); !slices.Equal(got, want) {
		t.Fatalf("new descriptor: %q, want %q", got, want)
	}
}
