package mgmt

import (
	"context"

	"github.com/mortarfs/mortar/mgmt/healdaemon"
	"github.com/mortarfs/mortar/mgmt/state"
)

// startHeal starts the heal daemon (package mgmt/healdaemon) of v, a
// volume whose bricks vr has just started, or has the running one look at
// the bricks again (their ports may be new).
func (n *Node) startHeal(vr *volumeRun, v *state.Volume) {
	if !healable(v) {
		return
	}
	n.runMu.Lock()
	d, fresh := vr.heal, vr.heal == nil
	if fresh {
		d = healdaemon.New(healNode{n, vr}, v, n.dial, n.log)
		vr.heal = d
	}
	n.runMu.Unlock()
	if !fresh {
		d.Poke()
		return
	}
	d.Start(vr.ctx, v)
	vr.spawn(d.Run)
}

// healNode is what a heal daemon sees of its node: vr is the volume's run.
type healNode struct {
	n  *Node
	vr *volumeRun
}

func (h healNode) ID() string                                  { return h.n.id }
func (h healNode) State() *state.State                         { return h.n.store.State() }
func (h healNode) LatestState() *state.State                   { return h.n.latestState() }
func (h healNode) Answers(ctx context.Context, id string) bool { return h.n.answers(ctx, id) }
func (h healNode) Runs(brickID string) bool                    { return h.n.isRunning(h.vr, brickID) }
