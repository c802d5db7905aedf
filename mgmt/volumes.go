package mgmt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/layer/disperse"
	"github.com/mortarfs/mortar/volume"
)

// MaxVolumeName is the longest volume name.
const MaxVolumeName = 64

var volumeNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// CheckVolumeName reports whether name can name a volume: 1 to 64 of
// A-Z a-z 0-9 _ . - and not "." or "..".
func CheckVolumeName(name string) error {
	switch {
	case name == "":
		return api.Errorf(api.ErrInvalid, "volume name is empty")
	case len(name) > MaxVolumeName:
		return api.Errorf(api.ErrInvalid, "volume name %q is longer than %d characters", name, MaxVolumeName)
	case !volumeNameRE.MatchString(name):
		return api.Errorf(api.ErrInvalid, "volume name %q may contain only letters, digits, '_', '.' and '-'", name)
	case name == "." || name == "..":
		return api.Errorf(api.ErrInvalid, "volume name %q is not allowed", name)
	}
	return nil
}

// ParseBrick splits "host:/path" into host and a clean absolute path.
// IPv6 hosts are written in brackets: "[::1]:/data/b1".
func ParseBrick(s string) (host, path string, err error) {
	var rest string
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 || !strings.HasPrefix(s[end+1:], ":") {
			return "", "", api.Errorf(api.ErrInvalid, "brick %q: want host:/path", s)
		}
		host, rest = s[1:end], s[end+2:]
	} else {
		var ok bool
		host, rest, ok = strings.Cut(s, ":")
		if !ok {
			return "", "", api.Errorf(api.ErrInvalid, "brick %q: want host:/path", s)
		}
	}
	if host == "" {
		return "", "", api.Errorf(api.ErrInvalid, "brick %q: host is missing (want host:/path)", s)
	}
	if !strings.HasPrefix(rest, "/") {
		return "", "", api.Errorf(api.ErrInvalid, "brick %q: the path must be absolute (want host:/path)", s)
	}
	return host, filepath.Clean(rest), nil
}

// layout is a volume's type as its create request asks for it.
type layout struct {
	typ     string
	replica int  // size of a replica set (Replicate)
	arbiter bool // the third brick of every set is an arbiter
	// disperse is the size of a disperse set and redundancy the bricks
	// of it that may be lost (Disperse).
	disperse, redundancy int
	// warnings are for the operator (a geometry that works, but slowly).
	warnings []string
}

// DefaultRedundancy is the redundancy of a disperse set of n bricks
// created without one: a third of the set, rounded down, at least 1.
func DefaultRedundancy(n int) int { return max(1, n/3) }

// planDisperse plans a dispersed volume from the keywords as GlusterFS
// reads them ("disperse N" is the set size, all the bricks without a
// count; "disperse-data K" with "redundancy M" makes N = K+M; redundancy
// defaults to a third of the set, rounded down, at least 1). An impossible
// geometry gets its own error; a data brick count that is not a power of
// two gets a warning.
func planDisperse(req api.CreateVolumeRequest) (layout, error) {
	lay := layout{typ: volume.Disperse}
	if req.Replica != 0 || req.Arbiter != 0 {
		return lay, api.Errorf(api.ErrInvalid, "a volume is either replicated or dispersed, not both")
	}
	n, m := req.Disperse, req.Redundancy
	if n == -1 || (n == 0 && req.DisperseData == 0) {
		n = len(req.Bricks)
	}
	if m == 0 {
		m = DefaultRedundancy(n)
	}
	if req.DisperseData != 0 {
		if req.Disperse > 0 && req.Disperse != req.DisperseData+m {
			return lay, api.Errorf(api.ErrInvalid, "disperse %d does not equal disperse-data %d + redundancy %d", req.Disperse, req.DisperseData, m)
		}
		n = req.DisperseData + m
	}
	if n < 1 || len(req.Bricks)%n != 0 {
		return lay, api.Errorf(api.ErrInvalid, "%d bricks do not make disperse sets of %d (consecutive bricks form a set)", len(req.Bricks), n)
	}
	if n > volume.MaxDisperse {
		return lay, api.Errorf(api.ErrInvalid, "disperse %d: a disperse set has at most %d bricks", n, volume.MaxDisperse)
	}
	_, warn, err := disperse.NewGeometry(n, m)
	if err != nil {
		return lay, api.Errorf(api.ErrInvalid, "disperse %d redundancy %d: %v", n, m, err)
	}
	lay.disperse, lay.redundancy = n, m
	if warn != "" {
		lay.warnings = append(lay.warnings, fmt.Sprintf("disperse %d redundancy %d: %s", n, m, warn))
	}
	return lay, nil
}

// planLayout checks the volume-type keywords of req (GlusterFS's) and
// the brick count against them.
func planLayout(req api.CreateVolumeRequest) (layout, error) {
	if req.Disperse != 0 || req.DisperseData != 0 || req.Redundancy != 0 {
		return planDisperse(req)
	}
	lay := layout{typ: volume.Distribute}
	switch {
	case req.Arbiter != 0 && req.Replica == 0:
		return lay, api.Errorf(api.ErrInvalid, "arbiter needs a replicated volume: write \"replica 3 arbiter 1\"")
	case req.Arbiter != 0 && req.Arbiter != 1:
		return lay, api.Errorf(api.ErrInvalid, "arbiter count %d: only \"arbiter 1\" is supported (replica 3 arbiter 1)", req.Arbiter)
	case req.Arbiter == 1 && req.Replica != 2 && req.Replica != 3:
		return lay, api.Errorf(api.ErrInvalid, "arbiter volumes are replica 3 (two data bricks and an arbiter per set): write \"replica 3 arbiter 1\", not replica %d", req.Replica)
	case req.Replica == 0:
		return lay, nil
	case req.Replica < 2 || req.Replica > volume.MaxReplica:
		return lay, api.Errorf(api.ErrInvalid, "replica count %d is out of range: a replica set has 2 to %d bricks", req.Replica, volume.MaxReplica)
	}
	lay.typ, lay.replica, lay.arbiter = volume.Replicate, req.Replica, req.Arbiter == 1
	if lay.arbiter {
		// "replica 2 arbiter 1" is GlusterFS's older spelling of
		// "replica 3 arbiter 1": two data bricks and an arbiter.
		lay.replica = 3
	}
	if n := len(req.Bricks); n > 0 && n%lay.replica != 0 {
		return lay, api.Errorf(api.ErrInvalid, "replica sets of %d need a multiple of %d bricks, not %d (consecutive bricks form a set)", lay.replica, lay.replica, n)
	}
	return lay, nil
}

// planBricks turns the request's "host:/path" list into bricks of the
// cluster's nodes, refusing unknown hosts, duplicates and paths another
// volume uses.
func (n *Node) planBricks(ctx context.Context, st *state.State, req api.CreateVolumeRequest, lay layout) ([]state.Brick, error) {
	if len(req.Bricks) == 0 {
		return nil, api.Errorf(api.ErrInvalid, "volume %s: no bricks given (want host:/path ...)", req.Name)
	}
	var bricks []state.Brick
	for i, s := range req.Bricks {
		host, path, err := ParseBrick(s)
		if err != nil {
			return nil, err
		}
		node, err := n.nodeForHost(ctx, st, host)
		if err != nil {
			return nil, err
		}
		b := state.Brick{ID: newID(), Node: node, Host: host, Path: path, Arbiter: lay.arbiter && i%lay.replica == lay.replica-1}
		for _, o := range bricks {
			if o.Node != node {
				continue
			}
			if o.Path == path {
				return nil, api.Errorf(api.ErrInvalid, "duplicate brick %s (same directory as %s)", b.Name(), o.Name())
			}
			if nested(o.Path, path) {
				return nil, api.Errorf(api.ErrInvalid, "bricks %s and %s are nested; bricks must not contain each other", o.Name(), b.Name())
			}
		}
		if err := checkBrickUnused(st, b); err != nil {
			return nil, err
		}
		bricks = append(bricks, b)
	}
	return bricks, nil
}

// checkBrickUnused refuses a brick whose directory is (inside) a brick of
// an existing volume on the same node.
func checkBrickUnused(st *state.State, b state.Brick) error {
	for _, name := range st.VolumeNames() {
		for _, o := range st.Volumes[name].Bricks {
			if o.Node != b.Node {
				continue
			}
			if o.Path == b.Path {
				return api.Errorf(api.ErrInvalid, "brick %s is already part of volume %s", b.Name(), name)
			}
			if nested(o.Path, b.Path) {
				return api.Errorf(api.ErrInvalid, "brick %s and brick %s of volume %s are nested; bricks must not contain each other", b.Name(), o.Name(), name)
			}
		}
	}
	return nil
}

// nested reports whether one of a and b is inside the other.
func nested(a, b string) bool {
	under := func(p, dir string) bool { return dir == "/" || strings.HasPrefix(p, dir+"/") }
	return under(a, b) || under(b, a)
}

// createVolume checks and marks the bricks, then records the volume.
func (n *Node) createVolume(ctx context.Context, req api.CreateVolumeRequest) (api.VolumeInfo, error) {
	if err := CheckVolumeName(req.Name); err != nil {
		return api.VolumeInfo{}, err
	}
	lay, err := planLayout(req)
	if err != nil {
		return api.VolumeInfo{}, err
	}
	n.opMu.Lock()
	defer n.opMu.Unlock()
	st := n.store.State()
	if _, ok := st.Volumes[req.Name]; ok {
		return api.VolumeInfo{}, api.Errorf(api.ErrExists, "volume %s already exists", req.Name)
	}
	bricks, err := n.planBricks(ctx, st, req, lay)
	if err != nil {
		return api.VolumeInfo{}, err
	}
	v := &state.Volume{Name: req.Name, ID: newID(), Type: lay.typ, Replica: lay.replica,
		Disperse: lay.disperse, Redundancy: lay.redundancy, Bricks: bricks, Secret: newSecret()}
	var marked []state.Brick
	for _, b := range bricks {
		req := MarkRequest{Path: b.Path, VolumeID: v.ID, Force: req.Force}
		if err := n.onNode(ctx, b.Node, func() error { return markBrick(req, n.dir) }, http.MethodPost, "/v1/local/bricks/mark", req); err != nil {
			n.unmarkAll(ctx, marked)
			return api.VolumeInfo{}, api.Errorf(api.ErrInvalid, "volume %s: brick %s: %w", v.Name, b.Name(), err)
		}
		marked = append(marked, b)
	}
	if err := n.store.Apply(state.Command{Op: state.OpCreateVolume, Volume: v}); err != nil {
		n.unmarkAll(ctx, marked)
		return api.VolumeInfo{}, err
	}
	n.log.Info("volume created", "volume", v.Name, "id", v.ID, "type", v.Type, "replica", v.Replica,
		"disperse", v.Disperse, "redundancy", v.Redundancy, "bricks", len(bricks))
	vi, err := n.info(v.Name)
	vi.Warnings = lay.warnings
	return vi, err
}

// unmarkAll undoes the marks of bricks, logging failures.
func (n *Node) unmarkAll(ctx context.Context, bricks []state.Brick) {
	for _, b := range bricks {
		if err := n.unmark(ctx, b); err != nil {
			n.log.Warn("unmarking brick failed", "brick", b.Name(), "err", err)
		}
	}
}

// unmark removes the volume mark of brick b on its node.
func (n *Node) unmark(ctx context.Context, b state.Brick) error {
	req := MarkRequest{Path: b.Path}
	return n.onNode(ctx, b.Node, func() error { return unmarkBrick(req) }, http.MethodPost, "/v1/local/bricks/unmark", req)
}

// startNodes starts the bricks of v, from the state of index idx, on
// every node that serves some. With
// allOrNothing, the first failure stops what started and is returned;
// otherwise the failures are joined and the others run.
func (n *Node) startNodes(ctx context.Context, v *state.Volume, idx uint64, allOrNothing bool) error {
	var errs []error
	var started []string
	for _, id := range nodesOf(v) {
		req := LocalStartRequest{Volume: *v, AllOrNothing: allOrNothing, Index: idx}
		err := n.onNode(ctx, id, func() error { return n.startBricks(v, idx, allOrNothing) }, http.MethodPost, "/v1/local/volumes/"+v.ID+"/start", req)
		if err != nil && allOrNothing {
			n.stopNodes(ctx, v, started)
			return err
		}
		if err != nil {
			errs = append(errs, err)
		}
		started = append(started, id)
	}
	if len(errs) > 0 {
		return api.Errorf(api.ErrInvalid, "volume %s: %w", v.Name, errors.Join(errs...))
	}
	return nil
}

// stopNodes stops the bricks of v on nodes (every node of v if nil). A
// node that cannot be reached is logged: it stops them when it sees the
// volume gone (Node.sweep) or restarts; a volume only stopped meanwhile
// keeps that node's bricks serving until then (a known gap).
func (n *Node) stopNodes(ctx context.Context, v *state.Volume, nodes []string) {
	if nodes == nil {
		nodes = nodesOf(v)
	}
	for _, id := range nodes {
		err := n.onNode(ctx, id, func() error { n.stopVolumeRun(v.ID); return nil }, http.MethodPost, "/v1/local/volumes/"+v.ID+"/stop", struct{}{})
		if err != nil {
			n.log.Warn("stopping bricks on a node failed", "volume", v.Name, "node", id, "err", err)
		}
	}
}

// startVolume starts the volume's bricks and marks it started; it returns
// once every brick listens, or fails with why one did not (and stops the
// others). With force, on a volume already started, it starts the bricks
// that do not run (dead ones are not restarted otherwise); those that
// still fail are listed in the error while the others run.
func (n *Node) startVolume(name string, force bool) (api.VolumeInfo, error) {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	st := n.store.State()
	v, err := st.Volume(name)
	if err != nil {
		return api.VolumeInfo{}, err
	}
	started := v.Status == api.StatusStarted
	if started && !force {
		return api.VolumeInfo{}, api.Errorf(api.ErrState, "volume %s is already started (use force to restart its offline bricks)", name)
	}
	if !started && v.Secret == "" { // a volume made before volumes had secrets
		if err := n.store.Apply(state.Command{Op: state.OpSetSecret, Name: name, Value: newSecret()}); err != nil {
			return api.VolumeInfo{}, err
		}
		st = n.store.State()
		if v, err = st.Volume(name); err != nil {
			return api.VolumeInfo{}, err
		}
	}
	ctx := context.Background()
	if err := n.startNodes(ctx, v, st.Index, !started); err != nil {
		return api.VolumeInfo{}, err
	}
	if !started {
		if err := n.store.Apply(state.Command{Op: state.OpSetStatus, Name: name, Status: api.StatusStarted}); err != nil {
			n.stopNodes(ctx, v, nil)
			return api.VolumeInfo{}, err
		}
	}
	n.log.Info("volume started", "volume", name, "force", force)
	return n.info(name)
}

// stopVolume marks the volume stopped and stops its bricks.
func (n *Node) stopVolume(name string) (api.VolumeInfo, error) {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	v, err := n.store.State().Volume(name)
	if err != nil {
		return api.VolumeInfo{}, err
	}
	if err := n.store.Apply(state.Command{Op: state.OpSetStatus, Name: name, Status: api.StatusStopped}); err != nil {
		return api.VolumeInfo{}, err
	}
	n.stopNodes(context.Background(), v, nil)
	n.log.Info("volume stopped", "volume", name)
	return n.info(name)
}

// deleteVolume forgets a volume that is not started. Its bricks lose the
// volume mark; their data stays.
func (n *Node) deleteVolume(name string) error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	v, err := n.store.State().Volume(name)
	if err != nil {
		return err
	}
	if v.Status == api.StatusStarted {
		return api.Errorf(api.ErrState, "volume %s is started; stop it first (mortar volume stop %s)", name, name)
	}
	ctx := context.Background()
	var unmarked []state.Brick
	for _, b := range v.Bricks {
		if err := n.unmark(ctx, b); err != nil {
			n.remarkAll(ctx, v, unmarked)
			return api.Errorf(api.ErrInvalid, "cannot delete volume %s: brick %s: %w", name, b.Name(), err)
		}
		unmarked = append(unmarked, b)
	}
	if err := n.store.Apply(state.Command{Op: state.OpDeleteVolume, Name: name}); err != nil {
		n.remarkAll(ctx, v, unmarked)
		return err
	}
	n.log.Info("volume deleted; brick data kept", "volume", name, "id", v.ID)
	return nil
}

// remarkAll restores the marks of bricks unmarked by a delete that failed.
func (n *Node) remarkAll(ctx context.Context, v *state.Volume, bricks []state.Brick) {
	for _, b := range bricks {
		req := MarkRequest{Path: b.Path, VolumeID: v.ID, Force: true}
		if err := n.onNode(ctx, b.Node, func() error { return markBrick(req, n.dir) }, http.MethodPost, "/v1/local/bricks/mark", req); err != nil {
			n.log.Error("re-marking brick failed", "volume", v.Name, "brick", b.Name(), "err", err)
		}
	}
}

// setOption sets a volume option after checking it.
func (n *Node) setOption(name, key, value string) (api.VolumeInfo, error) {
	if err := checkOption(key, value); err != nil {
		return api.VolumeInfo{}, err
	}
	n.opMu.Lock()
	defer n.opMu.Unlock()
	v, err := n.store.State().Volume(name)
	if err != nil {
		return api.VolumeInfo{}, err
	}
	if err := checkVolumeOption(v, key, value); err != nil {
		return api.VolumeInfo{}, err
	}
	if err := n.store.Apply(state.Command{Op: state.OpSetOption, Name: name, Key: key, Value: value}); err != nil {
		return api.VolumeInfo{}, err
	}
	n.log.Info("volume option set", "volume", name, "key", key, "value", value)
	return n.info(name)
}

// resetOption sets option key of volume name (every option, if key is
// empty) back to its default, in one command, refusing what `set` of the
// default would refuse.
func (n *Node) resetOption(name, key string) (api.VolumeInfo, error) {
	if key != "" && !options.IsKnown(key) {
		return api.VolumeInfo{}, checkOption(key, "") // unknown: says which are known
	}
	n.opMu.Lock()
	defer n.opMu.Unlock()
	v, err := n.store.State().Volume(name)
	if err != nil {
		return api.VolumeInfo{}, err
	}
	for k := range v.Options {
		if (key == "" || k == key) && k == options.OptEncryption {
			if err := checkVolumeOption(v, k, options.Default(k)); err != nil {
				return api.VolumeInfo{}, err
			}
		}
	}
	if err := n.store.Apply(state.Command{Op: state.OpResetOption, Name: name, Key: key}); err != nil {
		return api.VolumeInfo{}, err
	}
	n.log.Info("volume option reset", "volume", name, "key", key)
	return n.info(name)
}

// info describes one volume.
func (n *Node) info(name string) (api.VolumeInfo, error) {
	st := n.store.State()
	v, err := st.Volume(name)
	if err != nil {
		return api.VolumeInfo{}, err
	}
	return volumeInfo(st, v), nil
}

// list describes every volume, by name.
func (n *Node) list() []api.VolumeInfo {
	st := n.store.State()
	out := []api.VolumeInfo{}
	for _, name := range st.VolumeNames() {
		out = append(out, volumeInfo(st, st.Volumes[name]))
	}
	return out
}

// status reports the live state of a volume's bricks.
func (n *Node) status(ctx context.Context, name string) (api.VolumeStatus, error) {
	st := n.store.State()
	v, err := st.Volume(name)
	if err != nil {
		return api.VolumeStatus{}, err
	}
	vs := api.VolumeStatus{Name: v.Name, ID: v.ID, Status: v.Status, Bricks: []api.BrickStatus{}}
	byID := map[string]api.BrickStatus{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range nodesOf(v) {
		wg.Go(func() {
			var got []api.BrickStatus
			if id == n.id {
				got = n.localStatus(v)
			} else if err := n.call(ctx, id, http.MethodPost, "/v1/local/volumes/"+v.ID+"/status", v, &got); err != nil {
				for _, b := range v.Bricks {
					if b.Node == id {
						got = append(got, api.BrickStatus{BrickInfo: brickInfo(st, b), Error: fmt.Sprintf("node %s unreachable: %v", st.Nodes[id].Addr, err)})
					}
				}
			}
			mu.Lock()
			for _, bs := range got {
				byID[bs.ID] = bs
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, b := range v.Bricks {
		bs, ok := byID[b.ID]
		if !ok {
			bs = api.BrickStatus{BrickInfo: brickInfo(st, b), Error: "no status from its node"}
		}
		vs.Bricks = append(vs.Bricks, bs)
	}
	return vs, nil
}

// spec returns the spec of a started volume.
func (n *Node) spec(name string) (volume.Spec, error) {
	st := n.store.State()
	v, err := st.Volume(name)
	if err != nil {
		return volume.Spec{}, err
	}
	if v.Status != api.StatusStarted {
		return volume.Spec{}, api.Errorf(api.ErrState, "volume %s is not started (mortar volume start %s)", name, name)
	}
	return st.Spec(v), nil
}

func volumeInfo(st *state.State, v *state.Volume) api.VolumeInfo {
	vi := api.VolumeInfo{
		Name:        v.Name,
		ID:          v.ID,
		Type:        v.Type,
		Replica:     v.Replica,
		Disperse:    v.Disperse,
		Redundancy:  v.Redundancy,
		Status:      v.Status,
		Options:     v.Options,
		SpecVersion: v.SpecVersion,
		Bricks:      []api.BrickInfo{},
	}
	for _, b := range v.Bricks {
		vi.Bricks = append(vi.Bricks, brickInfo(st, b))
	}
	return vi
}

func brickInfo(st *state.State, b state.Brick) api.BrickInfo {
	return api.BrickInfo{ID: b.ID, Host: b.Host, Path: b.Path, Addr: state.BrickAddr(st.Nodes[b.Node].Addr, b.Port), Port: b.Port, Arbiter: b.Arbiter}
}
