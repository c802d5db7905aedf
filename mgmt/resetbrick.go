package mgmt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/brickrun"
	"github.com/mortarfs/mortar/mgmt/healdaemon"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume"
)

// markStaleTimeout bounds marking a reset brick as stale on the other
// bricks of its set.
const markStaleTimeout = 10 * time.Second

// resetBrick makes the empty directory of a brick whose disk was replaced
// the volume's brick again and has the heal daemon rebuild it from the
// other bricks of its replica or disperse set:
//
//  1. the directory must exist and be empty (or hold only the .mortar of
//     a brick of this volume): nothing is ever deleted;
//  2. the brick is stopped if it runs;
//  3. the other bricks of its set mark the root as pending for it, so
//     that clients trust their view of the names, not its empty one;
//  4. the directory is marked as the volume's brick and the brick started
//     again on its port;
//  5. a full heal starts, which recreates everything on it.
func (n *Node) resetBrick(ctx context.Context, name, brick string) (api.VolumeInfo, error) {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	st := n.store.State()
	v, err := st.Volume(name)
	if err != nil {
		return api.VolumeInfo{}, err
	}
	if err := checkHealableStarted(v, "its bricks hold the only copy of their files, so there is nothing to rebuild a brick from (reset-brick is for replicated and dispersed volumes)"); err != nil {
		return api.VolumeInfo{}, err
	}
	b, pos, err := n.findBrick(ctx, st, v, brick)
	if err != nil {
		return api.VolumeInfo{}, err
	}
	if b.Node != n.id { // routed here by an older view of the state
		return api.VolumeInfo{}, api.Errorf(api.ErrState, "brick %s is served by another node; retry", b.Name())
	}
	if err := checkEmptyBrick(b, v); err != nil {
		return api.VolumeInfo{}, err
	}
	vr, err := n.volumeRunFor(v, st.Index) // a replacement may be the node's first brick of v
	if err != nil {
		return api.VolumeInfo{}, err
	}
	n.runMu.Lock()
	d := vr.heal
	n.runMu.Unlock()
	wasRunning := n.stopBrick(vr, b.ID)
	err = markStale(ctx, st.Spec(v), pos, n.dial, n.log)
	if err == nil {
		err = posix.Mark(b.Path, v.ID, true)
	}
	if err != nil && !wasRunning {
		return api.VolumeInfo{}, api.Errorf(api.ErrState, "reset-brick %s: %w", b.Name(), err)
	}
	if serr := n.startBrick(vr, v, b); serr != nil {
		return api.VolumeInfo{}, api.Errorf(api.ErrState, "reset-brick %s: %w", b.Name(), errors.Join(err, serr))
	}
	if err != nil { // the brick that ran runs again, untouched
		return api.VolumeInfo{}, api.Errorf(api.ErrState, "reset-brick %s: %w", b.Name(), err)
	}
	n.log.Info("brick reset; rebuilding it with a full heal", "volume", name, "brick", b.Name())
	if d != nil {
		d.Poke()
	}
	// Every node's daemon crawls the sets it heals (this node's daemon
	// may stand by for the brick's set).
	if _, err := n.heal(ctx, name, true); err != nil {
		return api.VolumeInfo{}, api.Errorf(api.ErrState, "reset-brick %s: the brick is reset but the full heal did not start: %w (run: mortar volume heal %s full)", b.Name(), err, name)
	}
	return n.info(name)
}

// findBrick returns the brick of v that s ("host:/path") names, and its
// position: the host may be any name of the brick's node.
func (n *Node) findBrick(ctx context.Context, st *state.State, v *state.Volume, s string) (state.Brick, int, error) {
	host, path, err := ParseBrick(s)
	if err != nil {
		return state.Brick{}, 0, err
	}
	node, _ := n.nodeForHost(ctx, st, host)
	var names []string
	for i, b := range v.Bricks {
		if b.Path == path && (b.Host == host || b.Node == node) {
			return b, i, nil
		}
		names = append(names, b.Name())
	}
	return state.Brick{}, 0, api.Errorf(api.ErrInvalid, "%s is not a brick of volume %s (its bricks: %s)", s, v.Name, strings.Join(names, " "))
}

// checkEmptyBrick refuses a brick directory that holds anything but the
// hidden directory of a brick of volume v.
func checkEmptyBrick(b state.Brick, v *state.Volume) error {
	entries, err := os.ReadDir(b.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return api.Errorf(api.ErrInvalid, "brick directory %s does not exist: create the new, empty directory first (mkdir)", b.Path)
	case err != nil:
		return api.Errorf(api.ErrInvalid, "brick directory %s: %w", b.Path, err)
	}
	mark, err := posix.ReadMark(b.Path)
	if err != nil {
		return api.Errorf(api.ErrInvalid, "brick directory %s: %w", b.Path, err)
	}
	if mark != "" && mark != v.ID {
		return api.Errorf(api.ErrInvalid, "brick directory %s belongs to volume %s, not to this one", b.Path, mark)
	}
	for _, e := range entries {
		if e.Name() == posix.HiddenDir && mark == v.ID {
			continue
		}
		return api.Errorf(api.ErrInvalid, "brick directory %s is not empty (it holds %q): reset-brick takes only an empty directory and never deletes anything (if the brick's data is intact, \"mortar volume start %s force\" brings it back; if its contents are really lost, empty it or give a new directory)",
			b.Path, e.Name(), v.Name)
	}
	return nil
}

// stopBrick stops brick id of vr if it runs, and reports whether it did.
// It then stays offline until started again.
func (n *Node) stopBrick(vr *volumeRun, id string) bool {
	n.runMu.Lock()
	br := vr.bricks[id]
	if br == nil || br.proc == nil {
		n.runMu.Unlock()
		return false
	}
	proc := br.proc
	br.proc, br.err = nil, "stopped for reset-brick"
	n.runMu.Unlock()
	proc.Stop(brickrun.StopTimeout)
	return true
}

// markStale marks the root of the other bricks of the set of brick pos of
// spec as pending for that brick. It needs at least one other data brick
// of a replica set, or as many other bricks of a disperse set as it has
// data bricks (what rebuilding a fragment takes); bricks that are down
// are skipped (the ones that are up will heal them too).
func markStale(ctx context.Context, spec volume.Spec, pos int, dial volume.Dial, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, markStaleTimeout)
	defer cancel()
	size := spec.SetSize()
	set := spec.Sets()[pos/size]
	self := pos % size
	kind, need := "replica", 1
	if spec.Type == volume.Disperse {
		kind, need = "disperse", spec.Disperse-spec.Redundancy
	}
	var errs []error
	data := 0
	for i, b := range set {
		if i == self {
			continue
		}
		c := healdaemon.BrickClient(spec, b, 2*time.Second, dial, log)
		err := c.MarkPending(ctx, "/", layer.RootGfid, 1<<uint(self))
		c.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("brick %s: %w", b.Name(), err))
			continue
		}
		if !b.Arbiter {
			data++
		}
	}
	switch {
	case data == 0:
		return fmt.Errorf("no other data brick of the %s set of %s is up to rebuild it from (start them first): %w",
			kind, set[self].Name(), errors.Join(errs...))
	case data < need:
		return fmt.Errorf("only %d other bricks of the disperse set of %s are up; rebuilding it takes %d (start them first): %w",
			data, set[self].Name(), need, errors.Join(errs...))
	}
	return nil
}
