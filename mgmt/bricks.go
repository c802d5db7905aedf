package mgmt

import (
	"fmt"
	"syscall"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer/locks"
	"github.com/mortarfs/mortar/layer/readahead"
)

// runningBrick is a brick this node serves.
type runningBrick struct {
	volume string
	store  *posix.Store
}

// startBrick opens brick b of volume v and serves it: posix storage, the
// locks layer, and read-ahead for sequential O_DIRECT reads on top.
func (n *Node) startBrick(v *VolumeState, b BrickState) error {
	st, err := posix.New(b.Path, posix.Options{
		VolumeID: v.ID,
		Logger:   n.log.With("volume", v.Name, "brick", b.Name()),
	})
	if err != nil {
		return fmt.Errorf("brick %s: %w", b.Name(), err)
	}
	n.runMu.Lock()
	defer n.runMu.Unlock()
	n.bricks.Add(b.ID, v.ID, readahead.New(locks.New(st)))
	n.running[b.ID] = &runningBrick{volume: v.Name, store: st}
	delete(n.failed, b.ID)
	n.log.Info("brick started", "volume", v.Name, "brick", b.Name(), "id", b.ID)
	return nil
}

// stopBrick stops serving brick id, if it runs.
func (n *Node) stopBrick(id string) {
	n.runMu.Lock()
	defer n.runMu.Unlock()
	delete(n.failed, id)
	rb, ok := n.running[id]
	if !ok {
		return
	}
	delete(n.running, id)
	n.bricks.Remove(id)
	if err := rb.store.Close(); err != nil {
		n.log.Warn("closing brick storage failed", "volume", rb.volume, "brick", id, "err", err)
	}
	n.log.Info("brick stopped", "volume", rb.volume, "id", id)
}

// startBricks starts this node's bricks of v that do not run yet. On
// error it stops the ones it started and returns the error.
func (n *Node) startBricks(v *VolumeState) error {
	var started []string
	for _, b := range v.Bricks {
		if b.Node != n.id || n.isRunning(b.ID) {
			continue
		}
		if err := n.startBrick(v, b); err != nil {
			for _, id := range started {
				n.stopBrick(id)
			}
			return errorf(ErrInvalid, "cannot start volume %s: %w", v.Name, err)
		}
		started = append(started, b.ID)
	}
	return nil
}

// stopBricks stops this node's bricks of v.
func (n *Node) stopBricks(v *VolumeState) {
	for _, b := range v.Bricks {
		if b.Node == n.id {
			n.stopBrick(b.ID)
		}
	}
}

func (n *Node) isRunning(id string) bool {
	n.runMu.Lock()
	defer n.runMu.Unlock()
	_, ok := n.running[id]
	return ok
}

// restoreBricks starts the bricks of the started volumes when the node
// starts. A brick that fails is logged and shown offline in status; the
// others serve.
func (n *Node) restoreBricks() {
	st := n.store.State()
	for _, name := range st.VolumeNames() {
		v := st.Volumes[name]
		if v.Status != StatusStarted {
			continue
		}
		for _, b := range v.Bricks {
			if b.Node != n.id {
				continue
			}
			if err := n.startBrick(v, b); err != nil {
				n.log.Error("brick did not start", "volume", v.Name, "brick", b.Name(), "err", err)
				n.runMu.Lock()
				n.failed[b.ID] = err.Error()
				n.runMu.Unlock()
			}
		}
	}
}

// closeAllBricks closes the storage of every running brick (the brick
// server is closed already).
func (n *Node) closeAllBricks() {
	n.runMu.Lock()
	defer n.runMu.Unlock()
	for id, rb := range n.running {
		if err := rb.store.Close(); err != nil {
			n.log.Warn("closing brick storage failed", "volume", rb.volume, "brick", id, "err", err)
		}
		delete(n.running, id)
	}
}

// brickStatus returns the live state of brick b of v.
func (n *Node) brickStatus(st *State, v *VolumeState, b BrickState) BrickStatus {
	bs := BrickStatus{BrickInfo: brickInfo(st, b)}
	if b.Node != n.id {
		bs.Error = "served by another node"
		return bs
	}
	n.runMu.Lock()
	_, bs.Online = n.running[b.ID]
	bs.Error = n.failed[b.ID]
	n.runMu.Unlock()
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(b.Path, &sfs); err != nil {
		if bs.Error == "" {
			bs.Error = fmt.Sprintf("statfs %s: %v", b.Path, err)
		}
		return bs
	}
	bsize := uint64(sfs.Bsize)
	bs.Disk = &DiskUsage{
		Total:      sfs.Blocks * bsize,
		Free:       sfs.Bfree * bsize,
		Avail:      sfs.Bavail * bsize,
		Inodes:     sfs.Files,
		InodesFree: sfs.Ffree,
	}
	return bs
}
