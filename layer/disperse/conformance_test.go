package disperse

import (
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/distribute"
	"github.com/mortarfs/mortar/layer/layertest"
)

// The whole contract holds on disperse sets of real bricks over the
// network: 2+1, and 4+2 under distribute.
func TestConformance(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer { return newRig(t, 3, 1).d })
}

func TestLocksConformance(t *testing.T) {
	layertest.RunLocks(t, func(t *testing.T) layer.Layer { return newRig(t, 3, 1).d })
}

func TestConformanceDistributed(t *testing.T) {
	layertest.Run(t, func(t *testing.T) layer.Layer {
		var children []distribute.Child
		for k := 0; k < 2; k++ {
			g := newRig(t, 6, 2)
			children = append(children, distribute.Child{ID: g.bricks[0].ID + "-" + string(rune('a'+k)), Layer: g.d})
		}
		d, err := distribute.New(children, distribute.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}
