package mgmt

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
)

// Which clients run which spec. A client that follows its volume's spec
// names itself on its watches (?client=ID, a random id per follower, and
// runs=N, the version of the graph it runs: a spec it failed to build is
// not run). Before files move under a new layout the leader waits
// (takeUp) until every client that watched lately through any node runs
// it, rather than a fixed grace: a client still on the old layout would
// create files where that layout put them, behind the walk, and they
// would not be found once the previous layout is dropped. The leader
// also waits until the nodes have given their bricks the volume's layout
// fence (state.Volume.Fence, wire.ChallengeSize), so that a client left
// behind is refused new names before any file moves, rather than making
// them where the old layout put them (a node says so once it has written
// the fence where its bricks read it and asked them to read it again).
// The wait is bounded by clientTakeUpMax, after which the clients and
// nodes still behind are logged and not waited for (a mount whose node
// is down: docs/CLUSTER.md, limits); clients that watch without an id (older ones), and nodes that
// do not answer (down, or older), get the old grace, clientCatchUp. Any
// client allowed to read the spec can so hold a rebalance back, for
// clientTakeUpMax at most; a node keeps at most maxWatchers per volume.
//
//	GET /v1/local/volumes/{name}/lagging?version=V&fence=F → Lagging (this node's watchers; its bricks below fence F)

// clientTakeUpMax bounds the leader's wait for clients to take a new
// layout.
const clientTakeUpMax = 15 * time.Second

// watcherLive is how long a client that watched is taken to be there: it
// watches again at least every DefaultSpecWait.
const watcherLive = api.DefaultSpecWait + api.WatchSlack

// maxWatchers bounds the clients a node keeps of one volume.
const maxWatchers = 4096

// takeUpPoll is how often the leader asks the nodes, and lagAsk bounds
// one question to a node.
const (
	takeUpPoll = 50 * time.Millisecond
	lagAsk     = 2 * time.Second
)

// Lagging is what a node knows of the clients of a volume that run a
// spec older than a version.
type Lagging struct {
	Clients   []string `json:"clients,omitempty"`   // ids of clients that run an older spec
	Anonymous bool     `json:"anonymous,omitempty"` // clients without an id watched lately
	// Fenced: the fence asked about was given to every brick of the
	// volume this node serves (true if it serves none). A node older
	// than fences never says so.
	Fenced bool `json:"fenced,omitempty"`
	// Unfenced, gathered by the leader (laggingEverywhere), lists the
	// nodes serving bricks of the volume that did not say Fenced.
	Unfenced []string `json:"-"`
}

// watcher is what a node knows of one client of a volume.
type watcher struct {
	runs uint64    // the spec version it runs (its latest watch's after)
	seen time.Time // its latest watch began or was answered
}

// watchers are the clients that watch specs through this node.
type watchers struct {
	mu    sync.Mutex
	byVol map[string]map[string]*watcher // volume name → client id ("" anonymous)
}

// arrived notes a watch of volume vol by client id, which runs version
// runs.
func (w *watchers) arrived(vol, id string, runs uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byVol == nil {
		w.byVol = map[string]map[string]*watcher{}
	}
	if w.byVol[vol] == nil {
		w.byVol[vol] = map[string]*watcher{}
	}
	m := w.byVol[vol]
	c := m[id]
	if c == nil {
		if len(m) >= maxWatchers {
			w.prune(vol)
		}
		if len(m) >= maxWatchers {
			return
		}
		c = &watcher{}
		m[id] = c
	}
	c.runs, c.seen = runs, time.Now()
}

// prune forgets the clients of vol not seen lately (w.mu held).
func (w *watchers) prune(vol string) {
	for id, c := range w.byVol[vol] {
		if time.Since(c.seen) > watcherLive {
			delete(w.byVol[vol], id)
		}
	}
}

// answered notes the end of a watch of volume vol by client id: it is
// seen until it comes back.
func (w *watchers) answered(vol, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.byVol[vol][id]; c != nil {
		c.seen = time.Now()
	}
}

// left forgets client id of volume vol, whose watch was cut.
func (w *watchers) left(vol, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byVol[vol], id)
}

// lagging returns the clients of vol seen lately that run a spec older
// than version, and forgets those not seen lately. Clients without an id
// are kept under "~" and their connection's address.
func (w *watchers) lagging(vol string, version uint64) Lagging {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.prune(vol)
	var out Lagging
	for id, c := range w.byVol[vol] {
		switch {
		case strings.HasPrefix(id, "~"):
			out.Anonymous = true
		case c.runs < version:
			out.Clients = append(out.Clients, id)
		}
	}
	slices.Sort(out.Clients)
	return out
}

func (n *Node) takeUpHandlers(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/local/volumes/{name}/lagging", handle(n, func(r *http.Request, _ struct{}) (any, error) {
		q := r.URL.Query()
		v, err := strconv.ParseUint(q.Get("version"), 10, 64)
		if err != nil {
			return nil, api.Errorf(api.ErrInvalid, "lagging: version=%q is not a version", q.Get("version"))
		}
		var fence uint64
		if f := q.Get("fence"); f != "" {
			if fence, err = strconv.ParseUint(f, 10, 64); err != nil {
				return nil, api.Errorf(api.ErrInvalid, "lagging: fence=%q is not a version", f)
			}
		}
		return n.lagging(r.PathValue("name"), v, fence), nil
	}))
}

// lagging is what this node knows of volume name's clients older than
// version, and whether its bricks of it were not given fence yet.
func (n *Node) lagging(name string, version, fence uint64) Lagging {
	l := n.watchers.lagging(name, version)
	l.Fenced = fence != 0 && !n.unfenced(name, fence)
	return l
}

// unfenced reports whether one of this node's bricks of volume name was
// not given layout fence f or a later one.
func (n *Node) unfenced(name string, f uint64) bool {
	v := n.store.State().Volumes[name]
	if f == 0 || v == nil {
		return false
	}
	for _, b := range v.Bricks {
		if b.Node != n.id {
			continue
		}
		data, err := os.ReadFile(n.fenceFile(b.ID))
		if err != nil {
			return true
		}
		if got, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64); err != nil || got < f {
			return true
		}
	}
	return false
}

// takeUp waits until the clients of volume name run spec version or a
// later one (leader), at most clientTakeUpMax, and at least clientCatchUp
// while clients without an id watch or a node does not answer: see above.
// It ends early when still (false) says the task is no longer running.
func (n *Node) takeUp(ctx context.Context, name string, version uint64, still func() bool) error {
	start := time.Now()
	return n.awaitNodes(ctx, still, func(ctx context.Context, last bool) bool {
		l := n.laggingEverywhere(ctx, name, version, 0)
		if last {
			n.log.Warn("clients have not taken the new layout; moving files anyway", "volume", name, "version", version, "clients", l.Clients)
		}
		return len(l.Clients) == 0 && (!l.Anonymous || time.Since(start) >= clientCatchUp)
	})
}

// fenceUp raises volume name's layout fence to spec version (leader) and
// waits until the nodes have given it to their bricks, at most
// clientTakeUpMax: see above.
func (n *Node) fenceUp(ctx context.Context, name string, version uint64, still func() bool) error {
	if err := n.store.Apply(state.Command{Op: state.OpSetFence, Name: name, Volume: &state.Volume{Fence: version}}); err != nil {
		return err
	}
	return n.awaitNodes(ctx, still, func(ctx context.Context, last bool) bool {
		l := n.laggingEverywhere(ctx, name, version, version)
		if last {
			n.log.Warn("nodes have not fenced the old layout off; moving files anyway", "volume", name, "version", version, "nodes", l.Unfenced)
		}
		return len(l.Unfenced) == 0
	})
}

// awaitNodes asks done every takeUpPoll until it says yes, for
// clientTakeUpMax at most (done's last call is told so, and the wait
// ends without error); it ends early when still (false) says the task is
// no longer running, or ctx is done.
func (n *Node) awaitNodes(ctx context.Context, still func() bool, done func(ctx context.Context, last bool) bool) error {
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, start.Add(clientTakeUpMax))
	defer cancel()
	t := time.NewTicker(takeUpPoll)
	defer t.Stop()
	for !done(ctx, false) {
		select {
		case <-ctx.Done():
			if time.Since(start) < clientTakeUpMax {
				return ctx.Err() // the caller's
			}
			done(context.WithoutCancel(ctx), true)
			return nil
		case <-t.C:
		}
		if !still() {
			return errTaskGone
		}
	}
	return nil
}

// errTaskGone: the task takeUp waited for is no longer running.
var errTaskGone = errors.New("the task is no longer running")

// laggingEverywhere gathers every node's lagging clients of volume name,
// asking them at once; a node that does not answer counts as one with
// clients without an id. With fence set, the nodes serving bricks of the
// volume that do not say their bricks have it (not answering, or older)
// are Unfenced.
func (n *Node) laggingEverywhere(ctx context.Context, name string, version, fence uint64) Lagging {
	var out Lagging
	var mu sync.Mutex
	var wg sync.WaitGroup
	path := "/v1/local/volumes/" + url.PathEscape(name) + "/lagging?version=" + strconv.FormatUint(version, 10) +
		"&fence=" + strconv.FormatUint(fence, 10)
	st := n.store.State()
	for id := range st.Nodes {
		wg.Go(func() {
			l, err := n.laggingOn(ctx, id, name, path, version, fence)
			if err != nil {
				n.log.Debug("a node's spec watchers are unknown", "node", id, "err", err)
				l = Lagging{Anonymous: true}
			}
			mu.Lock()
			defer mu.Unlock()
			out.Clients = append(out.Clients, l.Clients...)
			out.Anonymous = out.Anonymous || l.Anonymous
			if fence != 0 && !l.Fenced && servesBricksOf(st, id, name) {
				out.Unfenced = append(out.Unfenced, id)
			}
		})
	}
	wg.Wait()
	return out
}

// servesBricksOf reports whether node id serves bricks of volume name.
func servesBricksOf(st *state.State, id, name string) bool {
	v := st.Volumes[name]
	return v != nil && slices.ContainsFunc(v.Bricks, func(b state.Brick) bool { return b.Node == id })
}

// laggingOn asks node id for its lagging clients.
func (n *Node) laggingOn(ctx context.Context, id, name, path string, version, fence uint64) (Lagging, error) {
	if id == n.id {
		return n.lagging(name, version, fence), nil
	}
	ctx, cancel := context.WithTimeout(ctx, lagAsk)
	defer cancel()
	var l Lagging
	err := n.call(ctx, id, http.MethodGet, path, nil, &l)
	return l, err
}
