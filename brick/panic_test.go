package brick

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// panicky is a brick layer with bugs: Lookup of /boom panics, and the
// files it opens panic on Read and on Release. Everything else is a real
// posix store's.
type panicky struct {
	layer.Base
}

func (p panicky) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	if path == "/boom" {
		var m map[string]int
		m["x"]++ // a nil map write: a real bug, not a friendly panic(string)
	}
	return p.Base.Lookup(ctx, path)
}

func (p panicky) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	f, err := p.Base.Open(ctx, path, flags)
	if err != nil {
		return nil, err
	}
	return panicFile{f}, nil
}

type panicFile struct{ layer.File }

func (panicFile) Read(context.Context, []byte, int64) (int, error) { panic("read bug") }
func (panicFile) Release(context.Context) error                    { panic("release bug") }

// A panicking operation answers EIO, is logged with its stack and op, and
// the server keeps serving that connection, the others, and new ones.
func TestPanicInLayerAnswersEIO(t *testing.T) {
	store, _ := newStore(t)
	if _, err := store.Mkdir(context.Background(), "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	f, _, err := store.Create(context.Background(), "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	f.Release(context.Background())
	ts := startServer(t, panicky{layer.Base{Child: store}}, Limits{})
	c := dial(t, ts.addr)
	other := dial(t, ts.addr)

	if errno, _ := c.call(&wire.Request{Op: wire.OpLookup, Path: "/boom"}); errno != syscall.EIO {
		t.Fatalf("lookup of /boom: errno %v, want EIO", errno)
	}
	ts.log.waitLog(t, "panic in brick operation", "op=lookup", "path=/boom")
	if !contains(ts.log.String(), "assignment to entry in nil map", "panic_test.go") {
		t.Fatalf("the panic's log has no message or stack:\n%s", ts.log.String())
	}
	for _, cl := range []*rawClient{c, other, dial(t, ts.addr)} {
		if errno, _ := cl.call(&wire.Request{Op: wire.OpLookup, Path: "/d"}); errno != 0 {
			t.Fatalf("lookup after a panic: %v", errno)
		}
	}

	// A panicking read answers EIO too; the file stays usable.
	fh := c.open("/f")
	for range 2 {
		if errno, _ := c.call(&wire.Request{Op: wire.OpRead, Fh: fh, Len: 10}); errno != syscall.EIO {
			t.Fatalf("read through a panicking file: errno %v, want EIO", errno)
		}
	}
	ts.log.waitLog(t, "panic in brick operation", "op=read", "read bug")
	if errno, _ := c.call(&wire.Request{Op: wire.OpFgetattr, Fh: fh}); errno != 0 {
		t.Fatalf("fgetattr after a panicking read: %v", errno)
	}

	// Closing the connection releases its files: a panic there is logged
	// and the server goes on.
	c.nc.Close()
	ts.log.waitLog(t, "panic in brick operation", "op=release", "release bug")
	if errno, _ := other.call(&wire.Request{Op: wire.OpLookup, Path: "/"}); errno != 0 {
		t.Fatalf("lookup after a panicking release: %v", errno)
	}
	// An explicit Release panicking answers EIO and forgets the handle.
	fh = other.open("/f")
	if errno, _ := other.call(&wire.Request{Op: wire.OpRelease, Fh: fh}); errno != syscall.EIO {
		t.Fatalf("panicking release: errno %v, want EIO", errno)
	}
	if errno, _ := other.call(&wire.Request{Op: wire.OpFgetattr, Fh: fh}); errno != syscall.EBADF {
		t.Fatalf("handle after its release: errno %v, want EBADF", errno)
	}
}

// A layer with no child at all (every operation a nil dereference) still
// answers EIO rather than taking the server down.
func TestNilLayerAnswersEIO(t *testing.T) {
	ts := startServer(t, layer.Base{}, Limits{})
	c := dial(t, ts.addr)
	for _, r := range []*wire.Request{
		{Op: wire.OpLookup, Path: "/x"},
		{Op: wire.OpMkdir, Path: "/x", Mode: 0o755},
		{Op: wire.OpReaddir, Path: "/", Max: 10},
		{Op: wire.OpGetxattr, Path: "/", Name: "user.x"},
	} {
		if errno, _ := c.call(r); errno != syscall.EIO {
			t.Errorf("%s on a nil layer: errno %v, want EIO", wire.OpName(r.Op), errno)
		}
	}
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
