package distribute

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
)

const testVolume = "vol-distribute-test"

// rig is a distribute layer over n posix bricks in temporary directories.
type rig struct {
	t      *testing.T
	d      *Distribute
	roots  []string
	stores []*posix.Store
	ctx    context.Context
}

// newStore makes a marked posix brick in a fresh temporary directory.
func newStore(t *testing.T) (*posix.Store, string) {
	s := testbrick.NewStore(t, testVolume)
	return s, s.Root()
}

// newRig builds n bricks; wrap, if not nil, wraps child i's layer.
func newRig(t *testing.T, n int, wrap func(i int, l layer.Layer) layer.Layer) *rig {
	t.Helper()
	r := &rig{t: t, ctx: t.Context()}
	var children []Child
	for i := range n {
		s, root := newStore(t)
		r.stores = append(r.stores, s)
		r.roots = append(r.roots, root)
		var l layer.Layer = s
		if wrap != nil {
			l = wrap(i, l)
		}
		children = append(children, Child{ID: brickID(i), Layer: l})
	}
	d, err := New(children, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	return r
}

func brickID(i int) string { return fmt.Sprintf("b%d", i) }

// hashed returns the hashed child of path.
func (r *rig) hashed(path string) int {
	h, err := r.d.hashedChild(r.ctx, path)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

// name returns a path in dir, starting with prefix, that hashes to child.
func (r *rig) name(dir, prefix string, child int) string {
	for i := 0; ; i++ {
		p := layer.Join(dir, fmt.Sprintf("%s%d", prefix, i))
		if r.hashed(p) == child {
			return p
		}
	}
}

func (r *rig) ok(err error, what string) {
	r.t.Helper()
	if err != nil {
		r.t.Fatalf("%s: %v", what, err)
	}
}

func (r *rig) errno(err error, want syscall.Errno, what string) {
	r.t.Helper()
	if !errors.Is(err, want) {
		r.t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

// write creates path with content through distribute.
func (r *rig) write(path, content string) layer.Attr {
	r.t.Helper()
	f, a, err := r.d.Create(r.ctx, path, layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
	r.ok(err, "create "+path)
	defer f.Release(r.ctx)
	_, err = f.Write(r.ctx, []byte(content), 0)
	r.ok(err, "write "+path)
	return a
}

// read returns path's content through distribute.
func (r *rig) read(path string) string {
	r.t.Helper()
	f, err := r.d.Open(r.ctx, path, syscall.O_RDONLY)
	r.ok(err, "open "+path)
	defer f.Release(r.ctx)
	buf := make([]byte, 1<<16)
	n, err := f.Read(r.ctx, buf, 0)
	r.ok(err, "read "+path)
	return string(buf[:n])
}

// onDisk reports what brick i holds at path: "" (nothing), "dir",
// "pointer:<linkto>" or "data:<content>" (other types: "other").
func (r *rig) onDisk(i int, path string) string {
	r.t.Helper()
	full := filepath.Join(r.roots[i], filepath.FromSlash(path))
	st, err := os.Lstat(full)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	r.ok(err, "lstat on brick")
	switch {
	case st.IsDir():
		return "dir"
	case !st.Mode().IsRegular():
		return "other"
	}
	buf := make([]byte, 256)
	if n, err := unix.Lgetxattr(full, posix.XattrLinkto, buf); err == nil {
		return "pointer:" + string(buf[:n])
	}
	data, err := os.ReadFile(full)
	r.ok(err, "read on brick")
	return "data:" + string(data)
}

// wantDisk checks what every brick holds at path (want[i] as onDisk says).
func (r *rig) wantDisk(path string, want ...string) {
	r.t.Helper()
	for i, w := range want {
		if got := r.onDisk(i, path); got != w {
			r.t.Errorf("brick %d at %s: got %q, want %q", i, path, got, w)
		}
	}
}

// names lists dir through distribute.
func (r *rig) names(dir string) []string {
	r.t.Helper()
	es, err := layer.ReadDirAll(r.ctx, r.d, dir)
	r.ok(err, "readdir "+dir)
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

// gfidOnDisk reads the gfid xattr of path on brick i.
func (r *rig) gfidOnDisk(i int, path string) layer.Gfid {
	r.t.Helper()
	var g layer.Gfid
	_, err := unix.Lgetxattr(filepath.Join(r.roots[i], filepath.FromSlash(path)), posix.XattrGfid, g[:])
	r.ok(err, "gfid xattr")
	return g
}

func removeOnDisk(root, path string) error {
	return os.RemoveAll(filepath.Join(root, filepath.FromSlash(path)))
}
