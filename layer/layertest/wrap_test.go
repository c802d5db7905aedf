package layertest_test

import (
	"context"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
	"github.com/mortarfs/mortar/layer/locks"
)

func newStore(t *testing.T) layer.Layer {
	dir := t.TempDir()
	if err := posix.Mark(dir, "v", true); err != nil {
		t.Fatal(err)
	}
	s, err := posix.New(dir, posix.Options{VolumeID: "v"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The wrappers pass everything through unchanged.
func TestFaultConformance(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer { return layertest.NewFault(newStore(t)) })
}

func TestCountingLocksConformance(t *testing.T) {
	layertest.RunLocks(t, func(t *testing.T) layer.Layer {
		return layertest.NewCounting(locks.New(newStore(t)))
	})
}

func TestFault(t *testing.T) {
	ctx := context.Background()
	f := layertest.NewFault(newStore(t))
	f.Fail("Lookup", syscall.EIO)
	if _, err := f.Lookup(ctx, "/"); err != syscall.EIO {
		t.Fatalf("failed lookup: %v", err)
	}
	f.Fail("Lookup", nil)
	if _, err := f.Lookup(ctx, "/"); err != nil {
		t.Fatalf("lookup after Fail(nil): %v", err)
	}
	file, _, err := f.Create(ctx, "/x", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	f.Fail("Write", syscall.ENOSPC)
	f.Fail("Mkdir", syscall.EROFS)
	if _, err := file.Write(ctx, []byte("x"), 0); err != syscall.ENOSPC {
		t.Fatalf("failed write: %v", err)
	}
	if _, err := f.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != syscall.EROFS {
		t.Fatalf("failed mkdir: %v", err)
	}
	f.Clear()
	if _, err := file.Write(ctx, []byte("x"), 0); err != nil {
		t.Fatalf("write after Clear: %v", err)
	}
	f.Fail("Release", syscall.EIO)
	if err := file.Release(ctx); err != syscall.EIO {
		t.Fatalf("failed release: %v", err)
	}
}

func TestCounting(t *testing.T) {
	ctx := context.Background()
	c := layertest.NewCounting(newStore(t))
	c.Lookup(ctx, "/")
	c.Lookup(ctx, "/missing")
	file, _, err := c.Create(ctx, "/x", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	file.Write(ctx, []byte("x"), 0)
	file.Release(ctx)
	if c.Count("Lookup") != 2 || c.Count("Create") != 1 || c.Count("Write") != 1 ||
		c.Count("Release") != 1 || c.Count("Readdir") != 0 || c.Total() != 5 {
		t.Fatalf("counts: lookup %d create %d write %d release %d total %d",
			c.Count("Lookup"), c.Count("Create"), c.Count("Write"), c.Count("Release"), c.Total())
	}
	c.Reset()
	if c.Count("Lookup") != 0 || c.Total() != 0 {
		t.Fatal("Reset did not reset")
	}
}
