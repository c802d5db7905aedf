package brick

import (
	"sync/atomic"

	"github.com/mortarfs/mortar/layer"
)

// The layout fence (wire.ChallengeSize): a connection carries the layout
// generation its client gave in the handshake, a brick the lowest one it
// lets make names. The cluster raises a brick's fence once the volume's
// clients have taken a new layout, before a rebalance moves files: a
// client still on an older layout (cut off from the cluster) would make
// names where that layout puts them, in directories the rebalance has
// passed. A generation of 0 (a healer, or a client older than wire
// version 14) is never fenced.

// fence is a brick's lowest admitted layout generation.
type fence struct{ min atomic.Uint64 }

// raise sets the fence to gen unless it is higher already; it never
// goes down (a late or repeated order cannot open it again).
func (f *fence) raise(gen uint64) {
	for {
		cur := f.min.Load()
		if gen <= cur || f.min.CompareAndSwap(cur, gen) {
			return
		}
	}
}

// SetFence raises brick id's fence to gen: from then on its connections
// of a lower layout generation are refused the operations that make
// names (layer.ErrFenced). It reports whether the brick is served here.
func (s *Server) SetFence(id string, gen uint64) bool {
	s.mu.Lock()
	b := s.bricks[id]
	s.mu.Unlock()
	if b == nil {
		return false
	}
	b.fence.raise(gen)
	b.dirLeases.recallBelow(gen)
	return true
}

// fenced refuses op on c if it makes a name and c's layout generation is
// below its brick's fence.
func (c *conn) fenced(op uint8) error {
	if !makesNames[op] || !c.below(c.fence.min.Load()) {
		return nil
	}
	return layer.ErrFenced
}

// below reports whether c's layout generation is below fence gen.
func (c *conn) below(gen uint64) bool { return c.layoutGen != 0 && c.layoutGen < gen }

// recallBelow recalls the directory leases of the connections whose
// layout generation is below fence gen: the creates they hold back would
// be refused when sent, and without the lease their next ones are asked
// of the brick at once (and refused then, not at the file's close).
func (t *dirLeases) recallBelow(gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.byPath {
		if l.id != 0 && l.holder.below(gen) {
			t.recallLocked(l)
		}
	}
}
