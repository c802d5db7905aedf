package quickread

import (
	"context"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/distribute"
	"github.com/mortarfs/mortar/layer/layertest"
	"github.com/mortarfs/mortar/layer/replicate"
)

// kernel looks a name up before every open of it, as the kernel does when
// its entry cache has expired: every open the suite makes for reading is
// then one quick-read may serve from memory.
type kernel struct{ *Layer }

func (k kernel) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	k.Layer.Lookup(ctx, path)
	return k.Layer.Open(ctx, path, flags)
}

// replicated is quick-read as a volume stacks it: on distribute over a
// replica set of three real bricks over the network; wrap, if not nil,
// wraps each brick's client.
func replicated(t *testing.T, wrap func(layer.Layer) layer.Layer) *Layer {
	set := testbrick.NewSet(t, 3, testVolume, func(int) posix.Options { return posix.Options{} })
	var members []replicate.Child
	for i, c := range set.Clients {
		var l layer.Layer = c
		if wrap != nil {
			l = wrap(c)
		}
		members = append(members, replicate.Child{Name: set.Name(i), Layer: l, Up: c.Connected})
	}
	r, err := replicate.New(members, replicate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := distribute.New([]distribute.Child{{ID: set.Bricks[0].ID, Layer: r}}, distribute.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return New(d, Options{})
}

// The whole contract holds with every open served from memory that can be.
func TestConformance(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer { return kernel{newRig(t, Options{}).l} })
}

func TestConformanceReplicated(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer { return kernel{replicated(t, nil)} })
}

func TestLocksConformanceReplicated(t *testing.T) {
	layertest.RunLocks(t, func(t *testing.T) layer.Layer { return kernel{replicated(t, nil)} })
}

// On a replica set, the lookup asks one brick for the content and the
// others for attributes, in one round trip; the open that follows, its
// reads and its close reach no brick.
func TestReplicatedCatCostsOneLookup(t *testing.T) {
	var counts []*layertest.Counting
	l := replicated(t, func(c layer.Layer) layer.Layer {
		counted := layertest.NewCounting(c)
		counts = append(counts, counted)
		return counted
	})
	ctx := context.Background()
	f, _, err := l.Create(ctx, "/small", layer.CreateIn{Flags: syscall.O_WRONLY, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	f.Write(ctx, []byte("ten bytes\n"), 0)
	f.Release(ctx)
	for _, c := range counts {
		c.Reset()
	}
	if _, err := l.Lookup(ctx, "/small"); err != nil {
		t.Fatal(err)
	}
	withData, lookups := 0, 0
	for _, c := range counts {
		withData += c.Count("LookupData")
		lookups += c.Count("Lookup")
		if c.Total() != 1 {
			t.Errorf("the lookup made %d calls to one brick, want 1", c.Total())
		}
		c.Reset()
	}
	if withData != 1 || lookups != 2 {
		t.Errorf("the lookup asked %d bricks for content and %d for attributes, want 1 and 2", withData, lookups)
	}
	f, err = l.Open(ctx, "/small", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := f.Read(ctx, buf, 0)
	if err != nil || string(buf[:n]) != "ten bytes\n" {
		t.Errorf("read: %q, %v", buf[:n], err)
	}
	if n, _ := f.Read(ctx, buf, 10); n != 0 {
		t.Errorf("read at the end: %d bytes", n)
	}
	f.Flush(ctx, 1)
	f.Release(ctx)
	for i, c := range counts {
		if c.Total() != 0 {
			t.Errorf("brick %d: %d calls for the open, reads and close, want none", i, c.Total())
		}
	}
}
