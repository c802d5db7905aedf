// Package healdaemon is mortar's self-heal daemon (GlusterFS's glustershd)
// as one node of a cluster runs it for one volume: a heal.Healer over
// protocol clients to every brick of the volume, rebuilt when the
// volume's bricks or heal options change, acting only for the sets this
// node is the first to answer for, with full heals, heal info and
// split-brain lists. The node (package mgmt) starts one per started
// replicated or dispersed volume it serves a brick of, and tells it
// about the cluster through Node.
package healdaemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mortarfs/mortar/heal"
	"github.com/mortarfs/mortar/layer/disperse"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/layer/replicate"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume"
	"github.com/mortarfs/mortar/volume/options"
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
// the volume's acting node (mgmt's actingHealNode), which passes a heal or a
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

// Daemon is the heal daemon of one volume on this node.
type Daemon struct {
	node     Node
	dial     volume.Dial
	log      *slog.Logger
	name, id string // the volume's
	kick     chan struct{}

	// acting says, per replica or disperse set (spec.Sets() order),
	// whether this node's daemon heals it (see actingSets); the others'
	// stand by for it.
	acting atomic.Pointer[[]bool]
	// misses counts, per node, the checks in a row it did not answer
	// (answersSteady); Run's goroutine only.
	misses map[string]int

	mu    sync.Mutex
	cur   *Healer       // nil before the first build and after the stop
	full  *api.FullHeal // the last full heal; nil: none since the daemon started
	crawl *Healer       // the run the full heal crawls with
	// lookedAt is the crawl's healer's count of inodes looked at when the
	// crawl began (FullHeal.Looked counts from it).
	lookedAt uint64
}

// Healer is a heal.Healer built from one configuration of the volume, with
// its brick clients.
type Healer struct {
	key     string // the configuration (see healKey)
	healer  *heal.Healer
	sets    []heal.Set
	bricks  []volume.Brick // parallel to clients
	clients []*protocol.Client
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Node is what a daemon asks of the node it runs in.
type Node interface {
	// ID is the node's id.
	ID() string
	// State is the cluster state now.
	State() *state.State
	// LatestState is State, or after a restart without a quorum the
	// state the node last applied (its bricks run from it).
	LatestState() *state.State
	// Answers reports whether node id answers now.
	Answers(ctx context.Context, id string) bool
	// Runs reports whether the node runs the volume's brick id now.
	Runs(brickID string) bool
}

// New returns the heal daemon of volume v on node, connecting to bricks
// with dial (nil: plain TCP). Start it, then run Run.
func New(node Node, v *state.Volume, dial volume.Dial, log *slog.Logger) *Daemon {
	return &Daemon{node: node, dial: dial, log: log, name: v.Name, id: v.ID, kick: make(chan struct{}, 1), misses: map[string]int{}}
}

// Start has the daemon act for the sets whose first brick its node
// serves (Run asks the other nodes) and builds its healer, so that
// requests find one as soon as the volume runs.
func (d *Daemon) Start(ctx context.Context, v *state.Volume) {
	mine := actingSets(ctx, d.node.ID(), v, d.node.State().Spec(v), func(context.Context, string) bool { return true })
	d.acting.Store(&mine)
	d.reload(ctx)
}

// Current is the healer the daemon runs now, or nil.
func (d *Daemon) Current() *Healer { return d.current() }

// Key is the configuration r was built from (see healKey).
func (r *Healer) Key() string { return r.key }

// Sets counts r's replica or disperse sets.
func (r *Healer) Sets() int { return len(r.sets) }

// SetSize counts the bricks of r's set i.
func (r *Healer) SetSize(i int) int { return len(r.sets[i]) }

// Stopped reports whether r was stopped (replaced, or the volume stopped).
func (r *Healer) Stopped() bool { return r.ctx.Err() != nil }

// Run keeps the healer in line with the volume's configuration until ctx
// is done (the volume stops here), then stops it.
func (d *Daemon) Run(ctx context.Context) {
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
func (d *Daemon) scanAfterReturn(r *Healer) {
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
// now, and the healer scan once each is connected: Poke follows `volume
// start force`, which restarted bricks, whose heal would otherwise wait
// for the clients' backoff (up to 2 s) and then the next scan (up to
// cluster.heal-interval).
func (d *Daemon) redial() {
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
func (d *Daemon) checkActing(ctx context.Context) {
	v := d.node.State().Volumes[d.name]
	if v == nil || v.ID != d.id {
		return
	}
	now := actingSets(ctx, d.node.ID(), v, d.node.State().Spec(v), d.answersSteady)
	old := d.acting.Swap(&now)
	was, is := setsActing(old), setsActing(&now)
	if slices.Equal(was, is) {
		return
	}
	if len(is) == 0 {
		d.log.Info("heal daemon standing by: a node before this one in brick order answers", "volume", d.name)
		return
	}
	d.log.Info("heal daemon acting", "volume", d.name, "sets", is)
	if r := d.current(); r != nil {
		r.healer.Trigger()
	}
}

// answersSteady is answers, with a node taken for gone only once it
// missed two checks in a row: one slow answer under load does not move
// its sets' heal to another node and back.
func (d *Daemon) answersSteady(ctx context.Context, id string) bool {
	if d.node.Answers(ctx, id) {
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
func (d *Daemon) actsFor(si int) bool {
	a := d.acting.Load()
	return a != nil && si < len(*a) && (*a)[si]
}

// actingSets says, for each set of v (whose spec is spec), whether node
// self heals it: the first node, in the set's brick order, that answers
// (asked with answers, each node once) is self.
func actingSets(ctx context.Context, self string, v *state.Volume, spec volume.Spec, answers func(context.Context, string) bool) []bool {
	nodeOf := map[string]string{}
	for _, b := range v.Bricks {
		nodeOf[b.ID] = b.Node
	}
	asked := map[string]bool{self: true}
	up := func(id string) bool {
		ok, seen := asked[id]
		if !seen {
			ok = answers(ctx, id)
			asked[id] = ok
		}
		return ok
	}
	sets := spec.Sets()
	out := make([]bool, len(sets))
	for si, set := range sets {
		if !slices.ContainsFunc(set, func(b volume.Brick) bool { return nodeOf[b.ID] == self }) {
			continue // not ours to heal: its nodes are not asked
		}
		for _, b := range set {
			if node := nodeOf[b.ID]; up(node) {
				out[si] = node == self
				break
			}
		}
	}
	return out
}

// Poke makes Run look at the configuration now.
func (d *Daemon) Poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// current returns the running healer, or nil.
func (d *Daemon) current() *Healer {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur
}

// reload replaces the healer if the volume's configuration changed.
func (d *Daemon) reload(ctx context.Context) {
	st := d.node.State()
	if v := st.Volumes[d.name]; v == nil || v.ID != d.id {
		st = d.node.LatestState() // just restarted: the bricks run from the state last applied
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
		d.log.Error("heal daemon cannot start", "volume", d.name, "err", err)
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
func (d *Daemon) newRun(ctx context.Context, spec volume.Spec, key string) (*Healer, error) {
	r := &Healer{key: key}
	r.ctx, r.cancel = context.WithCancel(ctx)
	log := d.log.With("volume", spec.Name, "component", "heal")
	for _, set := range spec.Sets() {
		var hs heal.Set
		for _, b := range set {
			c := BrickClient(spec, b, healClientWait, d.dial, log)
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

// BrickClient connects a protocol client to brick b of spec.
// dial is nil for plain TCP, the TLS dialer of the node's identity
// otherwise.
func BrickClient(spec volume.Spec, b volume.Brick, wait time.Duration, dial volume.Dial, log *slog.Logger) *protocol.Client {
	cfg := volume.BrickClientConfig(spec, b)
	cfg.ConnectWait, cfg.Dial, cfg.Logger = wait, dial, log.With("brick", b.Name())
	return protocol.New(cfg)
}

// swap makes r the daemon's healer (nil: none) and starts it, once the
// one it replaces has stopped; a full heal that was running starts again
// with r.
func (d *Daemon) swap(r *Healer) {
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
	d.log.Info("heal daemon running", "volume", d.name, "config", r.key)
}

// stop stops the healer and closes its clients.
func (r *Healer) stop() {
	r.cancel()
	r.wg.Wait()
	for _, c := range r.clients {
		c.Close()
	}
}

// trigger makes the healer scan the heal indexes now.
func (d *Daemon) trigger() error {
	r, err := d.running()
	if err != nil {
		return err
	}
	r.healer.Trigger()
	return nil
}

// running returns the running healer, or why there is none.
func (d *Daemon) running() (*Healer, error) {
	if r := d.current(); r != nil {
		return r, nil
	}
	return nil, d.notRunning()
}

func (d *Daemon) notRunning() error { return NotRunning(d.name) }

// NotRunning is the error of a request to the heal daemon of volume name
// where none runs.
func NotRunning(name string) error {
	return api.Errorf(api.ErrState, "the heal daemon of volume %s is not running on this node (see the node's log)", name)
}

// startFull starts a full heal in the background; during one, it asks
// for another crawl after it (what the first has crawled may have
// changed).
func (d *Daemon) startFull() (api.FullHeal, error) {
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
func (d *Daemon) startCrawl(r *Healer) {
	d.crawl, d.lookedAt = r, r.healer.Looked()
	r.wg.Go(func() {
		d.waitLocalBricks(r)
		err := r.healer.Full(r.ctx)
		d.crawled(r, err)
	})
}

// waitLocalBricks waits, up to fullConnectWait, until r's clients of the
// bricks this node runs are connected.
func (d *Daemon) waitLocalBricks(r *Healer) {
	deadline := time.Now().Add(fullConnectWait)
	for i := 0; i < len(r.clients) && time.Now().Before(deadline); {
		if r.clients[i].Connected() || !d.node.Runs(r.bricks[i].ID) {
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
func (d *Daemon) crawled(r *Healer, err error) {
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
		d.log.Warn("full heal finished with errors", "volume", d.name, "took", f.Finished.Sub(f.Started), "err", err)
		return
	}
	d.log.Info("full heal finished", "volume", d.name, "took", f.Finished.Sub(f.Started))
}
