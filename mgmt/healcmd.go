package mgmt

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/mortarfs/mortar/heal"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume"
)

// What the heal daemons report (heal info, split-brain entries) and the
// heal commands that reach every node's daemon: heal, heal full, heal
// info, split-brain resolution. The daemon itself is in heal.go.

// info reads every brick's heal index, with this daemon's counts.
func (d *healDaemon) info(ctx context.Context) (api.HealInfo, error) {
	r, err := d.running()
	if err != nil {
		return api.HealInfo{}, err
	}
	hi, err := r.healer.Info(ctx)
	if err != nil {
		return api.HealInfo{}, err
	}
	out := d.countsOf(r, hi)
	for _, ri := range hi.Replicas {
		hb := api.HealBrick{Name: ri.Name, Set: ri.Set, Online: ri.Up, Entries: ri.Count, Error: ri.Error}
		for _, e := range ri.Entries {
			hb.Paths = append(hb.Paths, entryName(e.Path, e.Gfid.String()))
		}
		out.Bricks = append(out.Bricks, hb)
	}
	return out, nil
}

// counts is what this daemon did (HealInfo without the bricks), for the
// acting node's heal info.
func (d *healDaemon) counts(ctx context.Context) (api.HealInfo, error) {
	r, err := d.running()
	if err != nil {
		return api.HealInfo{}, err
	}
	return d.countsOf(r, r.healer.Stats(ctx)), nil
}

// countsOf turns hi, read from r's healer, into HealInfo's counts, with
// the last full heal.
func (d *healDaemon) countsOf(r *healRun, hi heal.Info) api.HealInfo {
	out := api.HealInfo{
		Name: d.name, Bricks: []api.HealBrick{}, Healed: hi.Healed, Failed: hi.Failed,
		HealedBytes: hi.HealedBytes, Since: hi.Since,
		InProgress: hi.InProgress, SplitBrain: hi.SplitBrain, LastScan: hi.LastScan,
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.full != nil {
		f := *d.full
		if f.Running && d.crawl == r && hi.Looked >= d.lookedAt { // a crawl begun since hi was read: not yet
			f.Looked = hi.Looked - d.lookedAt
		}
		out.Full = &f
	}
	return out
}

// entryName is how heal info shows an inode: its path, or its gfid as
// GlusterFS writes it when the path is unknown.
func entryName(path, gfid string) string {
	if path == "" {
		return "<gfid:" + gfid + ">"
	}
	return path
}

// splitBrain lists the inodes in split-brain, per brick (under every brick
// that has a copy) and with each copy's details.
func (d *healDaemon) splitBrain(ctx context.Context) (api.SplitBrainInfo, error) {
	r, err := d.running()
	if err != nil {
		return api.SplitBrainInfo{}, err
	}
	entries, err := r.healer.SplitBrain(ctx)
	if err != nil {
		return api.SplitBrainInfo{}, err
	}
	out := api.SplitBrainInfo{Name: d.name, Bricks: []api.HealBrick{}, Entries: []api.SplitBrainEntry{}}
	at := map[string]int{} // brick name → index in out.Bricks
	for si, s := range r.sets {
		for _, rep := range s {
			at[rep.Name] = len(out.Bricks)
			out.Bricks = append(out.Bricks, api.HealBrick{Name: rep.Name, Set: si, Online: rep.Up()})
		}
	}
	for _, e := range entries {
		se := api.SplitBrainEntry{Set: e.Set, Path: e.Path, Gfid: e.Gfid.String()}
		for _, c := range e.Copies {
			sc := api.SplitBrainCopy{Brick: c.Replica, Error: c.Error, Blames: c.Pending}
			if c.Error == "" {
				sc.Gfid, sc.Size, sc.Mtime = c.Gfid.String(), c.Size, c.Mtime
				if i, ok := at[c.Replica]; ok {
					hb := &out.Bricks[i]
					hb.Entries++
					hb.Paths = append(hb.Paths, entryName(e.Path, se.Gfid))
				}
			}
			se.Copies = append(se.Copies, sc)
		}
		out.Entries = append(out.Entries, se)
	}
	return out, nil
}

// healDaemonOf returns the heal daemon of volume name, refusing a volume
// that is neither replicated nor dispersed, or not started.
func (n *Node) healDaemonOf(name string) (*healDaemon, *state.Volume, error) {
	v, err := n.store.State().Volume(name)
	if err != nil {
		return nil, nil, err
	}
	if err := checkHealableStarted(v, "nothing to heal"); err != nil {
		return nil, nil, err
	}
	n.runMu.Lock()
	var d *healDaemon
	if vr := n.vols[v.ID]; vr != nil {
		d = vr.heal
	}
	n.runMu.Unlock()
	if d == nil {
		return nil, nil, (&healDaemon{name: name}).notRunning()
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
	return d.localHeal(full)
}

// localHeal triggers an index heal, or starts a full heal, of the sets
// this node's daemon acts for.
func (d *healDaemon) localHeal(full bool) (api.FullHeal, error) {
	if full {
		return d.startFull()
	}
	return api.FullHeal{}, d.trigger()
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
	hi, err := d.info(ctx)
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
func (n *Node) localHealDaemon(id string) (*healDaemon, error) {
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
	return d.splitBrain(ctx)
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
	r, err := d.running()
	if err != nil {
		return nil, err
	}
	entries, err := r.healer.SplitBrain(ctx)
	if err != nil {
		return nil, err
	}
	paths := []string{}
	for _, e := range entries {
		if (req.Path == "" || e.Path == req.Path) && (set < 0 || e.Set == set) {
			paths = append(paths, e.Path)
		}
	}
	where := "volume " + name
	if set >= 0 {
		where = "the replica set of brick " + req.Source
	}
	switch {
	case len(paths) == 0 && req.Path != "":
		return nil, api.Errorf(api.ErrInvalid, "%s is not in split-brain in %s (see mortar volume heal %s info split-brain)", req.Path, where, name)
	case len(paths) == 0:
		return nil, api.Errorf(api.ErrInvalid, "nothing is in split-brain in %s", where)
	}
	if err := r.healer.Resolve(ctx, req.Path, req.Policy, req.Source); err != nil {
		return nil, fmt.Errorf("resolving the split-brain of %s: %w", strings.Join(paths, ", "), err)
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
