package posix

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// Each escape attempt is its own test, so that a regression names itself.

func TestEscapeDotDot(t *testing.T) {
	s, _ := newBrick(t, "")
	for _, p := range []string{"/..", "/../etc/passwd", "/a/../../etc"} {
		_, err := s.Lookup(ctx, p)
		wantErrno(t, err, syscall.EINVAL, "lookup "+p)
		_, _, err = s.Create(ctx, p, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
		wantErrno(t, err, syscall.EINVAL, "create "+p)
	}
}

func TestEscapeRelative(t *testing.T) {
	s, _ := newBrick(t, "")
	for _, p := range []string{"etc/passwd", "", "//etc", "/etc/", "/./x"} {
		_, err := s.Lookup(ctx, p)
		wantErrno(t, err, syscall.EINVAL, "lookup "+p)
	}
}

func TestEscapeNul(t *testing.T) {
	s, _ := newBrick(t, "")
	_, err := s.Lookup(ctx, "/a\x00/../../etc")
	wantErrno(t, err, syscall.EINVAL, "lookup with NUL")
	_, err = s.Mkdir(ctx, "/x\x00y", layer.MkdirIn{Mode: 0o755})
	wantErrno(t, err, syscall.EINVAL, "mkdir with NUL")
}

func TestEscapeSymlinkOutside(t *testing.T) {
	s, dir := newBrick(t, "")
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "etc")); err != nil {
		t.Fatal(err)
	}
	_, err := s.Lookup(ctx, "/out/secret")
	wantErrno(t, err, syscall.ELOOP, "lookup through symlink to outside")
	_, err = s.Lookup(ctx, "/etc/passwd")
	wantErrno(t, err, syscall.ELOOP, "lookup through symlink to /etc")
	_, err = s.Open(ctx, "/etc/passwd", syscall.O_RDONLY)
	wantErrno(t, err, syscall.ELOOP, "open through symlink to /etc")
	_, _, err = s.Create(ctx, "/out/new", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	wantErrno(t, err, syscall.ELOOP, "create through symlink")
	_, err = s.Readdir(ctx, "/out", 0, 10)
	wantErrno(t, err, syscall.ENOTDIR, "readdir of symlink to outside")
	err = s.Rename(ctx, "/out/secret", "/stolen", 0)
	wantErrno(t, err, syscall.ELOOP, "rename from outside")
	_, err = s.Getxattr(ctx, "/out/secret", "user.x")
	wantErrno(t, err, syscall.ELOOP, "getxattr through symlink")
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Fatal("a file was created outside the brick")
	}
}

func TestEscapeFinalSymlink(t *testing.T) {
	s, dir := newBrick(t, "")
	outside := t.TempDir()
	target := filepath.Join(outside, "victim")
	os.WriteFile(target, []byte("keep"), 0o644)
	os.Symlink(target, filepath.Join(dir, "link"))
	_, err := s.Open(ctx, "/link", syscall.O_RDWR)
	wantErrno(t, err, syscall.ELOOP, "open a final symlink")
	_, _, err = s.Create(ctx, "/link", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_TRUNC, Mode: 0o644})
	wantErrno(t, err, syscall.ELOOP, "create over a final symlink")
	_, err = s.Setattr(ctx, "/link", layer.SetattrIn{Valid: layer.SetSize, Size: 0})
	if err == nil {
		t.Fatal("truncate through a final symlink succeeded")
	}
	_, err = s.Setattr(ctx, "/link", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o777})
	wantErrno(t, err, syscall.EOPNOTSUPP, "chmod of a symlink")
	a, err := s.Setattr(ctx, "/link", layer.SetattrIn{Valid: layer.SetUid, Uid: 4242})
	if err != nil || a.Uid != 4242 {
		t.Fatalf("lchown: %v", err)
	}
	if err := s.Setxattr(ctx, "/link", "user.x", []byte("v"), 0); err == nil {
		t.Fatal("setxattr on a symlink followed it")
	}
	st, _ := os.Stat(target)
	if b, _ := os.ReadFile(target); string(b) != "keep" || st.Mode().Perm() != 0o644 ||
		st.Sys().(*syscall.Stat_t).Uid == 4242 {
		t.Fatalf("target outside the brick was changed: %q %v", b, st.Mode())
	}
	if _, err := s.Readlink(ctx, "/link"); err != nil {
		t.Fatalf("readlink: %v", err)
	}
}

func TestEscapeSymlinkSibling(t *testing.T) {
	s, dir := newBrick(t, "")
	os.Mkdir(filepath.Join(dir, "real"), 0o755)
	os.WriteFile(filepath.Join(dir, "real", "f"), []byte("x"), 0o644)
	os.Symlink("real", filepath.Join(dir, "alias"))
	_, err := s.Lookup(ctx, "/alias/f")
	wantErrno(t, err, syscall.ELOOP, "lookup through a symlink to a sibling")
	_, err = s.Mkdir(ctx, "/alias/sub", layer.MkdirIn{Mode: 0o755})
	wantErrno(t, err, syscall.ELOOP, "mkdir through a symlink to a sibling")
	if _, err := s.Lookup(ctx, "/real/f"); err != nil {
		t.Fatalf("lookup of the real path: %v", err)
	}
}

func TestHiddenDir(t *testing.T) {
	s, dir := newBrick(t, "")
	os.WriteFile(filepath.Join(dir, HiddenDir, "state"), []byte("x"), 0o600)
	_, err := s.Lookup(ctx, "/"+HiddenDir)
	wantErrno(t, err, syscall.ENOENT, "lookup hidden dir")
	_, err = s.Lookup(ctx, "/"+HiddenDir+"/state")
	wantErrno(t, err, syscall.ENOENT, "lookup inside hidden dir")
	_, err = s.Open(ctx, "/"+HiddenDir+"/state", syscall.O_RDONLY)
	wantErrno(t, err, syscall.ENOENT, "open inside hidden dir")
	_, err = s.Mkdir(ctx, "/"+HiddenDir, layer.MkdirIn{Mode: 0o755})
	wantErrno(t, err, syscall.EPERM, "mkdir hidden dir")
	_, _, err = s.Create(ctx, "/"+HiddenDir, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	wantErrno(t, err, syscall.EPERM, "create hidden dir")
	_, err = s.Symlink(ctx, "/"+HiddenDir, layer.SymlinkIn{Target: "x"})
	wantErrno(t, err, syscall.EPERM, "symlink hidden dir")
	s.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755})
	wantErrno(t, s.Rename(ctx, "/d", "/"+HiddenDir, 0), syscall.EPERM, "rename onto hidden dir")
	wantErrno(t, s.Rename(ctx, "/"+HiddenDir, "/x", 0), syscall.ENOENT, "rename hidden dir away")
	wantErrno(t, s.Rmdir(ctx, "/"+HiddenDir), syscall.ENOENT, "rmdir hidden dir")
	wantErrno(t, s.Unlink(ctx, "/"+HiddenDir+"/state"), syscall.ENOENT, "unlink inside hidden dir")
	_, err = s.Readdir(ctx, "/"+HiddenDir, 0, 10)
	wantErrno(t, err, syscall.ENOENT, "readdir hidden dir")
	entries, err := layer.ReadDirAll(ctx, s, "/")
	if err != nil || len(entries) != 1 || entries[0].Name != "d" {
		t.Fatalf("root listing: %v %v", entries, err)
	}
	// A directory of that name below the root is an ordinary directory.
	if _, err := s.Mkdir(ctx, "/d/"+HiddenDir, layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatalf("mkdir /d/.mortar: %v", err)
	}
	if entries, _ := layer.ReadDirAll(ctx, s, "/d"); len(entries) != 1 {
		t.Fatalf("/d listing: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, HiddenDir, "state")); string(b) != "x" {
		t.Fatal("hidden state was changed")
	}
}

func TestMortarXattrsHidden(t *testing.T) {
	s, _ := newBrick(t, "")
	s.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755})
	for _, name := range []string{XattrGfid, "trusted.x", "security.x", "system.posix_acl_access"} {
		_, err := s.Getxattr(ctx, "/d", name)
		wantErrno(t, err, syscall.EOPNOTSUPP, "getxattr "+name)
		wantErrno(t, s.Setxattr(ctx, "/d", name, []byte("x"), 0), syscall.EOPNOTSUPP, "setxattr "+name)
		wantErrno(t, s.Removexattr(ctx, "/d", name), syscall.EOPNOTSUPP, "removexattr "+name)
	}
	names, err := s.Listxattr(ctx, "/d")
	if err != nil || len(names) != 0 {
		t.Fatalf("listxattr shows %v, %v", names, err)
	}
	names, _ = s.Listxattr(ctx, "/")
	if len(names) != 0 {
		t.Fatalf("listxattr / shows %v", names)
	}
}
