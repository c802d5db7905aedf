package mgmt

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mortarfs/mortar/heal"
	"github.com/mortarfs/mortar/layer"
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
	cur   *healRun  // nil before the first build and after the stop
	full  *FullHeal // the last full heal; nil: none since the daemon started
	crawl *healRun  // the run the full heal crawls with
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
func (n *Node) startHeal(vr *volumeRun, v *VolumeState) {
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
func (n *Node) actingSets(ctx context.Context, v *VolumeState, answers func(context.Context, string) bool) []bool {
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
		spec.Option(OptHealInterval, ""), spec.Option(OptFavoriteChildPolicy, ""),
		spec.Option(OptPingTimeout, ""), spec.Option(OptSelfHealDaemon, ""), spec.Type, spec.Replica, spec.Disperse, spec.Redundancy)
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
		Interval: spec.DurationOption(OptHealInterval, 2*time.Second),
		Policy:   spec.Option(OptFavoriteChildPolicy, "none"),
		Manual:   spec.Option(OptSelfHealDaemon, "on") == "off",
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
			dh.Quiet = spec.DurationOption(OptDisperseQuiet, disperse.DefaultQuiet)
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
	return errorf(ErrState, "the heal daemon of volume %s is not running on this node (see the node's log)", d.name)
}

// startFull starts a full heal in the background; during one, it asks
// for another crawl after it (what the first has crawled may have
// changed).
func (d *healDaemon) startFull() (FullHeal, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return FullHeal{}, d.notRunning()
	}
	if d.full != nil && d.full.Running {
		d.full.Again = true
	} else {
		d.full = &FullHeal{Running: true, Started: time.Now()}
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

// info reads every brick's heal index, with this daemon's counts.
func (d *healDaemon) info(ctx context.Context) (HealInfo, error) {
	r, err := d.running()
	if err != nil {
		return HealInfo{}, err
	}
	hi, err := r.healer.Info(ctx)
	if err != nil {
		return HealInfo{}, err
	}
	out := d.countsOf(r, hi)
	for _, ri := range hi.Replicas {
		hb := HealBrick{Name: ri.Name, Set: ri.Set, Online: ri.Up, Entries: ri.Count, Error: ri.Error}
		for _, e := range ri.Entries {
			hb.Paths = append(hb.Paths, entryName(e.Path, e.Gfid.String()))
		}
		out.Bricks = append(out.Bricks, hb)
	}
	return out, nil
}

// counts is what this daemon did (HealInfo without the bricks), for the
// acting node's heal info.
func (d *healDaemon) counts(ctx context.Context) (HealInfo, error) {
	r, err := d.running()
	if err != nil {
		return HealInfo{}, err
	}
	return d.countsOf(r, r.healer.Stats(ctx)), nil
}

// countsOf turns hi, read from r's healer, into HealInfo's counts, with
// the last full heal.
func (d *healDaemon) countsOf(r *healRun, hi heal.Info) HealInfo {
	out := HealInfo{
		Name: d.name, Bricks: []HealBrick{}, Healed: hi.Healed, Failed: hi.Failed,
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

// addCounts adds another node's daemon's counts to h: sums, the earliest
// start, the latest scan, and the full heals merged (running if one
// runs).
func (h *HealInfo) addCounts(o HealInfo) {
	h.Healed += o.Healed
	h.Failed += o.Failed
	h.HealedBytes += o.HealedBytes
	h.InProgress += o.InProgress
	h.SplitBrain = max(h.SplitBrain, o.SplitBrain)
	if !o.Since.IsZero() && (h.Since.IsZero() || o.Since.Before(h.Since)) {
		h.Since = o.Since
	}
	if o.LastScan.After(h.LastScan) {
		h.LastScan = o.LastScan
	}
	if o.Full == nil {
		return
	}
	if h.Full == nil {
		f := *o.Full
		h.Full = &f
		return
	}
	h.Full.merge(*o.Full)
}

// merge adds another node's part of a full heal to f.
func (f *FullHeal) merge(o FullHeal) {
	f.Running, f.Again = f.Running || o.Running, f.Again || o.Again
	f.Looked += o.Looked
	if o.Started.Before(f.Started) {
		f.Started = o.Started
	}
	if o.Finished.After(f.Finished) {
		f.Finished = o.Finished
	}
	if f.Running {
		f.Finished = time.Time{}
	}
	if o.Error != "" {
		f.Error = strings.TrimPrefix(f.Error+"; "+o.Error, "; ")
	}
}

// SafeToTakeDown reports whether a brick of the volume may be taken down
// now (the next brick of a rolling restart): every brick is online and
// connected to the heal daemon, no brick records anything to heal, no heal
// is under way, nothing is in split-brain and no full heal runs. If not,
// it says what is missing. Clients' own connections are not seen here:
// a client in use reconnects within 100 ms of a brick's return (its
// writes would otherwise be recorded as entries to heal), an idle one
// within its backoff of at most 2 s.
func (h HealInfo) SafeToTakeDown() (bool, string) {
	var why []string
	for _, b := range h.Bricks {
		switch {
		case !b.Online:
			why = append(why, "brick "+b.Name+" is not connected")
		case b.Error != "":
			why = append(why, fmt.Sprintf("brick %s cannot be asked: %s", b.Name, b.Error))
		case b.Entries > 0:
			why = append(why, fmt.Sprintf("brick %s has %d %s to heal", b.Name, b.Entries, plural(b.Entries, "entry", "entries")))
		}
	}
	if h.InProgress > 0 {
		why = append(why, fmt.Sprintf("%d %s being healed", h.InProgress, plural(h.InProgress, "entry is", "entries are")))
	}
	if h.SplitBrain > 0 {
		why = append(why, fmt.Sprintf("%d %s in split-brain", h.SplitBrain, plural(h.SplitBrain, "file is", "files are")))
	}
	if h.Full != nil && h.Full.Running {
		why = append(why, "a full heal is running")
	}
	if len(h.Bricks) == 0 {
		why = append(why, "no brick")
	}
	return len(why) == 0, strings.Join(why, "; ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
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
func (d *healDaemon) splitBrain(ctx context.Context) (SplitBrainInfo, error) {
	r, err := d.running()
	if err != nil {
		return SplitBrainInfo{}, err
	}
	entries, err := r.healer.SplitBrain(ctx)
	if err != nil {
		return SplitBrainInfo{}, err
	}
	out := SplitBrainInfo{Name: d.name, Bricks: []HealBrick{}, Entries: []SplitBrainEntry{}}
	at := map[string]int{} // brick name → index in out.Bricks
	for si, s := range r.sets {
		for _, rep := range s {
			at[rep.Name] = len(out.Bricks)
			out.Bricks = append(out.Bricks, HealBrick{Name: rep.Name, Set: si, Online: rep.Up()})
		}
	}
	for _, e := range entries {
		se := SplitBrainEntry{Set: e.Set, Path: e.Path, Gfid: e.Gfid.String()}
		for _, c := range e.Copies {
			sc := SplitBrainCopy{Brick: c.Replica, Error: c.Error, Blames: c.Pending}
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
func (n *Node) healDaemonOf(name string) (*healDaemon, *VolumeState, error) {
	v, err := n.store.State().volume(name)
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
func healable(v *VolumeState) bool {
	return v.Type == volume.Replicate || v.Type == volume.Disperse
}

// checkHealableStarted refuses a volume that is neither replicated nor
// dispersed (saying why: what) or not started.
func checkHealableStarted(v *VolumeState, why string) error {
	if !healable(v) {
		return errorf(ErrInvalid, "volume %s is neither replicated nor dispersed: %s", v.Name, why)
	}
	if v.Status != StatusStarted {
		return errorf(ErrState, "volume %s is not started (mortar volume start %s)", v.Name, v.Name)
	}
	return nil
}

// heal triggers an index heal of volume name, or starts a full heal, on
// this node and on the other nodes serving its bricks (each heals the
// sets it acts for).
func (n *Node) heal(ctx context.Context, name string, full bool) (FullHeal, error) {
	d, v, err := n.healDaemonOf(name)
	if err != nil {
		return FullHeal{}, err
	}
	n.otherHealNodes(ctx, v, func(ctx context.Context, id string) {
		err := n.call(ctx, id, http.MethodPost, localHealPath(v.ID), HealRequest{Full: full}, nil)
		if err != nil {
			n.log.Warn("heal request not passed on", "volume", name, "node", id, "err", err)
		}
	})
	return d.localHeal(full)
}

// localHeal triggers an index heal, or starts a full heal, of the sets
// this node's daemon acts for.
func (d *healDaemon) localHeal(full bool) (FullHeal, error) {
	if full {
		return d.startFull()
	}
	return FullHeal{}, d.trigger()
}

// otherHealNodes runs fn for each other node serving a brick of v, at
// once, each within peerPingTimeout, and waits.
func (n *Node) otherHealNodes(ctx context.Context, v *VolumeState, fn func(ctx context.Context, id string)) {
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
func (n *Node) healInfo(ctx context.Context, name string) (HealInfo, error) {
	d, v, err := n.healDaemonOf(name)
	if err != nil {
		return HealInfo{}, err
	}
	hi, err := d.info(ctx)
	if err != nil {
		return HealInfo{}, err
	}
	var mu sync.Mutex
	n.otherHealNodes(ctx, v, func(ctx context.Context, id string) {
		var o HealInfo
		if err := n.call(ctx, id, http.MethodGet, localHealPath(v.ID), nil, &o); err != nil {
			return // a node that does not answer heals nothing
		}
		mu.Lock()
		hi.addCounts(o)
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
	return nil, errorf(ErrState, "no heal daemon of volume %s runs on this node", id)
}

// splitBrainInfo lists the split-brains of volume name.
func (n *Node) splitBrainInfo(ctx context.Context, name string) (SplitBrainInfo, error) {
	d, _, err := n.healDaemonOf(name)
	if err != nil {
		return SplitBrainInfo{}, err
	}
	return d.splitBrain(ctx)
}

// resolveSplitBrain resolves the split-brains req names and returns their
// paths. It refuses a request that names no split-brain.
func (n *Node) resolveSplitBrain(ctx context.Context, name string, req SplitBrainRequest) ([]string, error) {
	d, v, err := n.healDaemonOf(name)
	if err != nil {
		return nil, err
	}
	if v.Type != volume.Replicate {
		return nil, errorf(ErrInvalid, "volume %s is dispersed: split-brain resolution applies to replicated volumes only (a disperse set's files are fragments, so no one brick holds a copy that could win)", name)
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
		return nil, errorf(ErrInvalid, "%s is not in split-brain in %s (see mortar volume heal %s info split-brain)", req.Path, where, name)
	case len(paths) == 0:
		return nil, errorf(ErrInvalid, "nothing is in split-brain in %s", where)
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
func (n *Node) checkResolve(ctx context.Context, v *VolumeState, req *SplitBrainRequest) (int, error) {
	set := -1
	switch req.Policy {
	case PolicyLatestMtime, PolicyBiggerFile:
		if req.Path == "" {
			return set, errorf(ErrInvalid, "split-brain %s needs the PATH of the file, from the volume's root (such as /dir/file)", req.Policy)
		}
		if req.Source != "" {
			return set, errorf(ErrInvalid, "split-brain %s takes no source brick (use source-brick to name the brick whose copy wins)", req.Policy)
		}
	case PolicySourceBrick:
		if req.Source == "" {
			return set, errorf(ErrInvalid, "split-brain source-brick needs the brick whose copies win, as HOST:/PATH")
		}
		b, i, err := n.findBrick(ctx, n.store.State(), v, req.Source)
		if err != nil {
			return set, err
		}
		if b.Arbiter {
			return set, errorf(ErrInvalid, "brick %s is an arbiter: it holds no file data, so its copies cannot win", b.Name())
		}
		req.Source, set = b.Name(), i/v.Replica
	default:
		return set, errorf(ErrInvalid, "unknown split-brain policy %q: use %s, %s or %s", req.Policy, PolicyLatestMtime, PolicyBiggerFile, PolicySourceBrick)
	}
	if req.Path != "" {
		if strings.HasPrefix(req.Path, "/") {
			req.Path = path.Clean(req.Path)
		}
		if err := layer.CheckPath(req.Path); err != nil {
			return set, errorf(ErrInvalid, "path %q: %v (want a path from the volume's root, such as /dir/file)", req.Path, err)
		}
	}
	return set, nil
}
