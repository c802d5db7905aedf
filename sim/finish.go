package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mortarfs/mortar/heal"
	"github.com/mortarfs/mortar/volume"
)

// healWithin bounds the heal at the end of a run.
const healWithin = time.Minute

// finish lifts every fault, closes what the clients hold open, heals,
// and checks: every set's bricks agree (an index heal alone must make
// them agree; a difference it leaves is reported as Unmarked, and must
// be gone after a full heal), nothing is in split-brain, and every client
// reads what the model says.
func (r *run) finish() error {
	r.note("finish: faults lifted, bricks restarted, heal")
	r.w.net.mendAll()
	for _, b := range r.w.bricks {
		r.w.fill(b, false)
		if b.srv == nil {
			if err := r.w.start(b); err != nil {
				return err
			}
		}
	}
	if err := waitFor(15*time.Second, r.connected); err != nil {
		return violated("clients did not reconnect: %v", err)
	}
	if err := r.closeAll(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.w.healer.Run(ctx)
	if err := r.healed(ctx); err != nil {
		if !r.indexEmpty(ctx) {
			return violated("not healed in %v: %v\n%s", healWithin, err, r.pending(ctx))
		}
		r.rep.Unmarked = err.Error()
		if err := r.w.healer.Full(ctx); err != nil {
			return violated("full heal: %v", err)
		}
		if err := r.healed(ctx); err != nil {
			return violated("not healed by a full heal: %v", err)
		}
	}
	if sb, err := r.w.healer.SplitBrain(ctx); err != nil || len(sb) > 0 {
		return violated("split-brain after heal: %v %v", sb, err)
	}
	if r.w.spec.Previous != nil {
		if err := r.completeRebalance(); err != nil {
			return err
		}
		if err := r.healed(ctx); err != nil {
			return violated("after the rebalance: %v\n%s", err, r.pending(ctx))
		}
	}
	if err := r.checkMoved(); err != nil {
		return err
	}
	return r.checkAll()
}

func (r *run) connected() bool {
	for _, c := range r.w.clients {
		if !c.graph.Connected() {
			return false
		}
	}
	for _, c := range r.w.hclient {
		if !c.Connected() {
			return false
		}
	}
	return true
}

// closeAll closes every file the clients hold open: nothing fails now.
func (r *run) closeAll() error {
	ctx, cancel := opCtx()
	defer cancel()
	for i, c := range r.w.clients {
		for _, f := range c.open {
			if err := f.f.Release(ctx); err != nil {
				return violated("client %d: close %s with every brick up: %v", i, f.path, err)
			}
		}
		c.open = nil
	}
	return nil
}

// healed waits until the heal indexes are empty and every set's bricks
// agree; the error is the last difference seen.
func (r *run) healed(ctx context.Context) error {
	var last error
	err := waitFor(healWithin, func() bool {
		last = nil
		if !r.indexEmpty(ctx) {
			last = fmt.Errorf("heal indexes not empty")
			return false
		}
		for _, s := range r.w.sets {
			if err := heal.CompareSet(ctx, r.comparable(s), "/"); err != nil {
				last = err
				return false
			}
		}
		return true
	})
	if err != nil {
		return last
	}
	return nil
}

// comparable is s as CompareSet should see it: fragments of a dispersed
// file differ by design, so their data is left out (as an arbiter's).
func (r *run) comparable(s heal.Set) heal.Set {
	if r.w.spec.Type != volume.Disperse {
		return s
	}
	out := make(heal.Set, len(s))
	for i, rep := range s {
		rep.Arbiter = true
		out[i] = rep
	}
	return out
}

// pending lists what the heal indexes still hold.
func (r *run) pending(ctx context.Context) string {
	info, err := r.w.healer.Info(ctx)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, rep := range info.Replicas {
		for _, e := range rep.Entries {
			fmt.Fprintf(&b, "%s: %s blames %v dirty %v\n", rep.Name, e.Path, e.Pending, e.Dirty)
		}
	}
	sb, _ := r.w.healer.SplitBrain(ctx)
	for _, e := range sb {
		fmt.Fprintf(&b, "split-brain: set %d %s\n", e.Set, e.Path)
	}
	return b.String()
}

func (r *run) indexEmpty(ctx context.Context) bool {
	info, err := r.w.healer.Info(ctx)
	if err != nil {
		return false
	}
	for _, rep := range info.Replicas {
		if !rep.Up || rep.Count > 0 {
			return false
		}
	}
	return true
}

// checkAll reads every path and lists every directory through every
// client.
func (r *run) checkAll() error {
	for i, c := range r.w.clients {
		for _, p := range r.paths {
			got, err := readFile(c.graph.Top, r.finalPath(p))
			if err != nil && unavailable(err) {
				return violated("client %d: read %s with every brick up: %v", i, p, err)
			}
			if err := r.check(p, got, err); err != nil {
				return fmt.Errorf("client %d after heal: %w", i, err)
			}
		}
	}
	return nil
}
