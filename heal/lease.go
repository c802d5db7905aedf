package heal

import (
	"context"
	"errors"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// Several healers of one volume (one per node serving its bricks) take
// turns: with Options.Lease a healer heals set si (index scans and full
// crawls; Heal and Resolve, which an operator asks for, are not held
// back) only while Options.Active says so and it holds the heal lease
// (layer.HealLeaser) of most of the set's bricks. Leases are taken in
// brick order, and a healer that finds one held by another lets go of
// all it took: two healers never each hold part of a set forever, and
// two never hold most of one at once. A lease goes with its holder's
// connection, so a healer that dies (its node's daemon killed) lets go,
// and another takes the set at its next scan.

// mayHeal reports whether this healer heals set si now, taking or
// keeping its lease, or letting it go when it is not active for it.
func (h *Healer) mayHeal(ctx context.Context, si int) bool {
	if h.activeFor == nil && !h.lease {
		return true
	}
	h.leaseMu.Lock()
	defer h.leaseMu.Unlock()
	if h.activeFor != nil && !h.activeFor(si) {
		h.unlease(ctx, si)
		return false
	}
	if !h.lease {
		return true
	}
	if h.takeLease(ctx, si) {
		return true
	}
	h.unlease(ctx, si)
	return false
}

// takeLease (under leaseMu) takes (or keeps) the heal lease of the reachable bricks of
// set si in brick order, stopping at one another healer holds, and
// reports whether it holds most of the set's. A brick that cannot lease
// (not a brick over the network) counts as held.
func (h *Healer) takeLease(ctx context.Context, si int) bool {
	held := 0
	for r, rep := range h.sets[si] {
		l, ok := rep.Layer.(layer.HealLeaser)
		if !ok {
			held++
			continue
		}
		if !h.up(si, r) {
			continue
		}
		err := l.LeaseHeal(ctx)
		if errors.Is(err, syscall.EAGAIN) {
			h.log.Debug("another healer holds the set's lease", "replica", rep.Name)
			return false
		}
		if err == nil {
			h.leased[si] |= replicate.Bit(r)
			held++
		}
	}
	return held > len(h.sets[si])/2
}

// unlease (under leaseMu) lets go of the leases this healer holds on set si.
func (h *Healer) unlease(ctx context.Context, si int) {
	for r, rep := range h.sets[si] {
		if l, ok := rep.Layer.(layer.HealLeaser); ok && h.leased[si].Has(r) {
			l.UnleaseHeal(context.WithoutCancel(ctx)) //nolint:errcheck // a closed connection lets go too
		}
	}
	h.leased[si] = 0
}
