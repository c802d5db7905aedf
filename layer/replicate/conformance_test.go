package replicate

import (
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/distribute"
	"github.com/mortarfs/mortar/layer/layertest"
)

// The whole contract holds on a replica set of three real bricks over the
// network, and on one with an arbiter.
func TestConformance(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer { return newRig(t, 3, false, Options{}).r })
}

func TestConformanceArbiter(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer { return newRig(t, 3, true, Options{}).r })
}

func TestLocksConformance(t *testing.T) {
	layertest.RunLocks(t, func(t *testing.T) layer.Layer { return newRig(t, 3, false, Options{}).r })
}

// Distributed-replicate: distribute over two replica sets of three.
func TestConformanceDistributed(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer {
		var children []distribute.Child
		for k := 0; k < 2; k++ {
			g := newRig(t, 3, false, Options{})
			children = append(children, distribute.Child{ID: g.bricks[0].ID + "-" + string(rune('a'+k)), Layer: g.r})
		}
		d, err := distribute.New(children, distribute.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}
