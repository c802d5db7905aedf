package distribute

import (
	"fmt"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
)

// TestConformance runs the layer conformance suite on distribute over 1, 3
// and 5 posix bricks.
func TestConformance(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("children=%d", n), func(t *testing.T) {
			layertest.Run(t, func(t *testing.T) layer.Layer { return newRig(t, n, nil).d })
		})
	}
}
