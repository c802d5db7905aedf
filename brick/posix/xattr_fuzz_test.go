package posix

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// The brick reads back state it wrote itself in xattrs and files under
// .mortar; an operator's hand, a crash or a bug elsewhere may leave them
// holding anything. These fuzz targets write arbitrary bytes there and
// check that the brick's decoders take them without panicking, as their
// documentation says.

// fuzzBrick opens a fresh brick (per fuzzing process) with /f in it.
func fuzzBrick(f *testing.F, opts Options) (*Store, string) {
	f.Helper()
	dir := f.TempDir()
	if err := Mark(dir, testVolume, true); err != nil {
		f.Fatal(err)
	}
	opts.VolumeID = testVolume
	s, err := New(dir, opts)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	return s, dir
}

// le64 is what a uint64 xattr of the brick decodes to: its little-endian
// value if it is 8 bytes long, else 0 (not ours).
func le64(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(v)
}

// FuzzPendingXattr writes arbitrary bytes as an inode's pending mask
// (XattrPending) and as its heal index entry. Lookups and open files
// report the mask decoded (0 unless 8 bytes); marking ORs into it; the
// heal index lists the entry with a valid path or none.
func FuzzPendingXattr(f *testing.F) {
	s, dir := fuzzBrick(f, Options{})
	file, a, err := s.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { file.Release(ctx) })
	index := filepath.Join(dir, HealDir, hex.EncodeToString(a.Gfid[:]))
	f.Add(binary.LittleEndian.AppendUint64(nil, 5), []byte("/f"), uint64(2))
	f.Add([]byte{1, 2, 3}, []byte("/../etc/passwd"), uint64(1<<63))
	f.Add([]byte{}, []byte(""), uint64(0))
	f.Add(make([]byte, 300), []byte(strings.Repeat("/x", 3000)), uint64(1))
	f.Fuzz(func(t *testing.T, value, entry []byte, mask uint64) {
		p := filepath.Join(dir, "f")
		if err := unix.Lsetxattr(p, XattrPending, value, 0); err != nil {
			t.Skip("xattr refused by the file system:", err)
		}
		if err := os.WriteFile(index, entry, 0o600); err != nil {
			t.Fatal(err)
		}
		want := le64(value)
		got, err := s.Lookup(ctx, "/f")
		if err != nil || got.Pending != want {
			t.Fatalf("lookup: pending %#x, %v; want %#x", got.Pending, err, want)
		}
		if got, err := file.Getattr(ctx); err != nil || got.Pending != want {
			t.Fatalf("getattr: pending %#x, %v; want %#x", got.Pending, err, want)
		}
		entries, err := s.HealIndex(ctx, layer.Gfid{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Path != "" && layer.CheckPath(e.Path) != nil {
				t.Fatalf("heal index lists the bad path %q", e.Path)
			}
			if e.Gfid == a.Gfid && e.Path != string(entry) && layer.CheckPath(string(entry)) == nil {
				t.Fatalf("heal index entry %q read as %q", entry, e.Path)
			}
		}
		if err := s.MarkPending(ctx, "/f", a.Gfid, mask); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Lookup(ctx, "/f"); got.Pending != want|mask {
			t.Fatalf("marking %#x over %#x gave %#x", mask, want, got.Pending)
		}
		unix.Lremovexattr(p, XattrPending)
		os.Remove(index)
	})
}

// FuzzSizeXattr writes arbitrary bytes as a disperse fragment's file size
// (XattrSize): lookups and open files report it decoded (0 unless 8
// bytes), and a write raises it to at least the size it carries.
func FuzzSizeXattr(f *testing.F) {
	s, dir := fuzzBrick(f, Options{Disperse: true})
	file, _, err := s.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { file.Release(ctx) })
	f.Add(binary.LittleEndian.AppendUint64(nil, 1<<20), uint64(100))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint64(0))
	f.Add([]byte("12345"), uint64(1<<62))
	f.Fuzz(func(t *testing.T, value []byte, size uint64) {
		p := filepath.Join(dir, "f")
		if err := unix.Lsetxattr(p, XattrSize, value, 0); err != nil {
			t.Skip("xattr refused by the file system:", err)
		}
		want := le64(value)
		if got, err := s.Lookup(ctx, "/f"); err != nil || got.Size != want {
			t.Fatalf("lookup: size %d, %v; want %d", got.Size, err, want)
		}
		if got, err := file.Getattr(ctx); err != nil || got.Size != want {
			t.Fatalf("getattr: size %d, %v; want %d", got.Size, err, want)
		}
		wctx := layer.WithTxn(ctx, layer.Txn{SetSize: true, Size: size})
		if _, err := file.Write(wctx, []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Lookup(ctx, "/f"); got.Size != max(want, size) {
			t.Fatalf("a write of size %d over %d left %d", size, want, got.Size)
		}
	})
}

// FuzzMigrateCommand sends arbitrary migration commands (XattrMigrate
// values; "@" stands for the file's gfid, so that the fuzzer reaches past
// the gfid check) to a file in one of three states: fresh, watched, or
// watched and frozen. The answer must be what the grammar
//
//	watch|freeze|thaw GFID, moved GFID CHILD
//
// and the state say; nothing may panic.
func FuzzMigrateCommand(f *testing.F) {
	s, _ := fuzzBrick(f, Options{FreezeTimeout: time.Minute})
	for _, v := range []string{"watch @", "freeze @", "thaw @", "moved @ b2", "moved @ b\x002", "moved @",
		"watch", "", "watch 00000000-0000-0000-0000-000000000000", "frobnicate @", "watch @ extra", " \t watch\n@ "} {
		for pre := range uint8(3) {
			f.Add([]byte(v), pre)
		}
	}
	f.Fuzz(func(t *testing.T, value []byte, pre uint8) {
		file, a, err := s.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			migCmd(s, "/f", "thaw", a.Gfid)
			file.Release(ctx)
			if err := s.Unlink(ctx, "/f"); err != nil && !errors.Is(err, syscall.ENOENT) {
				t.Fatal(err)
			}
		}()
		pre %= 3
		if pre >= 1 {
			if err := migCmd(s, "/f", "watch", a.Gfid); err != nil {
				t.Fatal(err)
			}
		}
		if pre == 2 {
			if err := migCmd(s, "/f", "freeze", a.Gfid); err != nil {
				t.Fatal(err)
			}
		}
		cmd := strings.ReplaceAll(string(value), "@", a.Gfid.String())
		err = s.Setxattr(ctx, "/f", XattrMigrate, []byte(cmd), 0)
		want := expectMigrate(cmd, a.Gfid, pre)
		var errno syscall.Errno
		if err != nil && !errors.As(err, &errno) {
			t.Fatalf("%q: not an errno: %v", cmd, err)
		}
		if errno != want {
			t.Fatalf("%q in state %d: %v, want %v", cmd, pre, err, want)
		}
		got, lerr := s.Lookup(ctx, "/f")
		if moved := err == nil && strings.HasPrefix(strings.TrimSpace(cmd), "moved"); moved {
			// The name goes with the move; the open file is the pointer.
			fa, ferr := file.Getattr(ctx)
			if !errors.Is(lerr, syscall.ENOENT) || ferr != nil || fa.Linkto != strings.Fields(cmd)[2] {
				t.Fatalf("%q: then lookup gives %v, the open file linkto %q, %v", cmd, lerr, fa.Linkto, ferr)
			}
		} else if lerr != nil || got.Linkto != "" {
			t.Fatalf("%q: then lookup gives linkto %q, %v", cmd, got.Linkto, lerr)
		}
	})
}

// expectMigrate is the answer the grammar gives to cmd on a file of gfid
// g in state pre (0 fresh, 1 watched, 2 watched and frozen).
func expectMigrate(cmd string, g layer.Gfid, pre uint8) syscall.Errno {
	f := strings.Fields(cmd)
	if len(f) < 2 {
		return syscall.EINVAL
	}
	var cg layer.Gfid
	if cg.UnmarshalText([]byte(f[1])) != nil {
		return syscall.EINVAL
	}
	if cg != g {
		return syscall.ESTALE
	}
	switch {
	case f[0] == "watch" && len(f) == 2, f[0] == "thaw" && len(f) == 2:
		return 0
	case f[0] == "freeze" && (len(f) == 2 || len(f) == 3):
		want, ok := namesWanted(f[2:])
		switch {
		case !ok:
			return syscall.EINVAL
		case want != 1:
			return syscall.EMLINK
		case pre == 0:
			return syscall.ESTALE // changed since a watch that never was
		}
		return 0
	case f[0] == "moved" && len(f) >= 3:
		want, ok := namesWanted(f[3:])
		names := f[min(4, len(f)):]
		if !ok || !(want == 1 && len(names) == 0) && !validNames(names, want) {
			return syscall.EINVAL
		}
		switch {
		case strings.ContainsRune(f[2], 0):
			return syscall.EINVAL
		case pre != 2:
			return syscall.ESTALE
		case want != 1:
			return syscall.EMLINK
		}
		for _, n := range names {
			if b, _ := base64.RawURLEncoding.DecodeString(n); string(b) != "/f" {
				return syscall.ESTALE
			}
		}
		return 0
	}
	return syscall.EINVAL
}

// namesWanted is the optional count of names of a command, 1 by default.
func namesWanted(arg []string) (uint64, bool) {
	if len(arg) == 0 {
		return 1, true
	}
	n, err := strconv.ParseUint(arg[0], 10, 32)
	return n, err == nil && n != 0
}

// validNames reports whether names are want encoded paths.
func validNames(names []string, want uint64) bool {
	if uint64(len(names)) != want {
		return false
	}
	for _, n := range names {
		b, err := base64.RawURLEncoding.DecodeString(n)
		if err != nil || layer.CheckPath(string(b)) != nil {
			return false
		}
	}
	return true
}
