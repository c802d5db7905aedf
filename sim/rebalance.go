package sim

import (
	"context"
	"fmt"
	"slices"

	"github.com/mortarfs/mortar/layer/distribute"
	"github.com/mortarfs/mortar/volume"
)

// rebalancerClient is the network identity of the rebalancer's graph: no
// fault is injected on its links (bricks still crash under it).
const rebalancerClient = -2

// rebalancer is a rebalance under way (Config.Grow), as a node's
// management daemon runs one: distribute.Rebalance over a graph of the
// volume's spec, in a goroutine parked after every directory until the run
// lets it go on. It so interleaves with the clients' operations and faults
// step by step, and a seed replays the same moves.
type rebalancer struct {
	graph  *volume.Graph
	d      *distribute.Distribute
	resume chan struct{} // lets the walk go on past a directory
	parked chan struct{} // the walk finished a directory
	ended  chan struct{} // closed when the walk ended (end is set)
	end    rebalanceEnd
	cancel context.CancelFunc
}

// rebalanceEnd is what a walk ended with.
type rebalanceEnd struct {
	stats distribute.RebalanceStats
	err   error
}

// leftover reports whether the walk left files where they were (a set
// not fully up, a file that kept changing) or failed.
func (e rebalanceEnd) leftover() bool {
	return e.err != nil || e.stats.Skipped+e.stats.Failed > 0
}

func (e rebalanceEnd) String() string {
	s := e.stats
	return fmt.Sprintf("moved %d, skipped %d, failed %d %v, err %v", s.Moved, s.Skipped, s.Failed, s.Errors, e.err)
}

// newRebalancer builds the rebalancer's graph of spec.
func (w *world) newRebalancer(spec volume.Spec) (*rebalancer, error) {
	// As mgmt builds it: no client layers above distribute (Ciphertext).
	g, err := volume.Build(spec, volume.BuildOptions{Dial: w.net.dialer(rebalancerClient), Ciphertext: true})
	if err != nil {
		return nil, err
	}
	d, ok := g.Top.(*distribute.Distribute)
	if !ok {
		g.Close()
		return nil, fmt.Errorf("top layer is %T, not distribute", g.Top)
	}
	return &rebalancer{graph: g, d: d, resume: make(chan struct{}), parked: make(chan struct{}),
		ended: make(chan struct{})}, nil
}

// start runs the walk in the background, one worker at a time, and
// returns once it parked after its first directory (or ended).
func (rb *rebalancer) start() {
	ctx, cancel := context.WithCancel(context.Background())
	rb.cancel = cancel
	go func() {
		defer close(rb.ended)
		rb.end.stats, rb.end.err = rb.d.Rebalance(ctx, distribute.RebalanceOptions{Workers: 1,
			Progress: func(distribute.RebalanceStats) {
				select {
				case rb.parked <- struct{}{}:
				case <-ctx.Done():
					return
				}
				select {
				case <-rb.resume:
				case <-ctx.Done():
				}
			}})
	}()
	rb.wait()
}

// wait returns once the walk parked or ended.
func (rb *rebalancer) wait() {
	select {
	case <-rb.parked:
	case <-rb.ended:
	}
}

// next lets the walk do one more directory, and waits for it.
func (rb *rebalancer) next() {
	select {
	case rb.resume <- struct{}{}:
		rb.wait()
	case <-rb.ended:
	}
}

// done reports whether the walk ended.
func (rb *rebalancer) done() bool {
	select {
	case <-rb.ended:
		return true
	default:
		return false
	}
}

// run lets the walk go to its end and returns how it ended.
func (rb *rebalancer) run() rebalanceEnd {
	for !rb.done() {
		rb.next()
	}
	return rb.end
}

// close stops the walk and frees the graph (nil: nothing).
func (rb *rebalancer) close() {
	if rb == nil {
		return
	}
	if rb.cancel != nil {
		rb.cancel()
		<-rb.ended
	}
	rb.graph.Close()
}

// rebalanceStep begins a rebalance, moves one more directory's files,
// starts it again after a run that left files behind, or ends it (the
// previous layout dropped) after one that left none.
func (r *run) rebalanceStep() error {
	w := r.w
	switch {
	case w.spec.Previous == nil:
		return r.beginRebalance()
	case w.reb == nil:
		r.note("rebalance started again")
		return r.startRebalance()
	case !w.reb.done():
		r.note("rebalance moves the files of one more directory")
		r.rep.Faults["rebalance step"]++
		w.reb.next()
	default:
		if r.walkEnded() {
			return r.commit()
		}
	}
	return nil
}

// walkEnded closes the walk that ended and reports whether it ends the
// rebalance: it left nothing, and for a remove-brick (shrink) the leaving
// set holds no file, as mgmt's drain checks: a walk that left nothing
// behind it may still miss a file a client renamed into a directory it had
// passed (seeds 17 and 81 of replica3x2-shrink: the file lost at the
// commit).
func (r *run) walkEnded() bool {
	rb := r.w.reb
	defer func() { rb.close(); r.w.reb = nil }()
	r.note("rebalance ended: %v", rb.end)
	if rb.end.leftover() {
		return false
	}
	if !r.cfg.Shrink {
		return true
	}
	ctx, cancel := opCtx()
	defer cancel()
	ids := r.w.spec.SetIDs()
	left, err := rb.d.Remaining(ctx, ids[len(ids)-1:], 3)
	if err != nil || len(left) > 0 {
		r.note("  -> the leaving set still holds %v (%v)", left, err)
		return false
	}
	return true
}

// commit ends a rebalance that left no file behind: the previous layout
// dropped, and with Config.Shrink the last set removed from the volume
// (mgmt's remove-brick commit; its bricks run on, out of the spec).
func (r *run) commit() error {
	if !r.cfg.Shrink {
		return r.setLayout(nil)
	}
	w := r.w
	next := w.spec
	next.Bricks = next.Bricks[:len(next.Bricks)-r.setLen]
	next.Previous = nil
	next.Version++
	r.note("remove-brick commit: the last set leaves the volume")
	return w.setSpec(next)
}

// target returns the layout a rebalance moves files to: with
// Config.Shrink the current one without the last set (nothing to do once
// it left), else with every set.
func (r *run) target(cur volume.Layout) volume.Layout {
	ids := r.w.spec.SetIDs()
	if r.cfg.Shrink {
		return cur.Without(ids[len(ids)-1])
	}
	for _, id := range ids {
		cur = cur.With(id)
	}
	return cur
}

// beginRebalance gives the sets that own no range a share of the layout,
// as mgmt's rebalance task does: fix-layout (every directory on every
// set), the new layout with the previous one to every client, then the
// walk that moves the files (parked after its first directory). A
// fix-layout that fails leaves everything as it was.
func (r *run) beginRebalance() error {
	w := r.w
	cur := w.spec.CurrentLayout()
	target := r.target(cur)
	if slices.Equal(target.Ranges, cur.Ranges) || len(target.Ranges) == 0 {
		return nil // done once already
	}
	r.rep.Faults["rebalance"]++
	if r.cfg.Shrink {
		r.note("remove-brick start")
		if err := r.setLayout(&target); err != nil {
			return err
		}
		return r.startRebalance()
	}
	r.note("rebalance begins: fix-layout")
	rb, err := w.newRebalancer(w.spec)
	if err != nil {
		return err
	}
	w.reb = rb
	if err := w.settled(); err != nil {
		return err
	}
	ctx, cancel := opCtx()
	defer cancel()
	_, err = rb.d.Rebalance(ctx, distribute.RebalanceOptions{FixLayout: true})
	rb.close()
	w.reb = nil
	if err != nil {
		r.note("  -> fix-layout: %v", err)
		return nil
	}
	if err := r.setLayout(&target); err != nil {
		return err
	}
	return r.startRebalance()
}

// startRebalance starts the walk over the spec as it is.
func (r *run) startRebalance() error {
	rb, err := r.w.newRebalancer(r.w.spec)
	if err != nil {
		return err
	}
	r.w.reb = rb
	if err := r.w.settled(); err != nil {
		return err
	}
	rb.start()
	return nil
}

// setLayout gives the volume layout target, with its current one as the
// previous layout, or (nil) drops the previous layout, and moves every
// client to the new spec.
func (r *run) setLayout(target *volume.Layout) error {
	w := r.w
	next := w.spec
	if target != nil {
		cur := w.spec.CurrentLayout()
		next.Layout, next.Previous = target, &cur
		r.note("clients take the new layout (the previous one kept)")
	} else {
		next.Previous = nil
		r.note("clients drop the previous layout")
	}
	next.Version++
	return w.setSpec(next)
}

// setSpec moves every client to spec: a new graph for what it does next,
// the old one kept for the files open through it (as volume.Live does).
func (w *world) setSpec(spec volume.Spec) error {
	w.spec = spec
	for _, c := range w.clients {
		g, err := volume.Build(spec, volume.BuildOptions{Dial: w.net.dialer(c.id)})
		if err != nil {
			return err
		}
		c.old = append(c.old, c.graph)
		c.graph = g
	}
	return w.settled()
}

// completeRebalance, at the end of a run with every fault lifted, runs
// the rebalance until it leaves no file behind (as an operator starts it
// again) and drops the previous layout.
func (r *run) completeRebalance() error {
	if r.w.spec.Previous == nil {
		return nil
	}
	for try := 0; try < 5; try++ {
		if r.w.reb == nil {
			if err := r.startRebalance(); err != nil {
				return err
			}
		}
		r.w.reb.run()
		if r.walkEnded() {
			return r.commit()
		}
	}
	return violated("rebalance with every brick up left files behind")
}
