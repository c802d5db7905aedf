package mgmt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
)

// Peers: `peer probe HOST` adds the node running at HOST to the cluster,
// `peer detach HOST` removes one that serves no brick, `peer status` and
// `pool list` show them. All run on the leader.
//
//	GET    /v1/peers                 []PeerInfo (every node, this one included)
//	POST   /v1/peers                 ProbeRequest → PeerInfo
//	DELETE /v1/peers/{host}          {}

// peerPingTimeout bounds the check that a peer answers, in peer status.
const peerPingTimeout = 2 * time.Second

func (n *Node) peerHandlers(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/peers", handle(n, func(r *http.Request, _ struct{}) (any, error) {
		return n.peers(r.Context()), nil
	}))
	mux.HandleFunc("POST /v1/peers", handle(n, func(r *http.Request, req api.ProbeRequest) (any, error) {
		return n.probe(r.Context(), req)
	}))
	mux.HandleFunc("DELETE /v1/peers/{host}", handle(n, func(r *http.Request, _ struct{}) (any, error) {
		return struct{}{}, n.detach(r.Context(), r.PathValue("host"))
	}))
}

// nodeInfo describes this node.
func (n *Node) nodeInfo() api.NodeInfo {
	st := n.store.State()
	return api.NodeInfo{ID: n.id, Addr: n.addr, Raft: n.raftAddr, Leader: n.raft.Leader(),
		Peers: len(st.Nodes), Volumes: len(st.Volumes)}
}

// peers lists every node with whether it answers now.
func (n *Node) peers(ctx context.Context) []api.PeerInfo {
	st := n.store.State()
	leader := n.raft.Leader()
	out := make([]api.PeerInfo, 0, len(st.Nodes))
	for _, id := range st.NodeIDs() {
		ns := st.Nodes[id]
		out = append(out, api.PeerInfo{ID: id, Addr: ns.Addr, Raft: ns.Raft, Leader: id == leader, Self: id == n.id})
	}
	var wg sync.WaitGroup
	for i := range out {
		p := &out[i]
		if p.Self {
			p.Connected = true
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, peerPingTimeout)
			defer cancel()
			var ni api.NodeInfo
			err := (n.peerClient(p.Addr)).Do(ctx, http.MethodGet, "/v1/node", nil, &ni)
			switch {
			case err != nil:
				p.Error = err.Error()
			case ni.ID != p.ID:
				p.Error = fmt.Sprintf("%s is now node %s", p.Addr, ni.ID)
			default:
				p.Connected = true
			}
		})
	}
	wg.Wait()
	return out
}

// probe adds the node at host to the cluster (leader only). A node that
// is already a member is reported as it is; a node that belongs to
// another cluster or has volumes is refused.
func (n *Node) probe(ctx context.Context, req api.ProbeRequest) (api.PeerInfo, error) {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	host := req.Host
	if strings.TrimSpace(host) == "" || strings.ContainsAny(host, "/ ") {
		return api.PeerInfo{}, api.Errorf(api.ErrInvalid, "peer probe: want a host or host:port, not %q", host)
	}
	proving, err := n.provingSecret(req)
	if err != nil {
		return api.PeerInfo{}, err
	}
	h, port := api.SplitHostPortDefault(host)
	addr := net.JoinHostPort(h, port)
	target := n.peerClient(addr)
	if proving != "" {
		target = target.WithSecret(proving)
	}
	var ni api.NodeInfo
	if err := target.Do(ctx, http.MethodGet, "/v1/node", nil, &ni); err != nil {
		if errors.Is(err, api.ErrUnauthenticated) {
			return api.PeerInfo{}, api.Errorf(api.ErrUnauthenticated, "peer probe %s: the node refused this cluster's secret: give it its own secret, "+
				"the contents of DATA/secret on that node: mortar peer probe %s --peer-secret-file FILE", host, host)
		}
		return api.PeerInfo{}, api.Errorf(api.ErrInvalid, "peer probe %s: %v", host, err)
	}
	st := n.store.State()
	if old, ok := st.Nodes[ni.ID]; ok {
		return api.PeerInfo{ID: ni.ID, Addr: old.Addr, Raft: old.Raft, Connected: true, Self: ni.ID == n.id}, nil
	}
	if ni.Volumes > 0 || ni.Peers > 1 {
		return api.PeerInfo{}, api.Errorf(api.ErrState, "peer probe %s: node %s already has %d volume(s) and %d node(s) in its cluster; only a node with no volumes and no peers can join (detach it from its cluster first)", host, ni.ID, ni.Volumes, ni.Peers)
	}
	var joined api.NodeInfo
	join := n.joinRequest(ctx, h, proving)
	if err := target.Do(ctx, http.MethodPost, "/v1/cluster/join", join, &joined); err != nil {
		return api.PeerInfo{}, fmt.Errorf("peer probe %s: %w", host, err)
	}
	if err := n.raft.AddVoter(joined.ID, joined.Raft); err != nil {
		return api.PeerInfo{}, fmt.Errorf("peer probe %s: %w", host, err)
	}
	ns := state.Node{ID: joined.ID, Addr: joined.Addr, Raft: joined.Raft}
	if err := n.store.Apply(state.Command{Op: state.OpSetNode, Node: &ns}); err != nil {
		return api.PeerInfo{}, fmt.Errorf("peer probe %s: %w", host, err)
	}
	n.log.Info("peer added", "node", joined.ID, "addr", joined.Addr, "raft", joined.Raft)
	return api.PeerInfo{ID: ns.ID, Addr: ns.Addr, Raft: ns.Raft, Connected: true}, nil
}

// join makes this node, which must have no volumes and no peers, leave
// its one-node cluster to be added to the leader's.
func (n *Node) join(req api.JoinRequest) (api.NodeInfo, error) {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	st := n.store.State()
	if len(st.Volumes) > 0 || len(st.Nodes) > 1 {
		return api.NodeInfo{}, api.Errorf(api.ErrState, "node %s has volumes or peers and cannot join another cluster", n.id)
	}
	secret, err := n.joinSecret(req)
	if err != nil {
		return api.NodeInfo{}, err
	}
	if secret != "" {
		if err := n.adoptSecret(secret); err != nil {
			return api.NodeInfo{}, err
		}
	}
	if err := n.raft.Rejoin(false); err != nil {
		return api.NodeInfo{}, err
	}
	n.log.Info("left its own cluster to join node's", "leader", req.Leader)
	return n.nodeInfo(), nil
}

// leave makes this node, detached from its cluster, a one-node cluster of
// its own again.
func (n *Node) leave() error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	if n.tls == nil {
		if err := n.adoptSecret(newSecret()); err != nil {
			return err
		}
	}
	if err := n.raft.Rejoin(true); err != nil {
		return err
	}
	n.log.Info("detached from the cluster; now a cluster of one, with a secret of its own")
	go n.register()
	return nil
}

// detach removes the node at host from the cluster (leader only). A node
// that serves bricks is refused.
func (n *Node) detach(ctx context.Context, host string) error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	st := n.store.State()
	id, err := n.nodeForHost(ctx, st, host)
	if err != nil {
		return err
	}
	if len(st.Nodes) == 1 {
		return api.Errorf(api.ErrInvalid, "peer detach %s: it is the only node of the cluster", host)
	}
	for _, name := range st.VolumeNames() {
		if slices.ContainsFunc(st.Volumes[name].Bricks, func(b state.Brick) bool { return b.Node == id }) {
			return api.Errorf(api.ErrState, "peer detach %s: it serves bricks of volume %s (remove or replace them first)", host, name)
		}
	}
	if err := n.store.Apply(state.Command{Op: state.OpRemoveNode, Name: id}); err != nil {
		return err
	}
	if err := n.raft.RemoveServer(id); err != nil {
		return err
	}
	n.log.Info("peer detached", "node", id, "host", host)
	if id == n.id {
		go func() {
			if err := n.leave(); err != nil {
				n.log.Error("leaving the cluster failed", "err", err)
			}
		}()
		return nil
	}
	addr := st.Nodes[id].Addr
	c := n.peerClient(addr)
	if err := c.Do(ctx, http.MethodPost, "/v1/cluster/leave", struct{}{}, nil); err != nil {
		n.log.Warn("detached node did not answer; it keeps its old state until it is restarted with an empty data dir", "node", id, "err", err)
	}
	return nil
}

// nodeForHost returns the node that host names: the node advertised with
// that host, one whose host resolves to the same addresses, or, in a
// one-node cluster, this node when host is one of this machine's names
// (localhost, a loopback address, its host name).
func (n *Node) nodeForHost(ctx context.Context, st *state.State, host string) (string, error) {
	host = strings.Trim(host, "[]")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	for _, id := range st.NodeIDs() {
		h, _ := api.SplitHostPortDefault(st.Nodes[id].Addr)
		if strings.EqualFold(h, host) {
			return id, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, api.HostResolveTimeout)
	defer cancel()
	if addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host); err == nil && len(addrs) > 0 {
		for _, id := range st.NodeIDs() {
			h, _ := api.SplitHostPortDefault(st.Nodes[id].Addr)
			nodeAddrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h)
			if err != nil {
				continue
			}
			for _, a := range addrs {
				if slices.Contains(nodeAddrs, a) && !a.IsLoopback() {
					return id, nil
				}
			}
		}
	}
	advHost, _ := api.SplitHostPortDefault(n.addr)
	if len(st.Nodes) <= 1 && api.IsLocalHost(ctx, host, advHost) {
		return n.id, nil
	}
	if len(st.Nodes) > 1 && api.IsLocalHost(ctx, host, advHost) {
		return "", api.Errorf(api.ErrInvalid, "host %s is not a node of this cluster: in a cluster of several nodes, name each node as peer status shows it (its address), not as localhost or a loopback address", host)
	}
	return "", api.Errorf(api.ErrInvalid, "host %s is not a node of this cluster (add it with: mortar peer probe %s)", host, host)
}

// register records this node's addresses in the state, retrying until it
// succeeds or the node closes (a node restarting in a cluster without a
// quorum registers once the quorum is back).
func (n *Node) register() {
	for {
		st := n.store.State()
		if old, ok := st.Nodes[n.id]; ok && old.Addr == n.addr && old.Raft == n.raftAddr {
			return
		}
		err := n.store.Apply(state.Command{Op: state.OpSetNode, Node: &state.Node{ID: n.id, Addr: n.addr, Raft: n.raftAddr}})
		if err == nil {
			return
		}
		n.log.Warn("registering the node's address failed; retrying", "err", err)
		select {
		case <-n.done:
			return
		case <-time.After(time.Second):
		}
	}
}

// markBrick marks a directory of this node as a brick of a volume; the
// node's data directory dataDir is never one.
func markBrick(req MarkRequest, dataDir string) error {
	if err := posix.Mark(req.Path, req.VolumeID, req.Force, dataDir); err != nil {
		return api.Errorf(api.ErrInvalid, "%w", err)
	}
	return nil
}

// checkNewBrick says why a directory of this node cannot become a new,
// empty brick, writing nothing (req.Force allows the root file system).
func checkNewBrick(req MarkRequest, dataDir string) error {
	if err := posix.CheckNew(req.Path, req.Force, dataDir); err != nil {
		return api.Errorf(api.ErrInvalid, "%w", err)
	}
	return nil
}

// unmarkBrick removes a brick's volume mark; a directory that is gone is
// not an error.
func unmarkBrick(req MarkRequest) error {
	err := posix.Unmark(req.Path)
	if err != nil && isNotExist(req.Path) {
		return nil
	}
	if err != nil {
		return api.Errorf(api.ErrInvalid, "%w", err)
	}
	return nil
}

func isNotExist(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, fs.ErrNotExist)
}
