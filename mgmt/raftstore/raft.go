// Package raftstore replicates mortar's cluster state (package
// mgmt/state) with Raft (hashicorp/raft): every state.Command is a log
// entry, applied in order by every node's fsm to its copy of the State.
// The log and the Raft metadata live in DATA/raft/raft.db (bbolt),
// snapshots of the State in DATA/raft/snapshots. After every command the
// node also writes the State it has applied to DATA/state.json: that copy
// is what the node starts its bricks from when it restarts without a
// quorum (a lone node of a three-node cluster still serves its bricks),
// and what a node that predates Raft is migrated from.
//
// Every node is a voter. A node starts as a one-node cluster of its own
// (bootstrapped on first start); `peer probe` makes it leave that cluster,
// wiping its Raft data, and join the prober's (Rejoin), which mgmt allows
// only while it has no volumes and no peers. Without TLS, every Raft
// connection opens with a challenge answered with the cluster secret
// (raftauth.go); with TLS, nodes' certificates authenticate both ends.
package raftstore

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/mortarfs/mortar/internal/atomicfile"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/tlsconf"
)

const (
	// ApplyTimeout bounds how long a command waits to be committed.
	ApplyTimeout = 10 * time.Second
	// raftSnapshotThreshold is how many log entries trigger a snapshot.
	raftSnapshotThreshold = 1024
	// raftRetainSnapshots is how many snapshots are kept on disk.
	raftRetainSnapshots = 2
	// LeaderWait is how long a command waits for a leader to be elected
	// before failing with ErrNoQuorum.
	LeaderWait = 5 * time.Second
)

// Store keeps the cluster state as the entries of a Raft log: its
// commands are applied in order by every node.
type Store struct {
	log   *slog.Logger
	id    string
	dir   string // DATA/raft
	cache string // DATA/state.json, the last applied state
	addr  raft.ServerAddress
	adv   net.Addr          // addr, resolved
	bind  string            // the address the Raft listener is bound to
	tls   *tlsconf.Identity // nil: plain TCP, authenticated by secret
	// secret is the cluster secret (without TLS).
	secret func() string

	raft     *raft.Raft
	fsm      *fsm
	trans    *raft.NetworkTransport
	bolt     *raftboltdb.BoltStore
	leadHook func() // guarded by fsm.mu
	// unwatch stops the leader watcher of the running Raft.
	unwatch chan struct{}

	// forward sends a command to the leader (a node other than this one)
	// and returns its verdict.
	forward func(ctx context.Context, leaderID string, cmd state.Command) error

	closeOnce sync.Once
}

// fsm applies committed commands to the State.
type fsm struct {
	mu    sync.Mutex
	state *state.State
	cache string // where the applied state is saved (state.json)
	// floor is the index of the state saved when the node started: while
	// the log is applied again after a restart, older states are not
	// saved over it.
	floor  uint64
	log    *slog.Logger
	notify func() // called after every change, outside mu
}

// applyResult is what fsm.Apply returns for one entry.
type applyResult struct{ err error }

func (f *fsm) Apply(l *raft.Log) any {
	var cmd state.Command
	if err := json.Unmarshal(l.Data, &cmd); err != nil {
		// Only commands this code encoded reach the log.
		return applyResult{fmt.Errorf("decode command at index %d: %w", l.Index, err)}
	}
	f.mu.Lock()
	next := f.state.Clone()
	err := next.Apply(cmd)
	if err == nil {
		f.state = next
		f.save(next)
	}
	f.mu.Unlock()
	if err == nil && f.notify != nil {
		f.notify()
	}
	return applyResult{err}
}

// save writes the applied state to state.json; a failure is logged (the
// Raft log is the truth; the file only helps a restart without quorum).
func (f *fsm) save(st *state.State) {
	if f.cache == "" || st.Index < f.floor {
		return
	}
	if err := atomicfile.WriteJSON(f.cache, st); err != nil {
		f.log.Warn("saving the applied state failed", "err", err)
	}
}

func (f *fsm) current() *state.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state.Clone()
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	data, err := json.Marshal(f.current())
	if err != nil {
		return nil, err
	}
	return stateSnapshot(data), nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st := state.NewState()
	if err := json.NewDecoder(rc).Decode(st); err != nil {
		return fmt.Errorf("restore state snapshot: %w", err)
	}
	st = st.Clone() // fills nil maps
	f.mu.Lock()
	f.state = st
	f.save(st)
	f.mu.Unlock()
	if f.notify != nil {
		f.notify()
	}
	return nil
}

type stateSnapshot []byte

func (s stateSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (stateSnapshot) Release() {}

// raftConfig is the Raft configuration of a node: timeouts short enough
// that a LAN cluster elects a new leader in about a second.
func raftConfig(id string, log *slog.Logger) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(id)
	c.HeartbeatTimeout = 500 * time.Millisecond
	c.ElectionTimeout = 500 * time.Millisecond
	c.LeaderLeaseTimeout = 250 * time.Millisecond
	c.CommitTimeout = 20 * time.Millisecond
	c.SnapshotThreshold = raftSnapshotThreshold
	c.TrailingLogs = raftSnapshotThreshold
	c.Logger = hclog.New(&hclog.LoggerOptions{
		Name:   "raft",
		Level:  hclog.Error, // leadership changes are logged by watchLeader
		Output: slogWriter{log.With("component", "raft")},
	})
	return c
}

// slogWriter turns the lines hclog writes into log records.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	switch {
	case strings.Contains(line, "[ERROR]"):
		level = slog.LevelError
	case strings.Contains(line, "[WARN]"):
		level = slog.LevelWarn
	}
	w.log.Log(context.Background(), level, line)
	return len(p), nil
}

// Open opens (or, on first start, bootstraps as a one-node
// cluster) the Raft state in dataDir/raft, listening for Raft traffic on
// ln and advertising advertise. A state.json left by a node that predates
// Raft becomes the first snapshot.
func Open(dataDir, id string, ln net.Listener, advertise string, secure *tlsconf.Identity, secret func() string, log *slog.Logger) (*Store, error) {
	s := &Store{
		log:    log,
		id:     id,
		dir:    filepath.Join(dataDir, "raft"),
		cache:  filepath.Join(dataDir, "state.json"),
		addr:   raft.ServerAddress(advertise),
		tls:    secure,
		secret: secret,
	}
	adv, err := net.ResolveTCPAddr("tcp", advertise)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("raft: advertise address %s: %w", advertise, err)
	}
	s.adv, s.bind = adv, ln.Addr().String()
	s.trans = s.transport(ln)
	if err := s.start(false); err != nil {
		s.trans.Close()
		return nil, err
	}
	return s, nil
}

// transport makes the Raft transport over ln: TLS with node
// certificates, or plain TCP where every connection opens with a
// challenge the dialer answers with the cluster secret (raftauth.go).
func (s *Store) transport(ln net.Listener) *raft.NetworkTransport {
	log := s.log.With("component", "raft")
	rs := &raftStream{ln: ln, adv: s.adv}
	if s.tls != nil {
		rs.ln = tlsconf.WrapListener(ln, s.tls, log)
		rs.tls = s.tls.ClientConfig()
	} else {
		rs.ln = secretListener{Listener: ln, secret: s.secret, log: log}
		rs.secret = s.secret
	}
	return raft.NewNetworkTransport(rs, 3, 10*time.Second, slogWriter{s.log.With("component", "raft")})
}

// start opens the Raft data and starts Raft. Fresh data is bootstrapped
// as a one-node cluster unless join is set (the node is joining another
// cluster, whose leader will send it the log).
func (s *Store) start(join bool) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(s.dir, "raft.db")})
	if err != nil {
		return fmt.Errorf("raft: open log: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStore(s.dir, raftRetainSnapshots, io.Discard)
	if err != nil {
		bolt.Close()
		return fmt.Errorf("raft: open snapshots: %w", err)
	}
	cfg := raftConfig(s.id, s.log)
	existing, err := raft.HasExistingState(bolt, bolt, snaps)
	if err != nil {
		bolt.Close()
		return fmt.Errorf("raft: %w", err)
	}
	legacy := state.NewState()
	if !existing && !join {
		if legacy, err = legacyState(s.cache); err != nil {
			bolt.Close()
			return err
		}
	}
	var notify func()
	if s.fsm != nil {
		notify = s.fsm.notify
	}
	s.fsm = &fsm{state: state.NewState(), cache: s.cache, log: s.log, notify: notify}
	if existing {
		s.fsm.floor = s.CachedState().Index
	}
	if !existing && !join {
		conf := raft.Configuration{Servers: []raft.Server{{ID: cfg.LocalID, Address: s.addr}}}
		if err := raft.BootstrapCluster(cfg, bolt, bolt, snaps, s.trans, conf); err != nil {
			bolt.Close()
			return fmt.Errorf("raft: bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(cfg, s.fsm, bolt, bolt, snaps, s.trans)
	if err != nil {
		bolt.Close()
		return fmt.Errorf("raft: %w", err)
	}
	s.raft, s.bolt = r, bolt
	s.unwatch = make(chan struct{})
	s.watchLeader(r, s.unwatch)
	if len(legacy.Nodes)+len(legacy.Volumes) > 0 {
		// The state of a node that ran before Raft becomes the first
		// command of its log.
		if err := s.Apply(state.Command{Op: state.OpLoadState, State: legacy}); err != nil {
			return fmt.Errorf("raft: take over %s: %w", s.cache, err)
		}
		s.log.Info("state taken over from before Raft", "volumes", len(legacy.Volumes))
	}
	return nil
}

// watchLeader logs every change of leader that r observes, until r shuts
// down.
func (s *Store) watchLeader(r *raft.Raft, stop <-chan struct{}) {
	ch := make(chan raft.Observation, 8)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(obs)
	go func() {
		defer r.DeregisterObserver(obs)
		for {
			select {
			case o := <-ch:
				lo := o.Data.(raft.LeaderObservation)
				if lo.LeaderID == "" {
					s.log.Warn("the cluster has no leader now")
				} else {
					s.log.Info("cluster leader", "node", string(lo.LeaderID), "raft", string(lo.LeaderAddr), "self", string(lo.LeaderID) == s.id)
					s.fsm.mu.Lock()
					hook := s.leadHook
					s.fsm.mu.Unlock()
					if string(lo.LeaderID) == s.id && hook != nil {
						go hook()
					}
				}
			case <-stop:
				return
			}
		}
	}()
}

// legacyState reads the state.json of a node that ran without Raft, or
// returns an empty state.
func legacyState(path string) (*state.State, error) {
	st := state.NewState()
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return st, nil
	case err != nil:
		return nil, fmt.Errorf("read state: %w", err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("read state %s: %w", path, err)
	}
	return st.Clone(), nil
}

// cachedState returns the state this node last applied, as saved in
// state.json (empty if none): what the node had before it stopped.
func (s *Store) CachedState() *state.State {
	st, err := legacyState(s.cache)
	if err != nil {
		s.log.Warn("reading the last applied state failed", "err", err)
		return state.NewState()
	}
	return st
}

// onLead sets the function called when this node becomes the leader.
func (s *Store) OnLead(fn func()) {
	s.fsm.mu.Lock()
	s.leadHook = fn
	s.fsm.mu.Unlock()
}

// onChange sets the function called after every change of the state.
func (s *Store) OnChange(fn func()) {
	s.fsm.mu.Lock()
	s.fsm.notify = fn
	s.fsm.mu.Unlock()
}

func (s *Store) State() *state.State { return s.fsm.current() }

// Apply commits cmd through the leader: here if this node leads, else by
// forwarding it to the leader's API.
func (s *Store) Apply(cmd state.Command) error {
	ctx, cancel := context.WithTimeout(context.Background(), LeaderWait+ApplyTimeout)
	defer cancel()
	return s.ApplyContext(ctx, cmd)
}

// ApplyContext is Apply bounded by ctx.
func (s *Store) ApplyContext(ctx context.Context, cmd state.Command) error {
	data, err := json.Marshal(cmd)
	if err != nil {
		return fmt.Errorf("encode command: %w", err)
	}
	if err := s.WaitLeader(LeaderWait); err != nil {
		return err
	}
	_, leader := s.raft.LeaderWithID()
	if string(leader) != s.id {
		if s.forward == nil {
			return api.Errorf(api.ErrNoQuorum, "this node does not lead the cluster and cannot forward")
		}
		return s.forward(ctx, string(leader), cmd)
	}
	f := s.raft.Apply(data, ApplyTimeout)
	if err := f.Error(); err != nil {
		return raftErr(cmd.Op, err)
	}
	if res, ok := f.Response().(applyResult); ok && res.err != nil {
		return res.err
	}
	return nil
}

// waitLeader waits up to d for the cluster to have a leader.
func (s *Store) WaitLeader(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if _, id := s.raft.LeaderWithID(); id != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return api.Errorf(api.ErrNoQuorum, "the cluster has no leader: fewer than a majority of its %d nodes are reachable, so its state cannot change now (volumes keep serving)", s.Voters())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// catchUp waits up to d for this node to have applied its whole log: on
// the leader, everything committed before (a barrier); elsewhere, the
// entries its log held when it started, once a leader commits them.
func (s *Store) CatchUp(d time.Duration) {
	if s.IsLeader() {
		if err := s.raft.Barrier(d).Error(); err != nil {
			s.log.Warn("applying the log again took too long", "err", err)
		}
		return
	}
	s.WaitApplied(context.Background(), s.raft.LastIndex(), d)
}

// waitApplied waits up to d for this node to have applied the log up to
// index.
func (s *Store) WaitApplied(ctx context.Context, index uint64, d time.Duration) {
	deadline := time.Now().Add(d)
	for s.raft.AppliedIndex() < index && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

// AppliedIndex is the index of the last entry this node applied.
func (s *Store) AppliedIndex() uint64 { return s.raft.AppliedIndex() }

// SetForward sets how a command goes to the leader when this node does
// not lead: fn sends it to node leaderID and returns its verdict.
func (s *Store) SetForward(fn func(ctx context.Context, leaderID string, cmd state.Command) error) {
	s.forward = fn
}

// voters counts the servers of the Raft configuration.
func (s *Store) Voters() int {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	return len(f.Configuration().Servers)
}

// leader returns the id of the current leader ("" if none).
func (s *Store) Leader() string {
	_, id := s.raft.LeaderWithID()
	return string(id)
}

// isLeader reports whether this node leads.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// servers returns the Raft configuration: id → Raft address.
func (s *Store) Servers() (map[string]string, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, srv := range f.Configuration().Servers {
		out[string(srv.ID)] = string(srv.Address)
	}
	return out, nil
}

// addVoter makes node id, reached at addr, a voter (leader only).
func (s *Store) AddVoter(id, addr string) error {
	if err := s.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, ApplyTimeout).Error(); err != nil {
		return raftErr("add node to the cluster", err)
	}
	return nil
}

// removeServer drops node id from the Raft configuration (leader only).
func (s *Store) RemoveServer(id string) error {
	if err := s.raft.RemoveServer(raft.ServerID(id), 0, ApplyTimeout).Error(); err != nil {
		return raftErr("remove node from the cluster", err)
	}
	return nil
}

// raftErr explains a failure to commit: a leader that lost its majority
// (the change is then not confirmed: it is made if the entry survives,
// which the state shows once a majority is back) or another error.
func raftErr(what string, err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrEnqueueTimeout) {
		return api.Errorf(api.ErrNoQuorum, "%s: the cluster has no leader that a majority of its nodes follow (%v); the change is not confirmed: look again once a majority of the nodes are up", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// rejoin throws this node's Raft data away and restarts Raft without
// bootstrapping, to be added to another cluster (or, with bootstrap, to
// become a one-node cluster of its own again after a detach).
func (s *Store) Rejoin(bootstrap bool) error {
	close(s.unwatch)
	if err := s.raft.Shutdown().Error(); err != nil {
		return fmt.Errorf("raft: shutdown: %w", err)
	}
	s.bolt.Close()
	s.trans.Close() // Shutdown closed it already, with its listener
	ln, err := net.Listen("tcp", s.bind)
	if err != nil {
		return fmt.Errorf("raft: listen again: %w", err)
	}
	s.trans = s.transport(ln)
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("raft: remove old data: %w", err)
	}
	if bootstrap {
		if err := os.Remove(s.cache); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("raft: %w", err)
		}
	}
	return s.start(!bootstrap)
}

func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.unwatch)
		err = s.raft.Shutdown().Error()
		err = errors.Join(err, s.bolt.Close(), s.trans.Close())
	})
	return err
}

// raftStream is a raft.StreamLayer over a TCP listener.
type raftStream struct {
	ln     net.Listener
	adv    net.Addr
	tls    *tls.Config   // the node's client side, nil: plain TCP
	secret func() string // without TLS: answers the listener's challenge
}

func (r *raftStream) Accept() (net.Conn, error) { return r.ln.Accept() }
func (r *raftStream) Close() error              { return r.ln.Close() }
func (r *raftStream) Addr() net.Addr            { return r.adv }
func (r *raftStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if r.tls != nil {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(address), r.tls)
	}
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	if err := answer(c, r.secret(), time.Now().Add(timeout)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Compile-time checks.
var (
	_ raft.FSM         = (*fsm)(nil)
	_ raft.StreamLayer = (*raftStream)(nil)
)
