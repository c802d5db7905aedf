package mgmt

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/heal"
	"github.com/mortarfs/mortar/layer/disperse"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/layer/replicate"
	"github.com/mortarfs/mortar/volume"
)

// The heal daemon. Every started replicated or dispersed volume that this
// node serves a brick of has one (started with the volume's bricks,
// stopped with them): a heal.Healer over protocol clients to every brick
// of the volume, which scans the bricks' heal indexes every
// cluster.heal-interval and heals what they list. GlusterFS calls it the
// self-heal daemon (glustershd). Each set of the volume is healed by one
// node's daemon, the others stand by for it (actingSets, looked at every
// healReload): the first node in the set's brick order that answers, so
// that the sets are healed by the nodes that serve them, in parallel, and
// when a node dies the next of each of its sets takes over within
// seconds. A healer heals a set only while it holds the heal lease of
// most of the set's bricks (heal.Options.Lease): two daemons that both
// think they act for a set never heal it at once. Heal requests go to
// the volume's acting node (actingHealNode), which passes a heal or a
// full heal on to the other nodes of the volume and adds their counts to
// heal info.
// The sets of a dispersed volume are healed like replica sets (their
// namespace is replicated) except for file data, which the disperse
// layer's DataHealer rebuilds from the fragments.
//
// The healer is built from the volume's spec: the bricks' addresses, the
// heal options and the ping timeout. The daemon re-reads the state every
// healReload (and at once when the volume's bricks are started again), and
// when any of those changed (`volume set`, a brick's first port) it replaces
// the healer; a full heal that was running carries on with the new one.

// healReload is how often a heal daemon looks for changes to the volume's
// bricks and heal options.
const healReload = time.Second

// fullConnectWait bounds how long a full heal waits for the clients of the
// bricks this node runs to connect (a brick just restarted), so that the
// crawl does not skip them as down.
const fullConnectWait = 10 * time.Second

// healClientWait is how long a heal daemon's operation waits for a brick
// that is not connected: the healer does not wait for a brick that is
// down, as replicate does not.
const healClientWait = 100 * time.Millisecond

// MaxHealPaths is how many paths heal info lists per brick (the count
// covers them all).
const MaxHealPaths = heal.MaxListed

// healDaemon is the heal daemon of one volume on this node.
type healDaemon struct {
	n        *Node
	vr       *volumeRun
	name, id string // the volume's
	kick     chan struct{}

	// acting says, per replica or disperse set (spec.Sets() order),
	// whether this node's daemon heals it (see actingSets); the others'
	// stand by for it.
	acting atomic.Pointer[[]bool]
	// misses counts, per node, the checks in a row it did not answer
	// (answersSteady); run's goroutine only.
	misses map[string]int

	mu    sync.Mutex
	cur   *healRun      // nil before the first build and after the stop
	full  *api.FullHeal // the last full heal; nil: none since the daemon started
	crawl *healRun      // the run the full heal crawls with
	// lookedAt is the crawl's healer's count of inodes looked at when the
	// crawl began (FullHeal.Looked counts from it).
	lookedAt uint64
}

// healRun is a healer built from one configuration of the volume, with
// its brick clients.
type healRun struct {
	key     string // the configuration (see healKey)
	healer  *heal.Healer
	sets    []heal.Set
	bricks  []volume.Brick // parallel to clients
	clients []*protocol.Client
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// startHeal starts the heal daemon of v, a volume whose bricks vr has just
// started, or has the running one look at the bricks again (their ports
// may be new).
func (n *Node) startHeal(vr *volumeRun, v *state.Volume) {
	if !healable(v) {
		return
	}
	n.runMu.Lock()
	d, fresh := vr.heal, vr.heal == nil
	if fresh {
		d = &healDaemon{n: n, vr: vr, name: v.Name, id: v.ID, kick: make(chan struct{}, 1), misses: map[string]int{}}
		vr.heal = d
	}
	n.runMu.Unlock()
	if !fresh {
		d.poke()
		return
	}
	// The sets whose first brick this node serves are its own without
	// asking anyone (run asks the others).
	mine := n.actingSets(vr.ctx, v, func(context.Context, string) bool { return true })
	d.acting.Store(&mine)
	d.reload(vr.ctx) // requests find a healer as soon as the volume runs
	vr.spawn(d.run)
}

// run keeps the healer in line with the volume's configuration until ctx
// is done (the volume stops here), then stops it.
func (d *healDaemon) run(ctx context.Context) {
	d.checkActing(ctx)
	t := time.NewTicker(healReload)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			d.swap(nil)
			return
		case <-t.C:
			d.reload(ctx)
			d.checkActing(ctx)
		case <-d.kick:
			d.reload(ctx)
			d.redial()
		}
	}
}

// After a brick's return, the heal daemon scans every returnScanEvery for
// returnScanFor: clients that have not reconnected yet go on recording
// what they write as to heal on the returned brick until they do (a
// client in use within 100 ms, an idle one within its backoff of up to
// 2 s), and those entries should not wait for the next heal interval.
const (
	returnScanEvery = 100 * time.Millisecond
	returnScanFor   = 2500 * time.Millisecond
)

// scanAfterReturn has r's healer scan now and then every returnScanEvery
// for returnScanFor.
func (d *healDaemon) scanAfterReturn(r *healRun) {
	t := time.NewTicker(returnScanEvery)
	defer t.Stop()
	end := time.Now().Add(returnScanFor)
	for time.Now().Before(end) {
		r.healer.Trigger()
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// redial has the healer's clients of bricks that are not connected dial
// now, and the healer scan once each is connected: poke follows `volume
// start force`, which restarted bricks, whose heal would otherwise wait
// for the clients' backoff (up to 2 s) and then the next scan (up to
// cluster.heal-interval).
func (d *healDaemon) redial() {
	r := d.current()
	if r == nil {
		return
	}
	for _, c := range r.clients {
		if c.Connected() {
			continue
		}
		c.Redial()
		r.wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.ctx, fullConnectWait)
			defer cancel()
			if c.WaitConnected(ctx) && !r.healer.Manual() {
				d.scanAfterReturn(r)
			}
		})
	}
}

// checkActing finds out which sets this node's daemon heals and which
// it stands by for (actingSets), and tells when that changes; a daemon
// that starts to act for a set scans at once.
func (d *healDaemon) checkActing(ctx context.Context) {
	v := d.n.store.State().Volumes[d.name]
	if v == nil || v.ID != d.id {
		return
	}
	now := d.n.actingSets(ctx, v, d.answersSteady)
	old := d.acting.Swap(&now)
	was, is := setsActing(old), setsActing(&now)
	if slices.Equal(was, is) {
		return
	}
	if len(is) == 0 {
		d.n.log.Info("heal daemon standing by: a node before this one in brick order answers", "volume", d.name)
		return
	}
	d.n.log.Info("heal daemon acting", "volume", d.name, "sets", is)
	if r := d.current(); r != nil {
		r.healer.Trigger()
	}
}

// answersSteady is answers, with a node taken for gone only once it
// missed two checks in a row: one slow answer under load does not move
// its sets' heal to another node and back.
func (d *healDaemon) answersSteady(ctx context.Context, id string) bool {
	if d.n.answers(ctx, id) {
		delete(d.misses, id)
		return true
	}
	d.misses[id]++
	return d.misses[id] < 2
}

// setsActing lists the sets acting says this node heals.
func setsActing(acting *[]bool) []int {
	var out []int
	if acting != nil {
		for i, a := range *acting {
			if a {
				out = append(out, i)
			}
		}
	}
	return out
}

// actsFor reports whether this node's daemon heals set si now.
func (d *healDaemon) actsFor(si int) bool {
	a := d.acting.Load()
	return a != nil && si < len(*a) && (*a)[si]
}

// actingSets says, for each set of v, whether this node heals it: the
// first node, in the set's brick order, that answers (asked with
// answers, each node once) is this one.
func (n *Node) actingSets(ctx context.Context, v *state.Volume, answers func(context.Context, string) bool) []bool {
	nodeOf := map[string]string{}
	for _, b := range v.Bricks {
		nodeOf[b.ID] = b.Node
	}
	asked := map[string]bool{n.id: true}
	up := func(id string) bool {
		ok, seen := asked[id]
		if !seen {
			ok = answers(ctx, id)
			asked[id] = ok
		}
		return ok
	}
	spec := n.store.State().Spec(v)
	sets := spec.Sets()
	out := make([]bool, len(sets))
	for si, set := range sets {
		if !slices.ContainsFunc(set, func(b volume.Brick) bool { return nodeOf[b.ID] == n.id }) {
			continue // not ours to heal: its nodes are not asked
		}
		for _, b := range set {
			if node := nodeOf[b.ID]; up(node) {
				out[si] = node == n.id
				break
			}
		}
	}
	return out
}

// poke makes run look at the configuration now.
func (d *healDaemon) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// current returns the running healer, or nil.
func (d *healDaemon) current() *healRun {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur
}

// reload replaces the healer if the volume's configuration changed.
func (d *healDaemon) reload(ctx context.Context) {
	st := d.n.store.State()
	if v := st.Volumes[d.name]; v == nil || v.ID != d.id {
		st = d.n.latestState() // just restarted: the bricks run from the state last applied
	}
	v := st.Volumes[d.name]
	if v == nil || v.ID != d.id || ctx.Err() != nil {
		return // the volume is stopping
	}
	spec := st.Spec(v)
	key := healKey(spec)
	if r := d.current(); r != nil && r.key == key {
		return
	}
	r, err := d.newRun(ctx, spec, key)
	if err != nil {
		d.n.log.Error("heal daemon cannot start", "volume", d.name, "err", err)
		return
	}
	d.swap(r)
}

// healKey is what a healer is built from: the bricks' addresses and the
// options the healer and its clients read.
func healKey(spec volume.Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "interval=%s policy=%s ping=%s shd=%s type=%s replica=%d disperse=%d redundancy=%d",
		spec.Option(options.OptHealInterval, ""), spec.Option(options.OptFavoriteChildPolicy, ""),
		spec.Option(options.OptPingTimeout, ""), spec.Option(options.OptSelfHealDaemon, ""), spec.Type, spec.Replica, spec.Disperse, spec.Redundancy)
	for _, br := range spec.Bricks {
		fmt.Fprintf(&b, " %s@%s/%t", br.ID, br.Addr, br.Arbiter)
	}
	return b.String()
}

// newRun connects to every brick of spec and builds a healer; it does not
// start it (see swap).
func (d *healDaemon) newRun(ctx context.Context, spec volume.Spec, key string) (*healRun, error) {
	r := &healRun{key: key}
	r.ctx, r.cancel = context.WithCancel(ctx)
	log := d.n.log.With("volume", spec.Name, "component", "heal")
	for _, set := range spec.Sets() {
		var hs heal.Set
		for _, b := range set {
			c := newBrickClient(spec, b, healClientWait, d.n.dial, log)
			r.bricks, r.clients = append(r.bricks, b), append(r.clients, c)
			hs = append(hs, heal.Replica{Name: b.Name(), Layer: c, Arbiter: b.Arbiter, Up: c.Connected})
		}
		r.sets = append(r.sets, hs)
	}
	opts := heal.Options{
		Interval: spec.DurationOption(options.OptHealInterval, 2*time.Second),
		Policy:   spec.Option(options.OptFavoriteChildPolicy, "none"),
		Manual:   spec.Option(options.OptSelfHealDaemon, "on") == "off",
		Logger:   log,
		Active:   d.actsFor,
		Lease:    true,
		Quorate:  func(_ int, m replicate.Mask) bool { return spec.Quorate(m) },
	}
	var err error
	if spec.Type == volume.Disperse {
		sets := make([][]replicate.Child, len(r.sets))
		for i, s := range r.sets {
			sets[i] = s
		}
		var dh *disperse.DataHealer
		if dh, err = disperse.NewDataHealer(sets, spec.Redundancy); err == nil {
			dh.Quiet = spec.DurationOption(options.OptDisperseQuiet, disperse.DefaultQuiet)
			opts.Data = dh
		}
	}
	if err == nil {
		r.healer, err = heal.New(r.sets, opts)
	}
	if err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

// newBrickClient connects a protocol client to brick b of spec.
// dial is nil for plain TCP, the TLS dialer of the node's identity
// otherwise.
func newBrickClient(spec volume.Spec, b volume.Brick, wait time.Duration, dial dialFunc, log *slog.Logger) *protocol.Client {
	cfg := volume.BrickClientConfig(spec, b)
	cfg.ConnectWait, cfg.Dial, cfg.Logger = wait, dial, log.With("brick", b.Name())
	return protocol.New(cfg)
}

// dialFunc connects to a brick (protocol.Config.Dial).
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// swap makes r the daemon's healer (nil: none) and starts it, once the
// one it replaces has stopped; a full heal that was running starts again
// with r.
func (d *healDaemon) swap(r *healRun) {
	d.mu.Lock()
	old := d.cur
	d.cur = r
	d.mu.Unlock()
	if old != nil {
		old.stop()
	}
	if r == nil {
		return
	}
	r.wg.Go(func() { r.healer.Run(r.ctx) })
	d.mu.Lock()
	if d.full != nil && d.full.Running && d.crawl != r {
		d.startCrawl(r)
	}
	d.mu.Unlock()
	d.n.log.Info("heal daemon running", "volume", d.name, "config", r.key)
}

// stop stops the healer and closes its clients.
func (r *healRun) stop() {
	r.cancel()
	r.wg.Wait()
	for _, c := range r.clients {
		c.Close()
	}
}

// trigger makes the healer scan the heal indexes now.
func (d *healDaemon) trigger() error {
	r, err := d.running()
	if err != nil {
		return err
	}
	r.healer.Trigger()
	return nil
}

// running returns the running healer, or why there is none.
func (d *healDaemon) running() (*healRun, error) {
	if r := d.current(); r != nil {
		return r, nil
	}
	return nil, d.notRunning()
}

func (d *healDaemon) notRunning() error {
	return api.Errorf(api.ErrState, "the heal daemon of volume %s is not running on this node (see the node's log)", d.name)
}

// startFull starts a full heal in the background; during one, it asks
// for another crawl after it (what the first has crawled may have
// changed).
func (d *healDaemon) startFull() (api.FullHeal, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return api.FullHeal{}, d.notRunning()
	}
	if d.full != nil && d.full.Running {
		d.full.Again = true
	} else {
		d.full = &api.FullHeal{Running: true, Started: time.Now()}
		d.startCrawl(d.cur)
	}
	return *d.full, nil
}

// startCrawl runs a full heal with r. d.mu is held.
func (d *healDaemon) startCrawl(r *healRun) {
	d.crawl, d.lookedAt = r, r.healer.Looked()
	r.wg.Go(func() {
		d.waitLocalBricks(r)
		err := r.healer.Full(r.ctx)
		d.crawled(r, err)
	})
}

// waitLocalBricks waits, up to fullConnectWait, until r's clients of the
// bricks this node runs are connected.
func (d *healDaemon) waitLocalBricks(r *healRun) {
	deadline := time.Now().Add(fullConnectWait)
	for i := 0; i < len(r.clients) && time.Now().Before(deadline); {
		if r.clients[i].Connected() || !d.n.isRunning(d.vr, r.bricks[i].ID) {
			i++
			continue
		}
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// crawled records the end of a full heal run by r, and starts the crawl
// asked for meanwhile. A crawl whose healer was replaced was started
// again by swap.
func (d *healDaemon) crawled(r *healRun, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r != d.crawl || r != d.cur {
		return
	}
	f := d.full
	if f.Again {
		f.Again, f.Started, f.Error = false, time.Now(), ""
		d.startCrawl(r)
		return
	}
	f.Running, f.Finished = false, time.Now()
	f.Looked = r.healer.Looked() - d.lookedAt
	if err != nil {
		f.Error = err.Error()
		d.n.log.Warn("full heal finished with errors", "volume", d.name, "took", f.Finished.Sub(f.Started), "err", err)
		return
	}
	d.n.log.Info("full heal finished", "volume", d.name, "took", f.Finished.Sub(f.Started))
}
