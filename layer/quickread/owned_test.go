package quickread

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/protocol"
)

// leasing is a client of a real brick that asks for directory leases,
// with its lookups counted.
type leasing struct {
	*protocol.Client
	lookups atomic.Int32
}

func (c *leasing) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	c.lookups.Add(1)
	return c.Client.Lookup(ctx, path)
}

func (c *leasing) LookupData(ctx context.Context, path string, max int) (layer.Attr, []byte, error) {
	c.lookups.Add(1)
	return c.Client.LookupData(ctx, path, max)
}

// A file this client made in one go in a directory it leases is served
// from memory — lookups and any number of opens, past the timeout — until
// another client touches the name: its brick recalls the lease, and the
// next lookup goes to the brick and sees that client's content.
func TestOwnedFileServedUntilAnotherClientTouchesIt(t *testing.T) {
	ctx := context.Background()
	b := testbrick.New(t, "b1", testVolume, posix.Options{})
	cfg := protocol.Config{Addr: b.Addr, BrickID: b.ID, VolumeID: testVolume, ConnectWait: time.Second}
	mine := cfg
	mine.DirLeases = true
	c := &leasing{Client: protocol.New(mine)}
	t.Cleanup(func() { c.Close() })
	other := protocol.New(cfg)
	t.Cleanup(func() { other.Close() })
	l := New(c, Options{Timeout: 10 * time.Millisecond})

	if _, err := l.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	f, a, err := l.Create(ctx, "/d/f", layer.CreateIn{Flags: syscall.O_WRONLY | syscall.O_CREAT | syscall.O_EXCL, Mode: 0o644, Data: []byte("hello")})
	if err != nil || a.Size != 5 {
		t.Fatalf("made in one go: %+v, %v", a, err)
	}
	f.Release(ctx)
	time.Sleep(20 * time.Millisecond) // past the timeout: only ownership keeps it
	for range 3 {
		if got, err := l.Lookup(ctx, "/d/f"); err != nil || got.Gfid != a.Gfid || got.Size != 5 {
			t.Fatalf("lookup: %+v, %v", got, err)
		}
		if got := catFrom(t, l, "/d/f"); got != "hello" {
			t.Fatalf("read %q", got)
		}
	}
	if n := c.lookups.Load(); n != 0 {
		t.Fatalf("%d lookups reached the brick for a file the client owns", n)
	}

	// Another client writes it: opening it by path recalls the lease.
	of, err := other.Open(ctx, "/d/f", syscall.O_WRONLY|syscall.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := of.Write(ctx, []byte("theirs!"), 0); err != nil {
		t.Fatal(err)
	}
	of.Release(ctx)
	if got, err := l.Lookup(ctx, "/d/f"); err != nil || got.Size != 7 {
		t.Fatalf("lookup after another client's write: %+v, %v", got, err)
	}
	if got := catFrom(t, l, "/d/f"); got != "theirs!" {
		t.Fatalf("read after another client's write: %q", got)
	}
	if c.lookups.Load() == 0 {
		t.Fatal("no lookup reached the brick after the lease was recalled")
	}
}

// A file the client made and then changes through the layer is no longer
// served from what it made.
func TestOwnedFileDroppedByOwnWrite(t *testing.T) {
	ctx := context.Background()
	b := testbrick.New(t, "b1", testVolume, posix.Options{})
	c := protocol.New(protocol.Config{Addr: b.Addr, BrickID: b.ID, VolumeID: testVolume, ConnectWait: time.Second, DirLeases: true})
	t.Cleanup(func() { c.Close() })
	l := New(c, Options{})
	if _, err := l.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	f, _, err := l.Create(ctx, "/d/f", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_CREAT | syscall.O_EXCL, Mode: 0o644, Data: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(ctx, []byte("J"), 0); err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	if got := catFrom(t, l, "/d/f"); got != "Jello" {
		t.Fatalf("read %q after writing through the layer", got)
	}
}

func catFrom(t *testing.T, l layer.Layer, path string) string {
	t.Helper()
	ctx := context.Background()
	f, err := l.Open(ctx, path, syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	buf := make([]byte, 100)
	n, err := f.Read(ctx, buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}
