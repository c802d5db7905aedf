package brick

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/protocol"
)

// fenceClient connects a real client giving layout generation gen.
func fenceClient(t *testing.T, addr string, gen uint64) *protocol.Client {
	t.Helper()
	c := protocol.New(protocol.Config{Addr: addr, BrickID: testBrick, VolumeID: testVolume,
		ConnectWait: 10 * time.Second, Layout: gen, DirLeases: true, OnRecall: func(string) {}})
	t.Cleanup(func() { c.Close() })
	return c
}

// A brick's fence refuses the operations that make names to connections
// of an older layout generation, and only those; healers (generation 0)
// and newer clients pass; the fence never goes down.
func TestFenceRefusesNamesFromOlderLayouts(t *testing.T) {
	st, _ := newStore(t)
	ts := startServer(t, st, DefaultLimits())
	ctx := context.Background()
	old, cur, healer := fenceClient(t, ts.addr, 5), fenceClient(t, ts.addr, 7), fenceClient(t, ts.addr, 0)
	if _, err := old.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatalf("mkdir before any fence: %v", err)
	}
	f, _, err := old.Create(ctx, "/d/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if !ts.srv.SetFence(testBrick, 7) || ts.srv.SetFence("no-such-brick", 7) {
		t.Fatal("SetFence: served brick not found, or another one found")
	}
	ts.srv.SetFence(testBrick, 3) // never lowers it
	fenced := map[string]func(c *protocol.Client) error{
		"create": func(c *protocol.Client) error {
			_, _, err := c.Create(ctx, "/d/new", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
			return err
		},
		"mkdir": func(c *protocol.Client) error {
			_, err := c.Mkdir(ctx, "/d/sub", layer.MkdirIn{Mode: 0o755})
			return err
		},
		"mknod": func(c *protocol.Client) error {
			_, err := c.Mknod(ctx, "/d/fifo", layer.MknodIn{Mode: syscall.S_IFIFO | 0o644})
			return err
		},
		"symlink": func(c *protocol.Client) error {
			_, err := c.Symlink(ctx, "/d/sl", layer.SymlinkIn{Target: "f"})
			return err
		},
		"link":   func(c *protocol.Client) error { _, err := c.Link(ctx, "/d/f", "/d/hl"); return err },
		"rename": func(c *protocol.Client) error { return c.Rename(ctx, "/d/f", "/d/g", 0) },
	}
	for name, op := range fenced {
		if err := op(old); !errors.Is(err, layer.ErrFenced) {
			t.Errorf("%s by an older layout: %v, want ErrFenced", name, err)
		}
	}
	// What makes no name passes: lookups, writes, attributes, removals.
	if _, err := old.Lookup(ctx, "/d/f"); err != nil {
		t.Errorf("lookup by an older layout: %v", err)
	}
	if _, err := f.Write(ctx, []byte("x"), 0); err != nil {
		t.Errorf("write by an older layout: %v", err)
	}
	if _, err := old.Setattr(ctx, "/d/f", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o600}); err != nil {
		t.Errorf("setattr by an older layout: %v", err)
	}
	f.Release(ctx)
	// The current layout and a healer make names.
	for _, c := range []*protocol.Client{cur, healer} {
		if _, err := c.Mkdir(ctx, "/d/sub", layer.MkdirIn{Mode: 0o755}); err != nil {
			t.Errorf("mkdir by a current client or a healer: %v", err)
		}
		if err := c.Rmdir(ctx, "/d/sub"); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Unlink(ctx, "/d/f"); err != nil {
		t.Errorf("unlink by an older layout: %v", err)
	}
}

// The fence is checked after an operation waited (for another client's
// directory lease, or a healer's entry lock): raised while it waits, the
// create is refused (a review, 2026-11-28: it ran).
func TestFenceRaisedWhileParkedRefuses(t *testing.T) {
	st, _ := newStore(t)
	ts := startServer(t, st, DefaultLimits())
	ctx := context.Background()
	recalled, release := make(chan struct{}), make(chan struct{})
	holder := protocol.New(protocol.Config{Addr: ts.addr, BrickID: testBrick, VolumeID: testVolume,
		ConnectWait: 10 * time.Second, Layout: 7, DirLeases: true,
		OnRecall: func(string) { close(recalled); <-release }})
	t.Cleanup(func() { holder.Close() })
	stale := fenceClient(t, ts.addr, 5)
	if _, err := holder.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil { // leased to holder
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := stale.Create(ctx, "/d/late", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
		done <- err
	}()
	<-recalled // the stale create passed the fence check and waits for the lease
	ts.srv.SetFence(testBrick, 7)
	close(release)
	if err := <-done; err == nil {
		t.Fatal("a create parked before the fence went up made its name after it")
	}
}
