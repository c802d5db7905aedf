package mgmt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/raftstore"
	"github.com/mortarfs/mortar/mgmt/state"
)

// Requests between nodes. A node answers every read (volume info, status,
// spec, peer status) from its own copy of the state; a change goes to the
// Raft leader, which runs it (its checks, the command, and the work on
// other nodes' disks and bricks through their /v1/local endpoints); heal
// requests go to the volume's acting heal node (the first node, in brick
// order, that answers: see actingHealNode); reset-brick goes to the node
// of the brick.
// A request carries api.ViaHeader once forwarded, so it is never forwarded
// twice.
//
//	POST   /v1/cluster/apply                 Command → {} (leader: commit it)
//	POST   /v1/cluster/join                  JoinRequest → NodeInfo (this node joins the caller's cluster)
//	POST   /v1/cluster/leave                 {} (this node was detached: become a one-node cluster)
//	POST   /v1/local/volumes/{id}/start      LocalStartRequest → {}
//	POST   /v1/local/volumes/{id}/stop       {}
//	POST   /v1/local/volumes/{id}/status     state.Volume → []api.BrickStatus (this node's bricks)
//	POST   /v1/local/bricks/mark             MarkRequest → {}
//	POST   /v1/local/bricks/unmark           MarkRequest → {}
//	POST   /v1/local/volumes/{id}/heal       HealRequest → FullHeal (this node's heal daemon: the sets it acts for)
//	GET    /v1/local/volumes/{id}/heal       HealInfo (this node's daemon's counts, no bricks)
//	GET    /v1/local/volumes/{name}/lagging  ?version=V&fence=F → Lagging (this node's spec watchers on an older spec; its bricks below fence F)

// nodeCallTimeout bounds one request to another node.
const nodeCallTimeout = 30 * time.Second

// LocalStartRequest asks a node to start its bricks of Volume.
type LocalStartRequest struct {
	Volume state.Volume `json:"volume"`
	// AllOrNothing: a brick that fails stops the node's other bricks of
	// the volume (a volume being started).
	AllOrNothing bool `json:"all_or_nothing,omitempty"`
	// Index is the index of the leader's state that Volume is from: the
	// node's reconciler leaves the run alone until its own state is that
	// new (0: unknown, from a leader before it).
	Index uint64 `json:"index,omitempty"`
}

// MarkRequest asks a node to mark (or unmark) a brick directory as a
// brick of volume VolumeID.
type MarkRequest struct {
	Path     string `json:"path"`
	VolumeID string `json:"volume_id,omitempty"`
	Force    bool   `json:"force,omitempty"`
}

// route sends each request where it must run (see above).
func (n *Node) route(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := n.authorize(r); err != nil {
			n.reply(w, r, 0, nil, err) // logged there, with the path
			return
		}
		p := r.URL.Path
		if r.Header.Get(api.ViaHeader) != "" || strings.HasPrefix(p, "/v1/cluster/") || strings.HasPrefix(p, "/v1/local/") {
			h.ServeHTTP(&indexWriter{ResponseWriter: w, n: n}, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
		if err != nil {
			n.reply(w, r, 0, nil, api.Errorf(api.ErrInvalid, "bad request body: %v", err))
			return
		}
		deadline := time.Now().Add(raftstore.LeaderWait + time.Second)
		for {
			r.Body = io.NopCloser(bytes.NewReader(body))
			target, err := n.routeTarget(r)
			if err != nil {
				n.reply(w, r, 0, nil, err)
				return
			}
			if target == "" || target == n.id {
				r.Body = io.NopCloser(bytes.NewReader(body))
				h.ServeHTTP(w, r)
				return
			}
			err = n.proxy(w, r, target, body)
			if err == nil {
				return
			}
			// The node is unreachable. If it was the leader, the others
			// elect a new one within about a second: route again (this
			// node may already know there is no leader, or a new one).
			if time.Now().After(deadline) || r.Method == http.MethodGet || !n.routesToLeader(r) {
				n.reply(w, r, 0, nil, err)
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// volumeSub splits a /v1/volumes/NAME/SUB... path into NAME and SUB.
func volumeSub(r *http.Request) (name, sub string, ok bool) {
	rest, found := strings.CutPrefix(r.URL.Path, "/v1/volumes/")
	parts := strings.Split(rest, "/")
	if !found || len(parts) < 2 {
		return "", "", false
	}
	name, _ = url.PathUnescape(parts[0])
	return name, parts[1], true
}

// routesToLeader reports whether r is answered by the Raft leader (not by
// a volume's heal node or a brick's node, nor here).
func (n *Node) routesToLeader(r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return false
	}
	_, sub, ok := volumeSub(r)
	return !ok || sub != "heal" && sub != "reset-brick"
}

// routeTarget returns the node that must answer r ("" or n.id: this one).
func (n *Node) routeTarget(r *http.Request) (string, error) {
	if name, sub, ok := volumeSub(r); ok {
		switch sub {
		case "heal":
			v, ok := n.store.State().Volumes[name]
			if !ok || len(v.Bricks) == 0 {
				return "", nil // answered here: not found
			}
			return n.actingHealNode(r.Context(), v), nil
		case "reset-brick":
			return n.resetBrickTarget(r, name)
		}
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return "", nil
	}
	if err := n.raft.WaitLeader(raftstore.LeaderWait); err != nil {
		return "", err
	}
	return n.raft.Leader(), nil
}

// resetBrickTarget peeks at a reset-brick request's body for the brick
// and returns its node.
func (n *Node) resetBrickTarget(r *http.Request, name string) (string, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
	if err != nil {
		return "", api.Errorf(api.ErrInvalid, "bad request body: %v", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	var req api.ResetBrickRequest
	if json.Unmarshal(data, &req) != nil {
		return "", nil // the handler explains
	}
	v, ok := n.store.State().Volumes[name]
	if !ok {
		return "", nil
	}
	b, _, err := n.findBrick(r.Context(), n.store.State(), v, req.Brick)
	if err != nil {
		return "", nil
	}
	return b.Node, nil
}

// actingHealNode is the node whose heal daemon heals v now: the first
// node, in the order of v's bricks, that answers (this node always
// does); "" if none does. Every node serving a brick of v runs a heal
// daemon; the others stand by, and the one after a node that died takes
// over. Two nodes that see the cluster differently may both act: the
// bricks' heal leases keep them from healing one set at once.
func (n *Node) actingHealNode(ctx context.Context, v *state.Volume) string {
	seen := map[string]bool{}
	for _, b := range v.Bricks {
		if seen[b.Node] {
			continue
		}
		seen[b.Node] = true
		if b.Node == n.id || n.answers(ctx, b.Node) {
			return b.Node
		}
	}
	return ""
}

// answers reports whether node id answers a ping within peerPingTimeout.
func (n *Node) answers(ctx context.Context, id string) bool {
	ctx, cancel := context.WithTimeout(ctx, peerPingTimeout)
	defer cancel()
	var ni api.NodeInfo
	return n.call(ctx, id, http.MethodGet, "/v1/node", nil, &ni) == nil && ni.ID == id
}

// proxy forwards r (whose body is body) to node id and copies its answer
// back. It returns an error, and writes nothing, when the node cannot be
// reached.
func (n *Node) proxy(w http.ResponseWriter, r *http.Request, id string, body []byte) error {
	node, ok := n.store.State().Nodes[id]
	if !ok {
		return api.Errorf(api.ErrNoQuorum, "node %s is not known here yet", id)
	}
	u := *r.URL
	u.Scheme, u.Host = "http", node.Addr
	if n.tls != nil {
		u.Scheme = "https"
	}
	body = n.sealForward(r, body)
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	out.Header = r.Header.Clone()
	out.Header.Del("Authorization") // the caller's signature, for this node
	out.Header.Set(api.ViaHeader, n.id)
	if n.tls == nil {
		api.SignRequest(out, body, n.secret())
	}
	resp, err := n.peerHTTP.Do(out)
	if err != nil {
		return api.Errorf(api.ErrNoQuorum, "node %s (%s), which must answer this request, is unreachable: %v", id, node.Addr, err)
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	// Read your writes: answer once this node has applied what the
	// other one had when it answered, so that the next request here (a
	// mount after a start) sees the change.
	if idx, err := strconv.ParseUint(resp.Header.Get(indexHeader), 10, 64); err == nil {
		n.raft.WaitApplied(r.Context(), idx, raftstore.LeaderWait)
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body) //nolint:errcheck // the client went away
	return nil
}

// indexHeader carries, on answers to forwarded requests, the Raft index
// the answering node had applied.
const indexHeader = "X-Mortar-Applied"

// indexWriter adds indexHeader to an answer.
type indexWriter struct {
	http.ResponseWriter
	n *Node
}

func (w *indexWriter) WriteHeader(code int) {
	w.Header().Set(indexHeader, strconv.FormatUint(w.n.raft.AppliedIndex(), 10))
	w.ResponseWriter.WriteHeader(code)
}

// call sends a request to node id's API and decodes its answer into out.
func (n *Node) call(ctx context.Context, id, method, path string, body, out any) error {
	node, ok := n.store.State().Nodes[id]
	if !ok {
		return fmt.Errorf("node %s is not known", id)
	}
	c := n.peerClient(node.Addr)
	ctx, cancel := context.WithTimeout(ctx, nodeCallTimeout)
	defer cancel()
	return c.Do(ctx, method, path, body, out)
}

// forwardApply sends cmd to the leader to commit.
func (n *Node) forwardApply(ctx context.Context, leader string, cmd state.Command) error {
	return n.call(ctx, leader, http.MethodPost, "/v1/cluster/apply", cmd, nil)
}

// handle makes a handler that decodes the request body (if any) into a
// Req, runs fn and answers with its result (200) or its error.
func handle[Req any](n *Node, fn func(r *http.Request, req Req) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if !readJSON(w, r, &req) {
			return
		}
		out, err := fn(r, req)
		n.reply(w, r, http.StatusOK, out, err)
	}
}

// clusterHandlers adds the endpoints between nodes.
func (n *Node) clusterHandlers(mux *http.ServeMux) {
	vid := func(r *http.Request) string { return r.PathValue("id") }
	done := struct{}{}
	mux.HandleFunc("POST /v1/cluster/apply", handle(n, func(r *http.Request, cmd state.Command) (any, error) {
		if !n.raft.IsLeader() {
			return nil, api.Errorf(api.ErrNoQuorum, "node %s does not lead the cluster (any more)", n.id)
		}
		return done, n.raft.ApplyContext(r.Context(), cmd)
	}))
	mux.HandleFunc("POST /v1/cluster/join", handle(n, func(r *http.Request, req api.JoinRequest) (any, error) {
		return n.join(req)
	}))
	mux.HandleFunc("POST /v1/cluster/leave", handle(n, func(r *http.Request, _ struct{}) (any, error) {
		return done, n.leave()
	}))
	mux.HandleFunc("POST /v1/local/volumes/{id}/start", handle(n, func(r *http.Request, req LocalStartRequest) (any, error) {
		v := req.Volume
		return done, n.startBricks(&v, req.Index, req.AllOrNothing)
	}))
	mux.HandleFunc("POST /v1/local/volumes/{id}/stop", handle(n, func(r *http.Request, _ struct{}) (any, error) {
		n.stopVolumeRun(vid(r))
		return done, nil
	}))
	mux.HandleFunc("POST /v1/local/volumes/{id}/bricks/{brick}/stop", handle(n, func(r *http.Request, _ struct{}) (any, error) {
		n.stopLocalBrick(vid(r), r.PathValue("brick"))
		return done, nil
	}))
	mux.HandleFunc("POST /v1/local/volumes/{id}/status", handle(n, func(r *http.Request, v state.Volume) (any, error) {
		return n.localStatus(&v), nil
	}))
	mux.HandleFunc("POST /v1/local/bricks/mark", handle(n, func(r *http.Request, req MarkRequest) (any, error) {
		return done, markBrick(req, n.dir)
	}))
	mux.HandleFunc("POST /v1/local/bricks/check", handle(n, func(r *http.Request, req MarkRequest) (any, error) {
		return done, checkNewBrick(req, n.dir)
	}))
	mux.HandleFunc("POST /v1/local/bricks/unmark", handle(n, func(r *http.Request, req MarkRequest) (any, error) {
		return done, unmarkBrick(req)
	}))
	n.peerHandlers(mux)
	n.rebalanceHandlers(mux)
	n.takeUpHandlers(mux)
}

// localStatus is the live state of this node's bricks of v.
func (n *Node) localStatus(v *state.Volume) []api.BrickStatus {
	st := n.store.State()
	out := []api.BrickStatus{}
	for _, b := range v.Bricks {
		if b.Node == n.id {
			out = append(out, n.brickStatus(st, v, b))
		}
	}
	return out
}

// onNode runs local on this node if id is this node, else remote there.
func (n *Node) onNode(ctx context.Context, id string, local func() error, method, path string, body any) error {
	if id == n.id {
		return local()
	}
	return n.call(ctx, id, method, path, body, nil)
}

// nodesOf returns the nodes that serve bricks of v, in brick order.
func nodesOf(v *state.Volume) []string {
	var ids []string
	seen := map[string]bool{}
	for _, b := range v.Bricks {
		if !seen[b.Node] {
			seen[b.Node] = true
			ids = append(ids, b.Node)
		}
	}
	return ids
}

// unreachable reports whether err is a failure to reach a node (as
// opposed to the node's refusal).
func unreachable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne) || strings.Contains(err.Error(), "cannot reach mortar server")
}
