package posix

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// The escape matrix: every operation of the layer contract that takes a
// path, tried with every kind of path that could leave the brick or reach
// its hidden state. Each must fail with an errno, and nothing outside the
// brick (a sentinel directory next to it, /etc/passwd) may change.

// escapePaths are the paths no operation may accept, by kind.
func escapePaths() map[string][]string {
	long := strings.Repeat("n", layer.NameMax+1)
	return map[string][]string{
		"dotdot": {"..", "../x", "/..", "/../x", "/../sentinel/secret", "/d/..", "/d/../..", "/d/../../sentinel",
			"/a/../../x", "/d/../../sentinel/secret", "/.", "/./file", "/d/./file"},
		"relative": {"", "x", "file", "sentinel/secret", "d/file", "./file"},
		"slashes":  {"//", "//file", "/d//file", "/d/", "/file/", "//sentinel/secret", "/link//secret"},
		"nul":      {"/\x00", "/file\x00", "/x\x00y", "/d\x00/../../sentinel", "/link/\x00secret"},
		"too long": {"/" + long, "/d/" + long, strings.Repeat("/d", layer.PathMax/2+1)},
		"symlink": {"/link/secret", "/link/new", "/link/sub/x", "/link/sub", "/rel/secret", "/rel/new",
			"/d/up/sentinel/secret", "/d/up/sentinel/new", "/etcl/passwd", "/etcl/mortar-escape-probe",
			"/self/file", "/dirlink/file", "/dirlink/new"},
		"hidden": {"/" + HiddenDir, "/" + HiddenDir + "/state", "/" + HiddenDir + "/heal",
			"/" + HiddenDir + "/new", "/" + HiddenDir + "/heal/x", "/" + HiddenDir + "/sub/x"},
	}
}

// escapeOp is one operation applied to a path.
type escapeOp struct {
	name string
	run  func(s *Store, p string) error
}

func escapeOps(fileGfid layer.Gfid) []escapeOp {
	drop := func(f layer.File, err error) error {
		if err == nil {
			f.Release(ctx)
		}
		return err
	}
	attr := func(_ layer.Attr, err error) error { return err }
	setattr := func(in layer.SetattrIn) func(s *Store, p string) error {
		return func(s *Store, p string) error { return attr(s.Setattr(ctx, p, in)) }
	}
	return []escapeOp{
		{"lookup", func(s *Store, p string) error { return attr(s.Lookup(ctx, p)) }},
		{"setattr mode", setattr(layer.SetattrIn{Valid: layer.SetMode, Mode: 0o777})},
		{"setattr owner", setattr(layer.SetattrIn{Valid: layer.SetUid | layer.SetGid, Uid: 4242, Gid: 4242})},
		{"setattr size", setattr(layer.SetattrIn{Valid: layer.SetSize, Size: 0})},
		{"setattr times", setattr(layer.SetattrIn{Valid: layer.SetMtime, Mtime: layer.Timespec{Sec: 1}})},
		{"mknod", func(s *Store, p string) error {
			return attr(s.Mknod(ctx, p, layer.MknodIn{Mode: syscall.S_IFREG | 0o644}))
		}},
		{"mknod fifo", func(s *Store, p string) error {
			return attr(s.Mknod(ctx, p, layer.MknodIn{Mode: syscall.S_IFIFO | 0o644}))
		}},
		{"mknod pointer", func(s *Store, p string) error {
			return attr(s.Mknod(ctx, p, layer.MknodIn{Mode: syscall.S_IFREG, Linkto: "b2"}))
		}},
		{"mkdir", func(s *Store, p string) error { return attr(s.Mkdir(ctx, p, layer.MkdirIn{Mode: 0o755})) }},
		{"symlink", func(s *Store, p string) error {
			return attr(s.Symlink(ctx, p, layer.SymlinkIn{Target: "/etc/passwd"}))
		}},
		{"readlink", func(s *Store, p string) error { _, err := s.Readlink(ctx, p); return err }},
		{"unlink", func(s *Store, p string) error { return s.Unlink(ctx, p) }},
		{"rmdir", func(s *Store, p string) error { return s.Rmdir(ctx, p) }},
		{"rename from", func(s *Store, p string) error { return s.Rename(ctx, p, "/dst", 0) }},
		{"rename file to", func(s *Store, p string) error { return s.Rename(ctx, "/file", p, 0) }},
		{"rename dir to", func(s *Store, p string) error { return s.Rename(ctx, "/e", p, 0) }},
		{"rename noreplace to", func(s *Store, p string) error {
			return s.Rename(ctx, "/file", p, layer.RenameNoReplace)
		}},
		{"link from", func(s *Store, p string) error { return attr(s.Link(ctx, p, "/lnk")) }},
		{"link to", func(s *Store, p string) error { return attr(s.Link(ctx, "/file", p)) }},
		{"create", func(s *Store, p string) error {
			f, _, err := s.Create(ctx, p, layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_TRUNC, Mode: 0o644})
			return drop(f, err)
		}},
		{"create excl", func(s *Store, p string) error {
			f, _, err := s.Create(ctx, p, layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
			return drop(f, err)
		}},
		{"open read", func(s *Store, p string) error { return drop(s.Open(ctx, p, syscall.O_RDONLY)) }},
		{"open trunc", func(s *Store, p string) error {
			return drop(s.Open(ctx, p, syscall.O_RDWR|syscall.O_TRUNC))
		}},
		{"open dir", func(s *Store, p string) error {
			return drop(s.Open(ctx, p, syscall.O_RDONLY|syscall.O_DIRECTORY))
		}},
		{"readdir", func(s *Store, p string) error { _, err := s.Readdir(ctx, p, 0, 100); return err }},
		{"getxattr", func(s *Store, p string) error { _, err := s.Getxattr(ctx, p, "user.x"); return err }},
		{"setxattr", func(s *Store, p string) error { return s.Setxattr(ctx, p, "user.x", []byte("v"), 0) }},
		{"listxattr", func(s *Store, p string) error { _, err := s.Listxattr(ctx, p); return err }},
		{"removexattr", func(s *Store, p string) error { return s.Removexattr(ctx, p, "user.keep") }},
		{"migrate", func(s *Store, p string) error {
			return s.Setxattr(ctx, p, XattrMigrate, []byte("watch "+fileGfid.String()), 0)
		}},
		{"markpending", func(s *Store, p string) error { return s.MarkPending(ctx, p, layer.Gfid{}, 1) }},
		{"markpending gfid", func(s *Store, p string) error { return s.MarkPending(ctx, p, fileGfid, 1) }},
		{"clearpending", func(s *Store, p string) error {
			return s.ClearPending(ctx, p, fileGfid, 1, layer.Timespec{})
		}},
	}
}

// escapeRig is a brick next to a sentinel directory, with symlinks out.
type escapeRig struct {
	s        *Store
	brick    string
	sentinel string
	gfid     layer.Gfid // of /file
}

func newEscapeRig(t *testing.T) *escapeRig {
	parent := t.TempDir()
	s, brick := newBrick(t, parent)
	r := &escapeRig{s: s, brick: brick, sentinel: filepath.Join(parent, "sentinel")}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(r.sentinel, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(r.sentinel, "secret"), []byte("secret"), 0o600))
	must(os.WriteFile(filepath.Join(r.sentinel, "sub", "x"), []byte("x"), 0o644))
	must(unix.Lsetxattr(filepath.Join(r.sentinel, "secret"), "user.keep", []byte("k"), 0))
	must(os.WriteFile(filepath.Join(brick, HiddenDir, "state"), []byte("state"), 0o600))
	must(os.MkdirAll(filepath.Join(brick, HiddenDir, "sub"), 0o700))
	f, a, err := s.Create(ctx, "/file", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	must(err)
	f.Write(ctx, []byte("inside"), 0)
	f.Release(ctx)
	r.gfid = a.Gfid
	r.reset(t)
	return r
}

// reset puts back what a (wrongly, in TestEscapeMatrix) successful
// operation may have taken.
func (r *escapeRig) reset(t *testing.T) {
	t.Helper()
	for _, d := range []string{"d", "e"} {
		if err := os.Mkdir(filepath.Join(r.brick, d), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"link": r.sentinel, "rel": "../" + filepath.Base(r.sentinel), "etcl": "/etc",
		"d/up": "../..", "self": ".", "dirlink": "d",
	} {
		p := filepath.Join(r.brick, name)
		if got, err := os.Readlink(p); err == nil && got == target {
			continue
		}
		os.RemoveAll(p)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := os.Lstat(filepath.Join(r.brick, "file")); err != nil || !st.Mode().IsRegular() {
		f, a, err := r.s.Create(ctx, "/file", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
		if err != nil {
			t.Fatalf("recreating /file: %v", err)
		}
		f.Release(ctx)
		r.gfid = a.Gfid
	}
}

// snapshot records everything about the files under dir that an escape
// could change: names, types, modes, owners, sizes, mtimes, ctimes,
// contents, link targets and xattrs.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(p, rel string) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			out[rel] = err.Error()
			return
		}
		v := fmt.Sprintf("mode=%o uid=%d gid=%d size=%d mtime=%d.%d ctime=%d.%d nlink=%d",
			st.Mode, st.Uid, st.Gid, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, st.Nlink)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, _ := os.ReadFile(p)
			v += " data=" + string(b)
		case unix.S_IFLNK:
			l, _ := os.Readlink(p)
			v += " target=" + l
		}
		if names, err := listxattr(p); err == nil {
			sort.Strings(names)
			for _, n := range names {
				x, _ := getxattr(p, n, false)
				v += fmt.Sprintf(" %s=%q", n, x)
			}
		}
		out[rel] = v
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		add(dir, ".")
		return out
	}
	filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		add(p, rel)
		return nil
	})
	return out
}

func TestEscapeMatrix(t *testing.T) {
	r := newEscapeRig(t)
	outside := func() map[string]string {
		m := snapshot(t, r.sentinel)
		for _, p := range []string{"/etc/passwd", "/etc/mortar-escape-probe", filepath.Join(filepath.Dir(r.sentinel), "x"),
			filepath.Join(filepath.Dir(r.sentinel), "new"), filepath.Join(filepath.Dir(r.sentinel), "dst")} {
			for k, v := range snapshot(t, p) {
				m[p+":"+k] = v
			}
		}
		return m
	}
	hidden := func() map[string]string { return snapshot(t, filepath.Join(r.brick, HiddenDir)) }
	before, beforeHidden := outside(), hidden()
	errnos := map[syscall.Errno]int{}
	for kind, paths := range escapePaths() {
		for _, p := range paths {
			for _, op := range escapeOps(r.gfid) {
				r.reset(t)
				g := r.gfid
				err := op.run(r.s, p)
				var errno syscall.Errno
				switch {
				case err == nil:
					t.Errorf("%s %q (%s): succeeded", op.name, p, kind)
				case !errors.As(err, &errno):
					t.Errorf("%s %q (%s): not an errno: %v", op.name, p, kind, err)
				}
				errnos[errno]++
				if r.reset(t); r.gfid != g {
					t.Fatalf("%s %q (%s) took /file away", op.name, p, kind)
				}
				if now := outside(); !reflect.DeepEqual(now, before) {
					t.Fatalf("%s %q (%s) changed something outside the brick:\nbefore %v\nafter  %v", op.name, p, kind, before, now)
				}
				if now := hidden(); !reflect.DeepEqual(now, beforeHidden) {
					t.Fatalf("%s %q (%s) changed the hidden directory:\nbefore %v\nafter  %v", op.name, p, kind, beforeHidden, now)
				}
			}
		}
	}
	t.Logf("errnos: %v", errnos)
}

// Operations on a final symlink that points outside may act on the link
// itself (lchown, its own xattrs are refused, readlink) but never on what
// it points to.
func TestEscapeFinalSymlinkMatrix(t *testing.T) {
	r := newEscapeRig(t)
	before := snapshot(t, r.sentinel)
	for _, p := range []string{"/link", "/rel", "/etcl", "/d/up"} {
		for i := range escapeOps(r.gfid) {
			r.reset(t)
			op := escapeOps(r.gfid)[i]
			op.run(r.s, p)
			if now := snapshot(t, r.sentinel); !reflect.DeepEqual(now, before) {
				t.Fatalf("%s %q changed the sentinel outside the brick:\nbefore %v\nafter  %v", op.name, p, before, now)
			}
			if _, err := os.Stat("/etc/passwd"); err != nil {
				t.Fatalf("%s %q: /etc/passwd: %v", op.name, p, err)
			}
		}
	}
}

// Statfs reports on the brick's file system whatever the path; it checks
// paths like every operation and never reports another file system.
func TestEscapeStatfs(t *testing.T) {
	r := newEscapeRig(t)
	want, err := r.s.Statfs(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	for kind, paths := range escapePaths() {
		for _, p := range paths {
			got, err := r.s.Statfs(ctx, p)
			if err == nil && (got.Blocks != want.Blocks || got.Files != want.Files || got.Bsize != want.Bsize) {
				t.Errorf("statfs %q (%s) reports another file system: %+v", p, kind, got)
			}
			if err == nil && layer.CheckPath(p) != nil {
				t.Errorf("statfs %q (%s): succeeded on a malformed path", p, kind)
			}
		}
	}
}
