package mgmt

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume"
)

// serveSpec answers GET /v1/volumes/{name}/spec[?after=N[&wait=D]], the
// long poll api.DefaultSpecWait describes.
func (n *Node) serveSpec(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	q := r.URL.Query()
	if !q.Has("after") {
		spec, err := n.spec(name)
		n.reply(w, r, http.StatusOK, spec, err)
		return
	}
	after, err := strconv.ParseUint(q.Get("after"), 10, 64)
	if err != nil {
		n.reply(w, r, 0, nil, api.Errorf(api.ErrInvalid, "spec watch: after=%q is not a version", q.Get("after")))
		return
	}
	wait := api.DefaultSpecWait
	if s := q.Get("wait"); s != "" {
		if wait, err = parseWait(s); err != nil {
			n.reply(w, r, 0, nil, err)
			return
		}
	}
	client, runs := watcherOf(r, after)
	if _, known := n.store.State().Volumes[name]; known {
		n.watchers.arrived(name, client, runs)
	}
	spec, err := n.waitSpec(r.Context(), name, after, wait)
	if r.Context().Err() != nil {
		n.watchers.left(name, client) // gone (unmounted, or died) while it waited
	} else {
		n.watchers.answered(name, client)
	}
	n.reply(w, r, http.StatusOK, spec, err)
}

// watcherOf returns who watches with r and the spec version it runs
// (takeup.go): its id (or "~" and its connection's address) and runs (or
// after).
func watcherOf(r *http.Request, after uint64) (string, uint64) {
	q := r.URL.Query()
	id := q.Get("client")
	if id == "" || strings.HasPrefix(id, "~") {
		id = "~" + r.RemoteAddr
	}
	runs, err := strconv.ParseUint(q.Get("runs"), 10, 64)
	if err != nil {
		runs = after
	}
	return id, runs
}

// parseWait parses a watch's wait: a Go duration ("10s") or seconds.
func parseWait(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != f { // f != f: NaN
			return 0, api.Errorf(api.ErrInvalid, "spec watch: wait=%q is not a duration", s)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return 0, api.Errorf(api.ErrInvalid, "spec watch: negative wait %q", s)
	}
	return min(d, api.MaxSpecWait), nil
}

// waitSpec returns volume name's spec once its version is above after, or
// the current spec when wait passes, the request is cancelled or the node
// shuts down.
func (n *Node) waitSpec(ctx context.Context, name string, after uint64, wait time.Duration) (volume.Spec, error) {
	sn := n.specNotifier()
	sn.waiting.Add(1)
	defer sn.waiting.Add(-1)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		changed := sn.changed() // before reading: no change is missed
		spec, err := n.spec(name)
		if err != nil || spec.Version > after {
			return spec, err
		}
		select {
		case <-changed:
		case <-deadline.C:
			return n.spec(name)
		case <-ctx.Done():
			return spec, nil // nobody reads the answer
		case <-sn.done:
			return spec, nil // shutting down: the client asks another node or again
		}
	}
}

// specNotifier wakes the spec watches of a node when its state changes.
type specNotifier struct {
	mu   sync.Mutex
	ch   chan struct{} // closed (and replaced) by notify
	done chan struct{} // closed when the node shuts down
	once sync.Once
	// waiting counts the watches waiting now.
	waiting atomic.Int32
}

func newSpecNotifier() *specNotifier {
	return &specNotifier{ch: make(chan struct{}), done: make(chan struct{})}
}

// changed returns a channel closed at the next notify.
func (s *specNotifier) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// notify wakes every watch, which rereads the state.
func (s *specNotifier) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}

// close ends every watch, for a node shutting down.
func (s *specNotifier) close() { s.once.Do(func() { close(s.done) }) }

// specNotifier returns n's notifier.
func (n *Node) specNotifier() *specNotifier { return n.specs }

// notifySpecs wakes n's spec watches to reread the state; the node calls
// it after every change of the state.
func (n *Node) notifySpecs() { n.specs.notify() }
