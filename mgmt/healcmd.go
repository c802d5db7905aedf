package mgmt

import (
	"context"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/healdaemon"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume"
)

// What the heal daemons report (heal info, split-brain entries) and the
// heal commands that reach every node's daemon: heal, heal full, heal
// info, split-brain resolution. The daemon itself is package
// mgmt/healdaemon; heal.go starts it.

// healDaemonOf returns the heal daemon of volume name, refusing a volume
// that is neither replicated nor dispersed, or not started.
func (n *Node) healDaemonOf(name string) (*healdaemon.Daemon, *state.Volume, error) {
	v, err := n.store.State().Volume(name)
	if err != nil {
		return nil, nil, err
	}
	if err := checkHealableStarted(v, "nothing to heal"); err != nil {
		return nil, nil, err
	}
	n.runMu.Lock()
	var d *healdaemon.Daemon
	if vr := n.vols[v.ID]; vr != nil {
		d = vr.heal
	}
	n.runMu.Unlock()
	if d == nil {
		return nil, nil, healdaemon.NotRunning(name)
	}
	return d, v, nil
}

// healable reports whether v has copies or fragments to heal from:
// replicated and dispersed volumes.
func healable(v *state.Volume) bool {
	return v.Type == volume.Replicate || v.Type == volume.Disperse
}

// checkHealableStarted refuses a volume that is neither replicated nor
// dispersed (saying why: what) or not started.
func checkHealableStarted(v *state.Volume, why string) error {
	if !healable(v) {
		return api.Errorf(api.ErrInvalid, "volume %s is neither replicated nor dispersed: %s", v.Name, why)
	}
	if v.Status != api.StatusStarted {
		return api.Errorf(api.ErrState, "volume %s is not started (mortar volume start %s)", v.Name, v.Name)
	}
	return nil
}

// heal triggers an index heal of volume name, or starts a full heal, on
// this node and on the other nodes serving its bricks (each heals the
// sets it acts for).
func (n *Node) heal(ctx context.Context, name string, full bool) (api.FullHeal, error) {
	d, v, err := n.healDaemonOf(name)
	if err != nil {
		return api.FullHeal{}, err
	}
	n.otherHealNodes(ctx, v, func(ctx context.Context, id string) {
		err := n.call(ctx, id, http.MethodPost, localHealPath(v.ID), api.HealRequest{Full: full}, nil)
		if err != nil {
			n.log.Warn("heal request not passed on", "volume", name, "node", id, "err", err)
		}
	})
	return d.Heal(full)
}

// otherHealNodes runs fn for each other node serving a brick of v, at
// once, each within peerPingTimeout, and waits.
func (n *Node) otherHealNodes(ctx context.Context, v *state.Volume, fn func(ctx context.Context, id string)) {
	var wg sync.WaitGroup
	for _, id := range nodesOf(v) {
		if id == n.id {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, peerPingTimeout)
			defer cancel()
			fn(ctx, id)
		})
	}
	wg.Wait()
}

// localHealPath is the endpoint of a node's own heal daemon of volume id.
func localHealPath(id string) string { return "/v1/local/volumes/" + id + "/heal" }

// healInfo reads the heal indexes of volume name, with the counts of
// every node's daemon that answers.
func (n *Node) healInfo(ctx context.Context, name string) (api.HealInfo, error) {
	d, v, err := n.healDaemonOf(name)
	if err != nil {
		return api.HealInfo{}, err
	}
	hi, err := d.Info(ctx)
	if err != nil {
		return api.HealInfo{}, err
	}
	var mu sync.Mutex
	n.otherHealNodes(ctx, v, func(ctx context.Context, id string) {
		var o api.HealInfo
		if err := n.call(ctx, id, http.MethodGet, localHealPath(v.ID), nil, &o); err != nil {
			return // a node that does not answer heals nothing
		}
		mu.Lock()
		hi.AddCounts(o)
		mu.Unlock()
	})
	hi.Safe, hi.Unsafe = hi.SafeToTakeDown()
	return hi, nil
}

// localHealDaemon returns this node's heal daemon of volume id.
func (n *Node) localHealDaemon(id string) (*healdaemon.Daemon, error) {
	n.runMu.Lock()
	defer n.runMu.Unlock()
	if vr := n.vols[id]; vr != nil && vr.heal != nil {
		return vr.heal, nil
	}
	return nil, api.Errorf(api.ErrState, "no heal daemon of volume %s runs on this node", id)
}

// splitBrainInfo lists the split-brains of volume name.
func (n *Node) splitBrainInfo(ctx context.Context, name string) (api.SplitBrainInfo, error) {
	d, _, err := n.healDaemonOf(name)
	if err != nil {
		return api.SplitBrainInfo{}, err
	}
	return d.SplitBrain(ctx)
}

// resolveSplitBrain resolves the split-brains req names and returns their
// paths. It refuses a request that names no split-brain.
func (n *Node) resolveSplitBrain(ctx context.Context, name string, req api.SplitBrainRequest) ([]string, error) {
	d, v, err := n.healDaemonOf(name)
	if err != nil {
		return nil, err
	}
	if v.Type != volume.Replicate {
		return nil, api.Errorf(api.ErrInvalid, "volume %s is dispersed: split-brain resolution applies to replicated volumes only (a disperse set's files are fragments, so no one brick holds a copy that could win)", name)
	}
	set, err := n.checkResolve(ctx, v, &req)
	if err != nil {
		return nil, err
	}
	paths, err := d.Resolve(ctx, req, set)
	if err != nil {
		return nil, err
	}
	n.log.Info("split-brain resolved", "volume", name, "policy", req.Policy, "source", req.Source, "paths", paths)
	return paths, nil
}

// checkResolve checks a split-brain resolution request, cleans its path
// and makes its source the brick's name as the volume has it. It returns
// the replica set of the source brick, or -1.
func (n *Node) checkResolve(ctx context.Context, v *state.Volume, req *api.SplitBrainRequest) (int, error) {
	set := -1
	switch req.Policy {
	case api.PolicyLatestMtime, api.PolicyBiggerFile:
		if req.Path == "" {
			return set, api.Errorf(api.ErrInvalid, "split-brain %s needs the PATH of the file, from the volume's root (such as /dir/file)", req.Policy)
		}
		if req.Source != "" {
			return set, api.Errorf(api.ErrInvalid, "split-brain %s takes no source brick (use source-brick to name the brick whose copy wins)", req.Policy)
		}
	case api.PolicySourceBrick:
		if req.Source == "" {
			return set, api.Errorf(api.ErrInvalid, "split-brain source-brick needs the brick whose copies win, as HOST:/PATH")
		}
		b, i, err := n.findBrick(ctx, n.store.State(), v, req.Source)
		if err != nil {
			return set, err
		}
		if b.Arbiter {
			return set, api.Errorf(api.ErrInvalid, "brick %s is an arbiter: it holds no file data, so its copies cannot win", b.Name())
		}
		req.Source, set = b.Name(), i/v.Replica
	default:
		return set, api.Errorf(api.ErrInvalid, "unknown split-brain policy %q: use %s, %s or %s", req.Policy, api.PolicyLatestMtime, api.PolicyBiggerFile, api.PolicySourceBrick)
	}
	if req.Path != "" {
		if strings.HasPrefix(req.Path, "/") {
			req.Path = path.Clean(req.Path)
		}
		if err := layer.CheckPath(req.Path); err != nil {
			return set, api.Errorf(api.ErrInvalid, "path %q: %v (want a path from the volume's root, such as /dir/file)", req.Path, err)
		}
	}
	return set, nil
}
