package protocol

import (
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
	"github.com/mortarfs/mortar/layer/locks"
)

// The whole contract holds across the network: client → TCP on 127.0.0.1
// → brick server → locks → posix storage.
func newRemote(t *testing.T) layer.Layer {
	b := newTestBrick(t)
	b.srv.Add("brick-1", testVolume, locks.New(b.store))
	return b.client(t, Config{})
}

func TestConformance(t *testing.T) { layertest.Run(t, newRemote) }

func TestLocksConformance(t *testing.T) { layertest.RunLocks(t, newRemote) }
