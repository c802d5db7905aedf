package mgmt

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
)

// replaceSettle bounds how long the destination's node may take to see
// the replacement in its copy of the state.
const replaceSettle = 10 * time.Second

// replaceBrick replaces a brick of a replicated or dispersed volume by an
// empty directory, as GlusterFS's "replace-brick SRC DST commit force":
//
//  1. the new directory must not be (inside) another brick, and its node
//     must find it usable and empty, and off the root file system unless
//     Force (posix.CheckNew): until then nothing has changed;
//  2. the old brick is stopped if its node answers (it may be dead: that
//     is the usual reason to replace it); its directory is left as it is;
//  3. the volume's brick takes the new host and path (it keeps its id,
//     so clients and the heal indexes of the other bricks still name it);
//  4. the new brick is reset on its node (see resetBrick): marked pending
//     on the other bricks of its set, started, and filled by a full heal.
func (n *Node) replaceBrick(ctx context.Context, name string, req api.ReplaceBrickRequest) (api.VolumeInfo, error) {
	n.opMu.Lock()
	st := n.store.State()
	v, err := st.Volume(name)
	if err != nil {
		n.opMu.Unlock()
		return api.VolumeInfo{}, err
	}
	if err := checkHealableStarted(v, "its bricks hold the only copy of their files, so a new brick could not be filled (use remove-brick and add-brick)"); err != nil {
		n.opMu.Unlock()
		return api.VolumeInfo{}, err
	}
	old, _, err := n.findBrick(ctx, st, v, req.Source)
	if err != nil {
		n.opMu.Unlock()
		return api.VolumeInfo{}, err
	}
	host, path, err := ParseBrick(req.Destination)
	if err != nil {
		n.opMu.Unlock()
		return api.VolumeInfo{}, err
	}
	node, err := n.nodeForHost(ctx, st, host)
	if err != nil {
		n.opMu.Unlock()
		return api.VolumeInfo{}, err
	}
	nb := state.Brick{ID: old.ID, Node: node, Host: host, Path: path, Arbiter: old.Arbiter}
	if err := checkBrickUnused(st, nb); err != nil {
		n.opMu.Unlock()
		return api.VolumeInfo{}, err
	}
	// Nothing changes before the new directory is known to be usable.
	check := MarkRequest{Path: path, Force: req.Force}
	if err := n.onNode(ctx, node, func() error { return checkNewBrick(check, n.dir) }, http.MethodPost, "/v1/local/bricks/check", check); err != nil {
		n.opMu.Unlock()
		return api.VolumeInfo{}, api.Errorf(api.ErrInvalid, "replace-brick: %s cannot be the new brick, nothing was changed: %w", nb.Name(), err)
	}
	stop := func() error { n.stopLocalBrick(v.ID, old.ID); return nil }
	if err := n.onNode(ctx, old.Node, stop, http.MethodPost, "/v1/local/volumes/"+v.ID+"/bricks/"+old.ID+"/stop", struct{}{}); err != nil {
		n.log.Warn("the replaced brick's node did not answer; its brick process, if any, keeps running until that node sees the change", "brick", old.Name(), "err", err)
	}
	if err := n.store.Apply(state.Command{Op: state.OpReplaceBrick, Name: name, Brick: old.ID, Node: &state.Node{ID: node}, Key: host, Value: path}); err != nil {
		n.opMu.Unlock()
		return api.VolumeInfo{}, err
	}
	n.opMu.Unlock()
	n.log.Info("brick replaced; resetting the new one", "volume", name, "old", old.Name(), "new", nb.Name())
	// The new brick's node resets it once it has seen the replacement.
	deadline := time.Now().Add(replaceSettle)
	for {
		var vi api.VolumeInfo
		err = n.onNode(ctx, node, func() error {
			var err error
			vi, err = n.resetBrick(ctx, name, nb.Name())
			return err
		}, http.MethodPost, api.VolPath(name, "reset-brick"), api.ResetBrickRequest{Brick: nb.Name()})
		if err == nil || !errors.Is(err, api.ErrInvalid) || time.Now().After(deadline) {
			if err != nil {
				return api.VolumeInfo{}, api.Errorf(api.ErrState, "replace-brick: the volume now uses %s, but resetting it failed: %w (fix the cause, then: mortar volume reset-brick %s %s)", nb.Name(), err, name, nb.Name())
			}
			if vi.Name == "" {
				return n.info(name)
			}
			return vi, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopLocalBrick stops brick id of volume vid on this node, if it runs.
func (n *Node) stopLocalBrick(vid, id string) {
	n.runMu.Lock()
	vr := n.vols[vid]
	n.runMu.Unlock()
	if vr != nil {
		n.stopBrick(vr, id)
	}
}
