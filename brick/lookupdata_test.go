package brick

import (
	"bytes"
	"context"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// putFile creates path on l with data.
func putFile(t *testing.T, l layer.Layer, path string, data []byte) layer.Attr {
	t.Helper()
	ctx := context.Background()
	f, _, err := l.Create(ctx, path, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	if _, err := f.Write(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	a, err := f.Getattr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// lookupData sends OpLookupData and decodes the answer.
func (c *rawClient) lookupData(path string, max uint32) (layer.Attr, []byte, syscall.Errno) {
	return c.lookupFlags(path, max, 0)
}

func (c *rawClient) lookupFlags(path string, max, flags uint32) (layer.Attr, []byte, syscall.Errno) {
	c.t.Helper()
	errno, p := c.call(&wire.Request{Op: wire.OpLookupData, Path: path, Max: max, Flags: flags})
	if errno != 0 {
		return layer.Attr{}, nil, errno
	}
	d := wire.Dec{B: p}
	a, data := d.LookupData()
	if err := d.Done(); err != nil {
		c.t.Fatalf("lookupdata %s: %v", path, err)
	}
	return a, data, 0
}

// The content comes with the attributes for a small regular file only:
// not for one larger than the client's max (or than the brick's cap,
// whatever the client asks), a directory, a symlink or a distribute
// pointer. An empty file's content is given, and empty.
func TestLookupData(t *testing.T) {
	store, _ := newStore(t)
	ctx := context.Background()
	small := []byte("ten bytes\n")
	putFile(t, store, "/small", small)
	putFile(t, store, "/empty", nil)
	putFile(t, store, "/big", bytes.Repeat([]byte("x"), 70000))
	putFile(t, store, "/huge", bytes.Repeat([]byte("y"), maxLookupData+1))
	if _, err := store.Mkdir(ctx, "/dir", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Symlink(ctx, "/sym", layer.SymlinkIn{Target: "small"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Mknod(ctx, "/ptr", layer.MknodIn{Mode: syscall.S_IFREG | 0o1000, Linkto: "brick-2"}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, startServer(t, store, Limits{}).addr)

	for _, tc := range []struct {
		path string
		max  uint32
		want []byte // nil: not given
	}{
		{"/small", 65536, small},
		{"/small", 10, small},
		{"/small", 9, nil},
		{"/empty", 65536, []byte{}},
		{"/big", 65536, nil},
		{"/big", 70000, bytes.Repeat([]byte("x"), 70000)},
		{"/huge", 4 << 20, nil},
		{"/dir", 65536, nil},
		{"/sym", 65536, nil},
		{"/ptr", 65536, nil},
	} {
		a, data, errno := c.lookupData(tc.path, tc.max)
		want, _ := store.Lookup(ctx, tc.path)
		if errno != 0 || a.Gfid != want.Gfid || a.Size != want.Size || a.Mode != want.Mode {
			t.Errorf("%s max %d: attr %+v, errno %v; want %+v", tc.path, tc.max, a, errno, want)
		}
		if (data == nil) != (tc.want == nil) || !bytes.Equal(data, tc.want) {
			t.Errorf("%s max %d: %d bytes (nil %v), want %d (nil %v)", tc.path, tc.max, len(data), data == nil, len(tc.want), tc.want == nil)
		}
	}
	if _, _, errno := c.lookupData("/missing", 65536); errno != syscall.ENOENT {
		t.Errorf("missing file: errno %v, want ENOENT", errno)
	}
	if _, _, errno := c.lookupData("/../x", 65536); errno != syscall.EINVAL {
		t.Errorf("escaping path: errno %v, want EINVAL", errno)
	}
}

// With wire.LookupFragment the content is the file as it lies, whole, if
// it is at most max bytes long: here (not a disperse brick) its size.
func TestLookupFragment(t *testing.T) {
	store, _ := newStore(t)
	small := []byte("ten bytes\n")
	putFile(t, store, "/small", small)
	c := dial(t, startServer(t, store, Limits{}).addr)
	for _, tc := range []struct {
		max  uint32
		want []byte
	}{{100, small}, {10, small}, {9, nil}} {
		a, data, errno := c.lookupFlags("/small", tc.max, wire.LookupFragment)
		if errno != 0 || a.Size != 10 || !bytes.Equal(data, tc.want) || (data == nil) != (tc.want == nil) {
			t.Errorf("max %d: size %d, %q, errno %v; want %q", tc.max, a.Size, data, errno, tc.want)
		}
	}
}

// changer changes a file as soon as the brick opens it, as another client
// writing at that moment would.
type changer struct {
	layer.Base
	t *testing.T
}

func (c changer) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	f, err := c.Child.Open(ctx, path, flags)
	if err == nil {
		w, werr := c.Child.Open(ctx, path, syscall.O_WRONLY)
		if werr != nil {
			c.t.Fatal(werr)
		}
		w.Write(ctx, []byte("changed, longer"), 0)
		w.Release(ctx)
	}
	return f, err
}

// A file that changes while the brick reads it is answered with the
// attributes after the change and without content.
func TestLookupDataChangedMeanwhile(t *testing.T) {
	store, _ := newStore(t)
	putFile(t, store, "/f", []byte("before"))
	c := dial(t, startServer(t, changer{Base: layer.Base{Child: store}, t: t}, Limits{}).addr)
	a, data, errno := c.lookupData("/f", 65536)
	if errno != 0 || data != nil || a.Size != uint64(len("changed, longer")) {
		t.Fatalf("got size %d, %q (nil %v), errno %v; want the new size and no content", a.Size, data, data == nil, errno)
	}
}

// Reading the content for a lookup leaves the file's atime alone: a stat
// must not change what the next stat shows.
func TestLookupDataKeepsAtime(t *testing.T) {
	store, _ := newStore(t)
	ctx := context.Background()
	putFile(t, store, "/f", []byte("content"))
	at := layer.Timespec{Sec: 1_500_000_000}
	if _, err := store.Setattr(ctx, "/f", layer.SetattrIn{Valid: layer.SetAtime, Atime: at}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, startServer(t, store, Limits{}).addr)
	if _, data, errno := c.lookupData("/f", 1024); errno != 0 || string(data) != "content" {
		t.Fatalf("lookupdata: %q, %v", data, errno)
	}
	if a, err := store.Lookup(ctx, "/f"); err != nil || a.Atime != at {
		t.Fatalf("atime after lookupdata: %+v, %v; want %+v", a.Atime, err, at)
	}
}
