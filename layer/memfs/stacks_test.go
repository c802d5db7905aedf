package memfs_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/crypt"
	"github.com/mortarfs/mortar/layer/distribute"
	"github.com/mortarfs/mortar/layer/layertest"
	"github.com/mortarfs/mortar/layer/locks"
	"github.com/mortarfs/mortar/layer/mdcache"
	"github.com/mortarfs/mortar/layer/memfs"
	"github.com/mortarfs/mortar/layer/nlcache"
	"github.com/mortarfs/mortar/layer/quickread"
	"github.com/mortarfs/mortar/layer/readahead"
	"github.com/mortarfs/mortar/layer/readdirahead"
	"github.com/mortarfs/mortar/layer/replicate"
	"github.com/mortarfs/mortar/layer/writebehind"
)

// The conformance suite over stacks of layers on memfs, each in one
// process and without a disk: what memfs is for.
func TestStacksOnMemfs(t *testing.T) {
	key := bytes.Repeat([]byte{7}, crypt.KeySize)
	stacks := map[string]func(t *testing.T) layer.Layer{
		"mdcache":      func(*testing.T) layer.Layer { return mdcache.New(memfs.New(), mdcache.Options{}) },
		"nlcache":      func(*testing.T) layer.Layer { return nlcache.New(memfs.New(), nlcache.Options{}) },
		"quickread":    func(*testing.T) layer.Layer { return quickread.New(memfs.New(), quickread.Options{}) },
		"readdirahead": func(*testing.T) layer.Layer { return readdirahead.New(memfs.New(), readdirahead.Options{}) },
		"writebehind":  func(*testing.T) layer.Layer { return writebehind.New(memfs.New(), writebehind.Options{}) },
		"readahead":    func(*testing.T) layer.Layer { return readahead.New(memfs.New()) },
		"crypt": func(t *testing.T) layer.Layer {
			l, err := crypt.New(memfs.New(), key, crypt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		"distribute3": func(t *testing.T) layer.Layer {
			var children []distribute.Child
			for i := range 3 {
				children = append(children, distribute.Child{ID: fmt.Sprintf("m%d", i), Layer: memfs.New()})
			}
			d, err := distribute.New(children, distribute.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		"replicate2": func(t *testing.T) layer.Layer {
			r, err := replicate.New([]replicate.Child{{Name: "m0", Layer: memfs.New()}, {Name: "m1", Layer: memfs.New()}}, replicate.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
	}
	for name, newLayer := range stacks {
		t.Run(name, func(t *testing.T) { layertest.Run(t, newLayer) })
	}
	t.Run("locks", func(t *testing.T) {
		layertest.RunLocks(t, func(*testing.T) layer.Layer { return locks.New(memfs.New()) })
	})
}
