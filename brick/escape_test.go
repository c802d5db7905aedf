package brick

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// Escaping paths sent over the network are refused: malformed ones by the
// server's own check (checkPaths) with EINVAL before the store sees them,
// the others by the store; nothing outside the brick changes.
func TestEscapeOverNetwork(t *testing.T) {
	parent := t.TempDir()
	sentinel := filepath.Join(parent, "sentinel")
	os.Mkdir(sentinel, 0o755)
	os.WriteFile(filepath.Join(sentinel, "secret"), []byte("secret"), 0o600)
	store, root := newStore(t)
	os.Symlink(sentinel, filepath.Join(root, "link"))
	os.Symlink("/etc", filepath.Join(root, "etcl"))
	f, a, err := store.Create(context.Background(), "/file", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	f.Release(context.Background())
	ts := startServer(t, store, Limits{})
	c := dial(t, ts.addr)
	before := listing(t, parent)

	malformed := []string{"..", "../x", "/..", "/../x", "/a/../../x", "/.", "x", "", "//x", "/d//x", "/x/",
		"/x\x00y", "/" + strings.Repeat("n", layer.NameMax+1)}
	outside := []string{"/link/secret", "/link/new", "/etcl/passwd", "/etcl/mortar-escape-probe",
		"/.mortar", "/.mortar/heal", "/.mortar/x"}
	requests := func(p string) []*wire.Request {
		return []*wire.Request{
			{Op: wire.OpLookup, Path: p},
			{Op: wire.OpSetattr, Path: p, Setattr: layer.SetattrIn{Valid: layer.SetMode | layer.SetSize, Mode: 0o777}},
			{Op: wire.OpMknod, Path: p, Mode: syscall.S_IFREG | 0o644},
			{Op: wire.OpMkdir, Path: p, Mode: 0o755},
			{Op: wire.OpSymlink, Path: p, Target: "/etc/passwd"},
			{Op: wire.OpReadlink, Path: p},
			{Op: wire.OpUnlink, Path: p},
			{Op: wire.OpRmdir, Path: p},
			{Op: wire.OpRename, Path: p, Path2: "/dst"},
			{Op: wire.OpRename, Path: "/file", Path2: p},
			{Op: wire.OpLink, Path: p, Path2: "/lnk"},
			{Op: wire.OpLink, Path: "/file", Path2: p},
			{Op: wire.OpCreate, Path: p, Flags: syscall.O_RDWR | syscall.O_TRUNC, Mode: 0o644},
			{Op: wire.OpOpen, Path: p, Flags: syscall.O_RDWR | syscall.O_TRUNC},
			{Op: wire.OpReaddir, Path: p, Max: 10},
			{Op: wire.OpGetxattr, Path: p, Name: "user.x"},
			{Op: wire.OpSetxattr, Path: p, Name: "user.x", Value: []byte("v")},
			{Op: wire.OpListxattr, Path: p},
			{Op: wire.OpRemovexattr, Path: p, Name: "user.x"},
			{Op: wire.OpMarkPending, Path: p, Gfid: a.Gfid, Pending: 1},
			{Op: wire.OpClearPending, Path: p, Gfid: a.Gfid, Pending: 1},
		}
	}
	for _, p := range malformed {
		for _, r := range append(requests(p), &wire.Request{Op: wire.OpStatfs, Path: p}) {
			if errno, _ := c.call(r); errno != syscall.EINVAL && errno != syscall.ENAMETOOLONG {
				t.Errorf("%s %q %q: errno %v, want EINVAL from the server's check", wire.OpName(r.Op), r.Path, r.Path2, errno)
			}
		}
	}
	for _, p := range outside {
		for _, r := range requests(p) {
			if errno, _ := c.call(r); errno == 0 {
				t.Errorf("%s %q %q: succeeded", wire.OpName(r.Op), r.Path, r.Path2)
			}
		}
	}
	if after := listing(t, parent); after != before {
		t.Fatalf("something outside the brick changed:\nbefore %s\nafter  %s", before, after)
	}
	if errno, _ := c.call(&wire.Request{Op: wire.OpLookup, Path: "/file"}); errno != 0 {
		t.Fatalf("/file after the attempts: %v", errno)
	}
}

// listing describes the sentinel side of parent: names, modes, sizes,
// times and contents (the brick under it excluded).
func listing(t *testing.T, parent string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(filepath.Join(parent, "sentinel"), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		data, _ := os.ReadFile(p)
		st := fi.Sys().(*syscall.Stat_t)
		b.WriteString(p + " " + fi.Mode().String() + " " + string(data) + " " +
			strings.Join([]string{itoa(st.Size), itoa(st.Mtim.Nsec), itoa(st.Ctim.Nsec), itoa(int64(st.Uid))}, ",") + "\n")
		return nil
	})
	for _, p := range []string{"/etc/passwd", "/etc/mortar-escape-probe", filepath.Join(parent, "new"), filepath.Join(parent, "x")} {
		if fi, err := os.Lstat(p); err == nil {
			st := fi.Sys().(*syscall.Stat_t)
			b.WriteString(p + " " + fi.Mode().String() + " " + itoa(st.Ctim.Sec) + "." + itoa(st.Ctim.Nsec) + "\n")
		}
	}
	return b.String()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
