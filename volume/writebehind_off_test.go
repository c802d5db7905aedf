package volume

import (
	"context"
	"github.com/mortarfs/mortar/volume/options"
	"syscall"
	"testing"
)

// A write held by a file of a graph with write-behind is seen through a
// graph built after write-behind was turned off: that graph keeps the
// layer, windowless, to send the windows it shares. (Found by review.)
func TestWriteBehindTurnedOff(t *testing.T) {
	spec, _ := serveBricks(t, 1)
	spec.Options[options.OptQuickRead] = "off"
	l, _ := newLive(t, spec)
	ctx := context.Background()
	w := create(t, l, "/f", "first")
	defer w.Release(ctx)
	if _, err := w.Write(ctx, []byte(" second"), 5); err != nil {
		t.Fatal(err)
	}
	spec = next(spec, 0)
	spec.Options[options.OptQuickRead] = "off"
	spec.Options[options.OptWriteBehind] = "off"
	if err := l.Swap(spec); err != nil {
		t.Fatal(err)
	}
	r, err := l.Open(ctx, "/f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	if got, err := readAll(ctx, r); err != nil || got != "first second" {
		t.Fatalf("read on the new graph (write-behind off): %q, %v", got, err)
	}
}
