package mgmt

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/brickrun"
	"github.com/mortarfs/mortar/mgmt/healdaemon"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/volume"
)

// volumeRun is what this node runs for one started volume: its bricks, and
// goroutines that live exactly as long as the volume runs here (brick
// watchers today; a per-volume worker such as the heal daemon is started
// with volumeRun.spawn the same way and stops with the volume).
type volumeRun struct {
	name   string
	bricks map[string]*brickRun // by brick id; guarded by Node.runMu
	ctx    context.Context      // cancelled when the volume stops here
	cancel context.CancelFunc
	wg     sync.WaitGroup
	heal   *healdaemon.Daemon // a replicated or dispersed volume's (see heal.go); guarded by Node.runMu
	// made is the index of a state that has the volume (the one the run
	// was made from, or a later one a sweep read); known is false while
	// that is not sure (a run made on a request from a leader that did
	// not say its state's index, for a volume this node's state has not
	// shown yet). Node.sweep reads both. Guarded by Node.runMu.
	made  uint64
	known bool
}

// spawn runs fn in a goroutine that the volume's stop waits for; fn
// should return once ctx is done.
func (vr *volumeRun) spawn(fn func(ctx context.Context)) {
	vr.wg.Go(func() { fn(vr.ctx) })
}

// brickRun is one of this node's bricks of a started volume.
type brickRun struct {
	name string
	proc brickrun.Brick // nil while offline
	err  string         // why it is offline
}

// volumeRunFor returns the run of volume v, making it if needed; idx is
// the index of a state that has v (0: unknown, as from a leader before
// LocalStartRequest.Index).
func (n *Node) volumeRunFor(v *state.Volume, idx uint64) (*volumeRun, error) {
	made, known := idx, idx != 0
	if !known { // this node's own state says
		st := n.latestState()
		made, known = st.Index, st.Volumes[v.Name] != nil && st.Volumes[v.Name].ID == v.ID
	}
	n.runMu.Lock()
	defer n.runMu.Unlock()
	if n.closing {
		return nil, api.Errorf(api.ErrState, "the node is shutting down")
	}
	vr := n.vols[v.ID]
	if vr == nil {
		vr = &volumeRun{name: v.Name, bricks: map[string]*brickRun{}, made: made, known: known}
		vr.ctx, vr.cancel = context.WithCancel(context.Background())
		n.vols[v.ID] = vr
	}
	return vr, nil
}

// startBricks starts this node's bricks of v, taken from a state of index
// idx (see volumeRunFor), that do not run. With
// allOrNothing (a volume being started) a brick that fails stops the
// others and the error says why; otherwise (start force, a node coming
// back) the others keep running and the error lists the failures, which
// status shows too.
func (n *Node) startBricks(v *state.Volume, idx uint64, allOrNothing bool) error {
	vr, err := n.volumeRunFor(v, idx)
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range v.Bricks {
		if b.Node != n.id || n.isRunning(vr, b.ID) {
			continue
		}
		if err := n.startBrick(vr, v, b); err != nil {
			if allOrNothing {
				n.stopVolumeRun(v.ID)
				return api.Errorf(api.ErrInvalid, "cannot start volume %s: %w", v.Name, err)
			}
			errs = append(errs, err)
		}
	}
	n.startHeal(vr, v)
	if len(errs) > 0 {
		return api.Errorf(api.ErrInvalid, "volume %s: %w", v.Name, errors.Join(errs...))
	}
	return nil
}

func (n *Node) isRunning(vr *volumeRun, id string) bool {
	n.runMu.Lock()
	defer n.runMu.Unlock()
	br := vr.bricks[id]
	return br != nil && br.proc != nil
}

// startBrick starts brick b of v on the port it had, or on a free port
// that it keeps from then on.
func (n *Node) startBrick(vr *volumeRun, v *state.Volume, b state.Brick) error {
	n.writeAuth(v)
	n.writeReserve(v)
	n.writeFence(v)
	proc, err := n.runner.Start(brickrun.Config{
		Volume:      v.Name,
		VolumeID:    v.ID,
		BrickID:     b.ID,
		Path:        b.Path,
		Arbiter:     b.Arbiter,
		Disperse:    v.Type == volume.Disperse,
		Replicated:  v.Type == volume.Replicate,
		Listen:      net.JoinHostPort(n.brickHost, strconv.Itoa(b.Port)),
		TLS:         n.tls,
		AuthFile:    n.authFile(b.ID),
		Reserve:     v.Options[options.OptStorageReserve],
		ReserveFile: n.reserveFile(b.ID),
		FenceFile:   n.fenceFile(b.ID),
		Logger:      n.log.With("volume", v.Name, "brick", b.Name()),
	})
	if err == nil {
		if port := portOf(proc.Addr()); port != b.Port {
			if err = n.store.Apply(state.Command{Op: state.OpSetBrickPort, Name: v.Name, Brick: b.ID, Port: port}); err != nil {
				proc.Stop(brickrun.StopTimeout)
			}
		}
	}
	n.runMu.Lock()
	defer n.runMu.Unlock()
	br := vr.bricks[b.ID]
	if br == nil {
		br = &brickRun{name: b.Name()}
		vr.bricks[b.ID] = br
	}
	if err != nil {
		err = fmt.Errorf("brick %s: %w", b.Name(), err)
		br.err = err.Error()
		return err
	}
	br.proc, br.err = proc, ""
	vr.spawn(func(ctx context.Context) {
		select {
		case <-proc.Done():
			n.reaped(vr, b.ID, proc)
		case <-ctx.Done(): // the volume's run ended (its bricks may serve on: see endVolumeRun)
		}
	})
	n.log.Info("brick started", "volume", v.Name, "brick", b.Name(), "id", b.ID, "addr", proc.Addr(), "pid", proc.PID())
	return nil
}

// portOf returns the port of a host:port address, or 0.
func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	return port
}

// reaped records that proc, brick id of vr, has exited, unless the node
// stopped it on purpose. A dead brick stays offline (as in GlusterFS)
// until "volume start NAME force".
func (n *Node) reaped(vr *volumeRun, id string, proc brickrun.Brick) {
	n.runMu.Lock()
	defer n.runMu.Unlock()
	br := vr.bricks[id]
	if br == nil || br.proc != proc {
		return
	}
	br.proc, br.err = nil, exitReason(proc)
	n.log.Error("brick died; it stays offline until \"mortar volume start "+vr.name+" force\"", "volume", vr.name, "brick", br.name, "why", br.err)
}

func exitReason(proc brickrun.Brick) string {
	if err := proc.ExitErr(); err != nil {
		return err.Error()
	}
	return "brick stopped"
}

// stopVolumeRun stops this node's bricks of volume id (all at once, each
// with SIGTERM and then SIGKILL after brickrun.StopTimeout) and the volume's
// goroutines.
func (n *Node) stopVolumeRun(id string) { n.endVolumeRun(id, true) }

// endVolumeRun ends what the node runs for volume id; its bricks stop
// only if stopBricks (a node closing with a runner that keeps them leaves
// them serving, to take them over when it starts again).
func (n *Node) endVolumeRun(id string, stopBricks bool) {
	n.runMu.Lock()
	vr := n.vols[id]
	delete(n.vols, id)
	var procs []brickrun.Brick
	if vr != nil {
		for _, br := range vr.bricks {
			if br.proc != nil {
				procs = append(procs, br.proc)
				br.proc = nil
			}
		}
	}
	n.runMu.Unlock()
	if vr == nil {
		return
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		if stopBricks {
			wg.Go(func() { p.Stop(brickrun.StopTimeout) })
		}
	}
	wg.Wait()
	vr.cancel()
	vr.wg.Wait()
	if stopBricks {
		n.log.Info("bricks stopped", "volume", vr.name, "count", len(procs))
	} else {
		n.log.Info("bricks left serving", "volume", vr.name, "count", len(procs))
	}
}

// restoreBricks starts the bricks of the started volumes when the node
// starts. A brick that fails is logged and shown offline in status; the
// others serve. It starts what latestState says.
func (n *Node) restoreBricks() {
	st := n.latestState()
	for _, name := range st.VolumeNames() {
		v := st.Volumes[name]
		if v.Status != api.StatusStarted {
			continue
		}
		if err := n.startBricks(v, st.Index, false); err != nil {
			n.log.Error("bricks did not start", "volume", v.Name, "err", err)
		}
	}
}

// stopAllBricks stops every brick when the node closes (the volumes stay
// started in the state and their bricks come back with the node), unless
// the runner keeps them serving, and releases the runner.
func (n *Node) stopAllBricks() {
	n.runMu.Lock()
	n.closing = true
	ids := slices.Collect(maps.Keys(n.vols))
	n.runMu.Unlock()
	keep := n.runner != nil && n.runner.Keeps()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { n.endVolumeRun(id, !keep) })
	}
	wg.Wait()
	if n.runner != nil {
		n.runner.Close()
	}
}

// KillBrick ends brick id of this node at once, as `kill -9` of its
// process does (a brick inside the node has its listener, connections and
// storage closed), and returns once the brick is offline. Like any dead
// brick, it stays offline until "volume start NAME force". It is meant for
// fault tests.
func (n *Node) KillBrick(id string) error {
	n.runMu.Lock()
	var vr *volumeRun
	var proc brickrun.Brick
	for _, r := range n.vols {
		if br := r.bricks[id]; br != nil && br.proc != nil {
			vr, proc = r, br.proc
		}
	}
	n.runMu.Unlock()
	if proc == nil {
		return api.Errorf(api.ErrNotFound, "brick %s does not run on this node", id)
	}
	proc.Kill()
	n.reaped(vr, id, proc)
	return nil
}

// brickStatus returns the live state of brick b of v.
func (n *Node) brickStatus(st *state.State, v *state.Volume, b state.Brick) api.BrickStatus {
	bs := api.BrickStatus{BrickInfo: brickInfo(st, b)}
	if b.Node != n.id {
		bs.Error = "served by another node"
		return bs
	}
	n.runMu.Lock()
	if br := n.vols[v.ID].brick(b.ID); br != nil {
		bs.Error = br.err
		if br.proc != nil {
			select {
			case <-br.proc.Done(): // exited; its watcher is about to record it
				bs.Error = exitReason(br.proc)
			default:
				bs.Online, bs.PID = true, br.proc.PID()
			}
		}
	}
	n.runMu.Unlock()
	bs.Disk = n.diskUsage(b, &bs)
	return bs
}

// brick returns brick id of the run, or nil (also for a nil run).
func (vr *volumeRun) brick(id string) *brickRun {
	if vr == nil {
		return nil
	}
	return vr.bricks[id]
}

// diskUsage is what statfs says about b's file system; a failure is
// noted in bs.Error unless that already says something.
func (n *Node) diskUsage(b state.Brick, bs *api.BrickStatus) *api.DiskUsage {
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(b.Path, &sfs); err != nil {
		if bs.Error == "" {
			bs.Error = fmt.Sprintf("statfs %s: %v", b.Path, err)
		}
		return nil
	}
	bsize := uint64(sfs.Bsize)
	return &api.DiskUsage{
		Total:      sfs.Blocks * bsize,
		Free:       sfs.Bfree * bsize,
		Avail:      sfs.Bavail * bsize,
		Inodes:     sfs.Files,
		InodesFree: sfs.Ffree,
	}
}

// latestState is the newer of the state applied so far and the one this
// node last applied before it restarted (state.json): without a quorum
// yet, a restarted node may not have applied its whole log again.
func (n *Node) latestState() *state.State {
	st := n.store.State()
	if cached := n.raft.CachedState(); cached.Index > st.Index {
		return cached
	}
	return st
}
