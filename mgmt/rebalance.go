package mgmt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mortarfs/mortar/layer/distribute"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/rebalance"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume"
)

// Growing and shrinking volumes: add-brick, rebalance, remove-brick.
//
// A volume's layout (volume.Layout) says which set owns which part of the
// hash space of names. add-brick appends sets and pins the layout as it
// was, so the new sets get no names yet. "rebalance start" then runs a
// Task, orchestrated by the leader:
//
//  1. fix-layout: every directory is made on the new sets (nothing moves,
//     nothing stalls: it is a crawl of directories, in the background);
//  2. the layout gains the new sets (each old set gives each new one an
//     equal share of its ranges, so only the names that must move do) and
//     keeps the old one as Previous: clients look a name up where the new
//     layout puts it and, until it is moved, where the old one did;
//  3. every node moves the misplaced files of the sets whose first brick
//     it serves (distribute.Rebalance), in parallel, while clients read
//     and write them; each node keeps a checkpoint in DATA/rebalance so a
//     restart resumes where it was;
//  4. once every node has moved everything, Previous is dropped.
//
// "remove-brick start" is the same with the layout without the sets
// removed, and only their files moved; "remove-brick commit" then removes
// them. A task that stops, fails, or cannot move some files leaves
// Previous in place (lookups keep finding the files where they are); a
// new start carries on.
//
//	POST /v1/volumes/{name}/add-brick            AddBrickRequest → VolumeInfo
//	POST /v1/volumes/{name}/rebalance            RebalanceRequest → RebalanceStatus
//	GET  /v1/volumes/{name}/rebalance            RebalanceStatus
//	POST /v1/volumes/{name}/remove-brick         RemoveBrickRequest → RebalanceStatus
//	POST /v1/local/volumes/{id}/migrate          LocalMigrateRequest → {} (node: move its files)
//	POST /v1/local/volumes/{id}/migrate/stop     {}
//	GET  /v1/local/volumes/{id}/migrate          NodeProgress

// taskPoll is how often the leader looks at the nodes' progress.
const taskPoll = 500 * time.Millisecond

// clientCatchUp is how long the leader lets clients that watch the spec
// without naming themselves (takeup.go) fetch a new layout before files
// move under it.
const clientCatchUp = time.Second

func (n *Node) rebalanceHandlers(mux *http.ServeMux) {
	vol := func(r *http.Request) string { return r.PathValue("name") }
	id := func(r *http.Request) string { return r.PathValue("id") }
	mux.HandleFunc("POST /v1/volumes/{name}/add-brick", handle(n, func(r *http.Request, req api.AddBrickRequest) (any, error) {
		return n.addBrick(r.Context(), vol(r), req)
	}))
	mux.HandleFunc("POST /v1/volumes/{name}/rebalance", handle(n, func(r *http.Request, req api.RebalanceRequest) (any, error) {
		return n.rebalance(r.Context(), vol(r), req)
	}))
	mux.HandleFunc("GET /v1/volumes/{name}/rebalance", handle(n, func(r *http.Request, _ struct{}) (any, error) {
		return n.rebalanceStatus(r.Context(), vol(r))
	}))
	mux.HandleFunc("POST /v1/volumes/{name}/remove-brick", handle(n, func(r *http.Request, req api.RemoveBrickRequest) (any, error) {
		return n.removeBrick(r.Context(), vol(r), req)
	}))
	mux.HandleFunc("POST /v1/local/volumes/{id}/migrate", handle(n, func(r *http.Request, req api.LocalMigrateRequest) (any, error) {
		return struct{}{}, n.mover.Start(id(r), req)
	}))
	mux.HandleFunc("POST /v1/local/volumes/{id}/migrate/stop", handle(n, func(r *http.Request, _ struct{}) (any, error) {
		n.mover.Stop(id(r))
		return struct{}{}, nil
	}))
	mux.HandleFunc("GET /v1/local/volumes/{id}/migrate", handle(n, func(r *http.Request, _ struct{}) (any, error) {
		return n.mover.Progress(id(r)), nil
	}))
}

// addBrick appends whole sets to a volume (leader).
func (n *Node) addBrick(ctx context.Context, name string, req api.AddBrickRequest) (api.VolumeInfo, error) {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	st := n.store.State()
	v, err := st.Volume(name)
	if err != nil {
		return api.VolumeInfo{}, err
	}
	if v.Task != nil && v.Task.Status == api.TaskRunning {
		return api.VolumeInfo{}, api.Errorf(api.ErrState, "volume %s has a %s in progress; wait for it or stop it first", name, v.Task.Kind)
	}
	set := 1
	switch v.Type {
	case volume.Replicate:
		set = v.Replica
	case volume.Disperse:
		set = v.Disperse
	}
	if len(req.Bricks) == 0 || len(req.Bricks)%set != 0 {
		return api.VolumeInfo{}, api.Errorf(api.ErrInvalid, "add-brick %s: give whole sets: a multiple of %d bricks, not %d", name, set, len(req.Bricks))
	}
	lay := layout{typ: v.Type, replica: v.Replica, arbiter: slices.ContainsFunc(v.Bricks, func(b state.Brick) bool { return b.Arbiter })}
	bricks, err := n.planBricks(ctx, st, api.CreateVolumeRequest{Name: name, Bricks: req.Bricks}, lay)
	if err != nil {
		return api.VolumeInfo{}, err
	}
	var marked []state.Brick
	for _, b := range bricks {
		mr := MarkRequest{Path: b.Path, VolumeID: v.ID, Force: req.Force}
		if err := n.onNode(ctx, b.Node, func() error { return markBrick(mr, n.dir) }, http.MethodPost, "/v1/local/bricks/mark", mr); err != nil {
			n.unmarkAll(ctx, marked)
			return api.VolumeInfo{}, api.Errorf(api.ErrInvalid, "add-brick %s: brick %s: %w", name, b.Name(), err)
		}
		marked = append(marked, b)
	}
	if err := n.store.Apply(state.Command{Op: state.OpAddBricks, Name: name, Volume: &state.Volume{Bricks: bricks}}); err != nil {
		n.unmarkAll(ctx, marked)
		return api.VolumeInfo{}, err
	}
	if v.Status == api.StatusStarted {
		st := n.store.State()
		nv, _ := st.Volume(name)
		if err := n.startNodes(ctx, nv, st.Index, false); err != nil {
			return api.VolumeInfo{}, fmt.Errorf("add-brick %s: bricks added, but %w (mortar volume start %s force)", name, err, name)
		}
	}
	n.log.Info("bricks added; run a rebalance to place files on them", "volume", name, "bricks", len(bricks))
	return n.info(name)
}

// rebalance starts or stops a volume's rebalance (leader).
func (n *Node) rebalance(ctx context.Context, name string, req api.RebalanceRequest) (api.RebalanceStatus, error) {
	switch req.Action {
	case api.ActionStart:
		kind := api.TaskRebalance
		if req.FixLayout {
			kind = api.TaskFixLayout
		}
		if err := n.startTask(name, kind, nil); err != nil {
			return api.RebalanceStatus{}, err
		}
	case api.ActionStop:
		if err := n.stopTask(ctx, name, ""); err != nil {
			return api.RebalanceStatus{}, err
		}
	default:
		return api.RebalanceStatus{}, api.Errorf(api.ErrInvalid, "rebalance: unknown action %q (start or stop)", req.Action)
	}
	return n.rebalanceStatus(ctx, name)
}

// removeBrick drains, stops draining, or removes bricks (leader).
func (n *Node) removeBrick(ctx context.Context, name string, req api.RemoveBrickRequest) (api.RebalanceStatus, error) {
	st := n.store.State()
	v, err := st.Volume(name)
	if err != nil {
		return api.RebalanceStatus{}, err
	}
	ids, err := n.removedSets(ctx, st, v, req.Bricks)
	if err != nil {
		return api.RebalanceStatus{}, err
	}
	switch req.Action {
	case api.ActionStart:
		if err := n.startTask(name, api.TaskRemoveBrick, ids); err != nil {
			return api.RebalanceStatus{}, err
		}
	case api.ActionStop:
		if err := n.stopTask(ctx, name, api.TaskRemoveBrick); err != nil {
			return api.RebalanceStatus{}, err
		}
	case api.ActionCommit:
		if err := n.commitRemove(ctx, v, ids, req.Force); err != nil {
			return api.RebalanceStatus{}, err
		}
	default:
		return api.RebalanceStatus{}, api.Errorf(api.ErrInvalid, "remove-brick: unknown action %q (start, stop or commit)", req.Action)
	}
	return n.rebalanceStatus(ctx, name)
}

// removedSets checks that bricks (host:/path) make whole sets of v, not
// all of them, and returns the ids of every brick of those sets.
func (n *Node) removedSets(ctx context.Context, st *state.State, v *state.Volume, bricks []string) ([]string, error) {
	if len(bricks) == 0 {
		return nil, api.Errorf(api.ErrInvalid, "remove-brick %s: no bricks given", v.Name)
	}
	spec := state.LayoutSpec(v)
	sets := spec.Sets()
	chosen := map[string]bool{}
	for _, s := range bricks {
		b, _, err := n.findBrick(ctx, st, v, s)
		if err != nil {
			return nil, err
		}
		chosen[b.ID] = true
	}
	var ids []string
	whole := 0
	for _, set := range sets {
		in := 0
		for _, b := range set {
			if chosen[b.ID] {
				in++
			}
		}
		switch {
		case in == len(set):
			whole++
			for _, b := range set {
				ids = append(ids, b.ID)
			}
		case in > 0:
			return nil, api.Errorf(api.ErrInvalid, "remove-brick %s: give every brick of a set (%d of the set of %s given); to replace one brick, use replace-brick", v.Name, in, set[0].Name())
		}
	}
	if whole == len(sets) {
		return nil, api.Errorf(api.ErrInvalid, "remove-brick %s: that is every brick of the volume; delete the volume instead", v.Name)
	}
	return ids, nil
}

// startTask records a new task of kind on volume name and starts its
// orchestration (leader). removing lists the bricks a remove-brick drains.
func (n *Node) startTask(name, kind string, removing []string) error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	st := n.store.State()
	v, err := st.Volume(name)
	if err != nil {
		return err
	}
	if v.Status != api.StatusStarted {
		return api.Errorf(api.ErrState, "volume %s is not started (mortar volume start %s)", name, name)
	}
	if t := v.Task; t != nil && t.Status == api.TaskRunning {
		return api.Errorf(api.ErrState, "volume %s: a %s is already in progress (started %s)", name, t.Kind, t.Started.Format(time.RFC3339))
	}
	if t := v.Task; kind != api.TaskRemoveBrick && t != nil && t.Kind == api.TaskRemoveBrick && t.Status != api.TaskCompleted {
		return api.Errorf(api.ErrState, "volume %s: a remove-brick is pending (%s); start it again, or commit it", name, t.Status)
	}
	if t := v.Task; kind == api.TaskRemoveBrick && t != nil && t.Kind == api.TaskRemoveBrick && t.Status != api.TaskCompleted && !slices.Equal(t.Removing, removing) {
		return api.Errorf(api.ErrState, "volume %s: another remove-brick is pending; commit or finish it first", name)
	}
	task := &api.Task{ID: newID(), Kind: kind, Status: api.TaskRunning, Removing: removing, Started: time.Now().UTC()}
	if err := n.store.Apply(state.Command{Op: state.OpSetTask, Name: name, Volume: &state.Volume{Task: task}}); err != nil {
		return err
	}
	n.log.Info("task started", "volume", name, "kind", kind, "task", task.ID)
	n.orchestrate(v.ID, task.ID)
	return nil
}

// stopTask stops volume name's running task (of kind, if given).
func (n *Node) stopTask(ctx context.Context, name, kind string) error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	v, err := n.store.State().Volume(name)
	if err != nil {
		return err
	}
	t := v.Task
	if t == nil || t.Status != api.TaskRunning || (kind != "" && t.Kind != kind) {
		return api.Errorf(api.ErrState, "volume %s has no %s in progress", name, orDefault(kind, "rebalance"))
	}
	done := *t
	done.Status, done.Ended = api.TaskStopped, time.Now().UTC()
	if err := n.store.Apply(state.Command{Op: state.OpSetTask, Name: name, Volume: &state.Volume{Task: &done}}); err != nil {
		return err
	}
	for _, id := range nodesOf(v) {
		err := n.onNode(ctx, id, func() error { n.mover.Stop(v.ID); return nil }, http.MethodPost, "/v1/local/volumes/"+v.ID+"/migrate/stop", struct{}{})
		if err != nil {
			n.log.Warn("stopping a node's part of the task failed", "node", id, "err", err)
		}
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// commitRemove removes drained bricks from the volume (leader).
func (n *Node) commitRemove(ctx context.Context, v *state.Volume, ids []string, force bool) error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	t := v.Task
	if !force {
		switch {
		case t == nil || t.Kind != api.TaskRemoveBrick || !slices.Equal(t.Removing, ids):
			return api.Errorf(api.ErrState, "remove-brick %s: those bricks were not drained: run \"remove-brick ... start\" first (or commit force to remove them with their files)", v.Name)
		case t.Status != api.TaskCompleted:
			return api.Errorf(api.ErrState, "remove-brick %s: the drain is %s; wait for it to complete (remove-brick ... status)", v.Name, t.Status)
		case t.Error != "":
			return api.Errorf(api.ErrState, "remove-brick %s: the drain left files behind (%s); run start again, or commit force to leave them in the removed bricks' directories", v.Name, t.Error)
		}
		if err := n.checkDrained(ctx, v, ids); err != nil {
			return err
		}
	}
	var gone []state.Brick
	for _, b := range v.Bricks {
		if slices.Contains(ids, b.ID) {
			gone = append(gone, b)
		}
	}
	if err := n.store.Apply(state.Command{Op: state.OpRemoveBricks, Name: v.Name, Volume: &state.Volume{Bricks: gone}}); err != nil {
		return err
	}
	for _, b := range gone {
		stop := func() error { n.stopLocalBrick(v.ID, b.ID); return nil }
		if err := n.onNode(ctx, b.Node, stop, http.MethodPost, "/v1/local/volumes/"+v.ID+"/bricks/"+b.ID+"/stop", struct{}{}); err != nil {
			n.log.Warn("stopping a removed brick failed", "brick", b.Name(), "err", err)
		}
		if err := n.unmark(ctx, b); err != nil {
			n.log.Warn("unmarking a removed brick failed", "brick", b.Name(), "err", err)
		}
	}
	n.log.Info("bricks removed", "volume", v.Name, "bricks", len(gone), "force", force)
	return nil
}

// checkDrained fails unless the sets of bricks ids hold no file: a client
// may have renamed one into a directory the drain had passed, or a client
// late to take the new layout made one there.
func (n *Node) checkDrained(ctx context.Context, v *state.Volume, ids []string) error {
	spec := n.store.State().Spec(v)
	var sets []string
	for _, set := range spec.Sets() {
		if slices.Contains(ids, set[0].ID) {
			sets = append(sets, set[0].ID)
		}
	}
	d, closeGraph, err := rebalance.Distribute(ctx, spec, n.dial, n.log)
	if err != nil {
		return err
	}
	defer closeGraph()
	left, err := d.Remaining(ctx, sets, 3)
	switch {
	case err != nil:
		return api.Errorf(api.ErrState, "remove-brick %s: cannot tell whether the bricks are drained: %v; commit force to remove them as they are", v.Name, err)
	case len(left) > 0:
		return api.Errorf(api.ErrState, "remove-brick %s: files are still on the bricks (%s); run start again, or commit force to leave them in the removed bricks' directories", v.Name, strings.Join(left, ", "))
	}
	return nil
}

// orchestrate runs task tid of volume vid to its end in the background,
// on the leader. It stops when the task is no longer running, the node
// closes or loses the leadership (the new leader takes over: see
// resumeTasks).
func (n *Node) orchestrate(vid, tid string) {
	n.taskMu.Lock()
	defer n.taskMu.Unlock()
	if n.tasks == nil {
		n.tasks = map[string]bool{}
	}
	select {
	case <-n.done:
		return // closing: the next leader takes the task over
	default:
	}
	if n.tasks[tid] {
		return
	}
	n.tasks[tid] = true
	n.wg.Go(func() {
		defer func() {
			n.taskMu.Lock()
			delete(n.tasks, tid)
			n.taskMu.Unlock()
		}()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		n.cancelOnClose(ctx, cancel)
		if err := n.runTask(ctx, vid, tid); err != nil && ctx.Err() == nil {
			n.log.Error("task failed", "volume", vid, "task", tid, "err", err)
			n.endTask(vid, tid, api.TaskFailed, err.Error())
		}
	})
}

// cancelOnClose cancels ctx (cancel is its CancelFunc) when the node
// closes.
func (n *Node) cancelOnClose(ctx context.Context, cancel context.CancelFunc) {
	go func() {
		select {
		case <-n.done:
			cancel()
		case <-ctx.Done():
		}
	}()
}

// resumeTasks takes over the running tasks when this node leads.
func (n *Node) resumeTasks() {
	if !n.raft.IsLeader() {
		return
	}
	st := n.store.State()
	for _, name := range st.VolumeNames() {
		v := st.Volumes[name]
		if v.Task != nil && v.Task.Status == api.TaskRunning {
			n.orchestrate(v.ID, v.Task.ID)
		}
	}
}

// taskVolume returns the volume with id vid if its running task is tid.
func (n *Node) taskVolume(vid, tid string) (*state.State, *state.Volume, bool) {
	st := n.store.State()
	for _, v := range st.Volumes {
		if v.ID == vid {
			return st, v, v.Task != nil && v.Task.ID == tid && v.Task.Status == api.TaskRunning && n.raft.IsLeader()
		}
	}
	return st, nil, false
}

// runTask is the task's work: set the layout (after fix-layout for new
// sets), have the nodes move files, and finish.
func (n *Node) runTask(ctx context.Context, vid, tid string) error {
	st, v, ok := n.taskVolume(vid, tid)
	if !ok {
		return nil
	}
	cur := state.CurrentLayout(v)
	target := cur
	if v.Task.Kind == api.TaskRemoveBrick {
		for _, id := range v.Task.Removing {
			target = target.Without(id)
		}
	} else {
		for _, id := range state.SetIDs(v) {
			target = target.With(id)
		}
	}
	if v.Previous == nil && !slices.Equal(target.Ranges, cur.Ranges) {
		if v.Task.Kind != api.TaskRemoveBrick {
			if err := n.fixLayout(ctx, st.Spec(v)); err != nil {
				return fmt.Errorf("fix-layout: %w", err)
			}
		}
		if _, _, ok := n.taskVolume(vid, tid); !ok {
			return nil
		}
		prev := cur
		if err := n.store.Apply(state.Command{Op: state.OpSetLayout, Name: v.Name, Volume: &state.Volume{Layout: &target, Previous: &prev}}); err != nil {
			return err
		}
		n.log.Info("new layout set", "volume", v.Name, "task", tid)
	}
	if v.Task.Kind == api.TaskFixLayout {
		n.endTask(vid, tid, api.TaskCompleted, "")
		return nil
	}
	// Also for a task started again or taken over: its clients may not
	// all have taken the layout yet.
	_, now, ok := n.taskVolume(vid, tid)
	if !ok {
		return nil
	}
	still := func() bool { _, _, ok := n.taskVolume(vid, tid); return ok }
	err := n.takeUp(ctx, v.Name, now.SpecVersion, still)
	if err == nil {
		err = n.fenceUp(ctx, v.Name, now.SpecVersion, still)
	}
	switch {
	case errors.Is(err, errTaskGone):
		return nil
	case err != nil:
		return err
	}
	n.log.Info("clients run the layout; moving files", "volume", v.Name, "task", tid)
	return n.runMigration(ctx, vid, tid)
}

// fixLayout makes every directory on every set of spec.
func (n *Node) fixLayout(ctx context.Context, spec volume.Spec) error {
	spec.Layout, spec.Previous = nil, nil // every set is a child either way
	d, closeGraph, err := rebalance.Distribute(ctx, spec, n.dial, n.log)
	if err != nil {
		return err
	}
	defer closeGraph()
	_, err = d.Rebalance(ctx, distribute.RebalanceOptions{FixLayout: true})
	return err
}

// runMigration has every node move its files and waits for them all.
func (n *Node) runMigration(ctx context.Context, vid, tid string) error {
	t := time.NewTicker(taskPoll)
	defer t.Stop()
	for {
		st, v, ok := n.taskVolume(vid, tid)
		if !ok {
			return nil
		}
		sources := n.taskSources(v)
		spec := st.Spec(v)
		done, failed := 0, []string{}
		var leftover []string
		for node, srcs := range sources {
			p, err := n.progressOf(ctx, node, vid)
			if err != nil {
				n.log.Warn("a node's progress is unknown; waiting for it", "node", node, "err", err)
				continue
			}
			switch {
			case p.TaskID == tid && p.Status == api.TaskCompleted:
				done++
				if p.Failed+p.Skipped > 0 {
					leftover = append(leftover, fmt.Sprintf("%s: %d failed, %d skipped (%s)", st.Nodes[node].Addr, p.Failed, p.Skipped, strings.Join(p.Errors, "; ")))
				}
			case p.TaskID == tid && p.Status == api.TaskFailed:
				failed = append(failed, fmt.Sprintf("%s: %s", st.Nodes[node].Addr, p.Error))
			case p.TaskID == tid && p.Status == api.TaskRunning:
			default: // not started here yet, or the node restarted: (re)start
				req := api.LocalMigrateRequest{Task: *v.Task, Spec: spec, Sources: srcs}
				if err := n.onNode(ctx, node, func() error { return n.mover.Start(vid, req) }, http.MethodPost, "/v1/local/volumes/"+vid+"/migrate", req); err != nil {
					n.log.Warn("starting a node's part of the task failed; retrying", "node", node, "err", err)
				}
			}
		}
		if len(failed) > 0 {
			return errors.New(strings.Join(failed, "; "))
		}
		if done == len(sources) {
			return n.finishTask(v, tid, leftover)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// progressOf returns node's part of volume vid's task.
func (n *Node) progressOf(ctx context.Context, node, vid string) (api.NodeProgress, error) {
	if node == n.id {
		return n.mover.Progress(vid), nil
	}
	var p api.NodeProgress
	err := n.call(ctx, node, http.MethodGet, "/v1/local/volumes/"+vid+"/migrate", nil, &p)
	return p, err
}

// taskSources maps each node to the sets whose files it moves: the sets
// whose first brick it serves, all of them for a rebalance, the removed
// ones for a remove-brick.
func (n *Node) taskSources(v *state.Volume) map[string][]string {
	out := map[string][]string{}
	spec := state.LayoutSpec(v)
	for _, set := range spec.Sets() {
		id := set[0].ID
		if v.Task.Kind == api.TaskRemoveBrick && !slices.Contains(v.Task.Removing, id) {
			continue
		}
		for _, b := range v.Bricks {
			if b.ID == id {
				out[b.Node] = append(out[b.Node], id)
			}
		}
	}
	return out
}

// finishTask ends a migration that every node completed: with nothing
// left behind, a rebalance drops the previous layout.
func (n *Node) finishTask(v *state.Volume, tid string, leftover []string) error {
	if len(leftover) > 0 {
		n.endTask(v.ID, tid, api.TaskCompleted, "files left in place: "+strings.Join(leftover, "; ")+"; run start again")
		return nil
	}
	if v.Task.Kind == api.TaskRebalance && v.Layout != nil {
		l := *v.Layout
		if err := n.store.Apply(state.Command{Op: state.OpSetLayout, Name: v.Name, Volume: &state.Volume{Layout: &l}}); err != nil {
			return err
		}
	}
	n.endTask(v.ID, tid, api.TaskCompleted, "")
	return nil
}

// endTask records the end of task tid of volume vid.
func (n *Node) endTask(vid, tid, status, why string) {
	_, v, ok := n.taskVolume(vid, tid)
	if !ok {
		return
	}
	t := *v.Task
	t.Status, t.Error, t.Ended = status, why, time.Now().UTC()
	if err := n.store.Apply(state.Command{Op: state.OpSetTask, Name: v.Name, Volume: &state.Volume{Task: &t}}); err != nil {
		n.log.Error("recording the end of a task failed", "volume", v.Name, "err", err)
		return
	}
	n.log.Info("task ended", "volume", v.Name, "kind", t.Kind, "status", status, "why", why)
}

// rebalanceStatus gathers every node's progress on the volume's task.
func (n *Node) rebalanceStatus(ctx context.Context, name string) (api.RebalanceStatus, error) {
	st := n.store.State()
	v, err := st.Volume(name)
	if err != nil {
		return api.RebalanceStatus{}, err
	}
	rs := api.RebalanceStatus{Name: name, Task: v.Task, Nodes: []api.NodeProgress{}}
	if v.Task == nil {
		return rs, nil
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for node := range n.taskSources(v) {
		wg.Go(func() {
			p, err := n.progressOf(ctx, node, v.ID)
			if err != nil {
				p = api.NodeProgress{Node: node, Status: "unknown", Error: err.Error(), ETA: -1}
			}
			if p.TaskID != v.Task.ID {
				p = api.NodeProgress{Node: node, Status: "not started", ETA: -1}
			}
			p.Host = st.Nodes[node].Addr
			mu.Lock()
			rs.Nodes = append(rs.Nodes, p)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(rs.Nodes, func(a, b api.NodeProgress) int { return strings.Compare(a.Host, b.Host) })
	return rs, nil
}

// inodesOf estimates the entries a rebalance scans (every node walks the
// whole namespace): the inodes used on this node's bricks of the sets ids,
// scaled to the number of sets.
func (n *Node) inodesOf(spec volume.Spec, ids []string) uint64 {
	var total uint64
	sets := len(spec.Sets())
	for _, b := range spec.Bricks {
		if !slices.Contains(ids, b.ID) || len(ids) == 0 {
			continue
		}
		var bs api.BrickStatus
		if du := n.diskUsage(state.Brick{Path: b.Path}, &bs); du != nil {
			total += du.Inodes - du.InodesFree
		}
	}
	if len(ids) > 0 {
		total = total * uint64(sets) / uint64(len(ids))
	}
	return total
}
