package mgmt

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/layer"
)

// clusterNode is one node of a test cluster: an address of its own on the
// loopback network (127.0.0.2, 127.0.0.3, ...), fixed ports, and a data
// directory that survives a restart.
type clusterNode struct {
	n          *Node
	c          *api.Client
	dir        string // the node's data directory
	bricks     string // where its brick directories go (never in dir)
	host       string
	api, raftA string
}

func (cn *clusterNode) start(t *testing.T) {
	t.Helper()
	n, err := Start(Config{DataDir: cn.dir, Listen: cn.api, RaftListen: cn.raftA, Logger: testLogger(t).With("node", cn.host)})
	if err != nil {
		t.Fatalf("start node %s: %v", cn.host, err)
	}
	cn.n, cn.c = n, api.NewClient(cn.api)
}

func (cn *clusterNode) stop() {
	if cn.n != nil {
		cn.n.Close()
		cn.n = nil
	}
}

// apiAndRaft returns two distinct addresses free on host now, for a
// node's API and Raft: both listeners are held until both are chosen (two
// ports picked one after the other could be the same one, freed between).
func apiAndRaft(t *testing.T, host string) (api, raft string) {
	t.Helper()
	var addrs []string
	for range 2 {
		ln, err := net.Listen("tcp", host+":0")
		if err != nil {
			t.Skipf("cannot listen on %s (loopback addresses other than 127.0.0.1 are needed): %v", host, err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs[0], addrs[1]
}

// startCluster starts size nodes and probes the others from the first.
func startCluster(t *testing.T, size int) []*clusterNode {
	t.Helper()
	var nodes []*clusterNode
	for i := range size {
		host := fmt.Sprintf("127.0.0.%d", i+2)
		cn := &clusterNode{dir: t.TempDir(), bricks: t.TempDir(), host: host}
		cn.api, cn.raftA = apiAndRaft(t, host)
		cn.start(t)
		t.Cleanup(cn.stop)
		nodes = append(nodes, cn)
	}
	ctx := ctxT(t)
	for _, cn := range nodes[1:] {
		if _, err := nodes[0].c.Probe(ctx, cn.api); err != nil {
			t.Fatalf("probe %s: %v", cn.host, err)
		}
	}
	for _, cn := range nodes {
		waitFor(t, 10*time.Second, "every node to see every peer connected", func() error {
			ps, err := cn.c.Peers(ctx)
			if err != nil {
				return err
			}
			up := 0
			for _, p := range ps {
				if p.Connected {
					up++
				}
			}
			if up != size {
				return fmt.Errorf("%s sees %d of %d peers connected: %+v", cn.host, up, size, ps)
			}
			return nil
		})
	}
	return nodes
}

// nodeBricks makes a brick directory on each node and returns them as
// host:/path.
func nodeBricks(t *testing.T, nodes []*clusterNode) []string {
	t.Helper()
	var bricks []string
	for _, cn := range nodes {
		d := filepath.Join(cn.bricks, "brick")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		bricks = append(bricks, cn.host+":"+d)
	}
	return bricks
}

// leaderOf returns the node that leads, as nodes[0]'s peer list says.
func leaderOf(t *testing.T, nodes []*clusterNode) *clusterNode {
	t.Helper()
	var leader *clusterNode
	waitFor(t, 10*time.Second, "a leader", func() error {
		for _, cn := range nodes {
			if cn.n == nil {
				continue
			}
			ni, err := cn.c.Node(ctxT(t))
			if err != nil {
				return err
			}
			for _, o := range nodes {
				if o.n != nil && o.n.ID() == ni.Leader {
					leader = o
					return nil
				}
			}
		}
		return errors.New("no leader among the running nodes")
	})
	return leader
}

func TestClusterLeaderFailover(t *testing.T) {
	nodes := startCluster(t, 3)
	ctx := ctxT(t)
	bricks := nodeBricks(t, nodes)
	// Any node takes commands: create through the last one.
	if _, err := nodes[2].c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "rv", Bricks: bricks, Replica: 3, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[1].c.Start(ctx, "rv", false); err != nil {
		t.Fatal(err)
	}
	vs, err := nodes[0].c.Status(ctx, "rv")
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range vs.Bricks {
		if !b.Online || b.Host != nodes[i].host {
			t.Fatalf("brick %d: %+v, want online on %s", i, b, nodes[i].host)
		}
	}
	top := mountVolume(t, nodes[0].c, "rv")
	mustWrite(t, top, "/before", []byte("written with three nodes"))

	leader := leaderOf(t, nodes)
	leader.stop()
	var alive []*clusterNode
	for _, cn := range nodes {
		if cn.n != nil {
			alive = append(alive, cn)
		}
	}
	// Management carries on with the other two.
	if _, err := alive[0].c.Set(ctx, "rv", "cluster.heal-interval", "7"); err != nil {
		t.Fatalf("set an option with the leader down: %v", err)
	}
	// Reads answer from each node's copy, which follows the leader's
	// within a heartbeat.
	waitFor(t, 5*time.Second, "the option on the other node", func() error {
		vi, err := alive[1].c.Info(ctx, "rv")
		if err == nil && vi.Options["cluster.heal-interval"] != "7" {
			err = fmt.Errorf("options %v", vi.Options)
		}
		return err
	})
	// The volume keeps serving.
	if got := mustRead(t, top, "/before"); string(got) != "written with three nodes" {
		t.Fatalf("read with the leader's node down: %q", got)
	}
	mustWrite(t, top, "/during", []byte("written with two nodes"))

	// The node comes back, rejoins, sees the change made without it, and
	// its brick serves again.
	leader.start(t)
	waitFor(t, 15*time.Second, "the restarted node to catch up", func() error {
		vi, err := leader.c.Info(ctx, "rv")
		if err != nil {
			return err
		}
		if vi.Options["cluster.heal-interval"] != "7" {
			return errors.New("option not replicated yet")
		}
		vs, err := leader.c.Status(ctx, "rv")
		if err != nil {
			return err
		}
		for _, b := range vs.Bricks {
			if !b.Online {
				return fmt.Errorf("brick %s offline: %s", b.Name(), b.Error)
			}
		}
		return nil
	})
	if _, err := leader.c.Set(ctx, "rv", "cluster.heal-interval", "9"); err != nil {
		t.Fatalf("set through the rejoined node: %v", err)
	}
}

// A brick whose node died is replaced by a directory on another node, and
// heal fills it.
func TestReplaceBrickOnDeadNode(t *testing.T) {
	nodes := startCluster(t, 3)
	ctx := ctxT(t)
	bricks := nodeBricks(t, nodes)
	if _, err := nodes[0].c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "rv", Bricks: bricks, Replica: 3, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].c.Set(ctx, "rv", options.OptHealInterval, "0.2"); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].c.Start(ctx, "rv", false); err != nil {
		t.Fatal(err)
	}
	top := mountVolume(t, nodes[0].c, "rv")
	mustMkdir(t, top, "/d")
	for i := range 20 {
		mustWrite(t, top, fmt.Sprintf("/d/f%d", i), []byte(strings.Repeat("x", i*100)))
	}
	nodes[2].stop()
	fresh := filepath.Join(nodes[1].bricks, "fresh")
	if err := os.Mkdir(fresh, 0o755); err != nil {
		t.Fatal(err)
	}
	// Not empty, or already a brick: refused.
	if _, err := nodes[0].c.ReplaceBrick(ctx, "rv", api.ReplaceBrickRequest{Source: bricks[2], Destination: bricks[1], Force: true}); !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("replace by a brick of the volume: %v", err)
	}
	vi, err := nodes[0].c.ReplaceBrick(ctx, "rv", api.ReplaceBrickRequest{Source: bricks[2], Destination: nodes[1].host + ":" + fresh, Force: true})
	if err != nil {
		t.Fatalf("replace-brick: %v", err)
	}
	if got := vi.Bricks[2].Name(); got != nodes[1].host+":"+fresh {
		t.Fatalf("brick 2 is now %s", got)
	}
	dirs := []string{filepath.Join(nodes[0].bricks, "brick"), filepath.Join(nodes[1].bricks, "brick"), fresh}
	waitHealed(t, nodes[0].c, "rv", dirs)
	// The mount follows to the new brick once it reads the new spec; the
	// data is there for it.
	if got := mustRead(t, top, "/d/f19"); len(got) != 1900 {
		t.Fatalf("read after replace: %d bytes", len(got))
	}
}

func TestClusterNoQuorum(t *testing.T) {
	nodes := startCluster(t, 3)
	ctx := ctxT(t)
	nodes[1].stop()
	nodes[2].stop()
	start := time.Now()
	_, err := nodes[0].c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "v", Bricks: []string{nodes[0].host + ":" + t.TempDir()}, Force: true})
	if !errors.Is(err, api.ErrNoQuorum) || !strings.Contains(err.Error(), "no leader") {
		t.Fatalf("create without quorum: %v, want a no-quorum error", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("refusal took %v", d)
	}
	// Reads still answer.
	if _, err := nodes[0].c.List(ctx); err != nil {
		t.Fatalf("list without quorum: %v", err)
	}
	ps, err := nodes[0].c.Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || slices.ContainsFunc(ps, func(p api.PeerInfo) bool { return p.Leader }) {
		t.Fatalf("peers without quorum: %+v", ps)
	}
}

func TestPeerProbeAndDetach(t *testing.T) {
	nodes := startCluster(t, 2)
	ctx := ctxT(t)
	// Probing a member again says so and changes nothing.
	if _, err := nodes[1].c.Probe(ctx, nodes[0].api); err != nil {
		t.Fatalf("probe a member: %v", err)
	}
	// A node with a volume of its own cannot join.
	lone := &clusterNode{dir: t.TempDir(), bricks: t.TempDir(), host: "127.0.0.9"}
	lone.api, lone.raftA = apiAndRaft(t, lone.host)
	lone.start(t)
	t.Cleanup(lone.stop)
	if _, err := lone.c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "own", Bricks: []string{lone.host + ":" + t.TempDir()}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].c.Probe(ctx, lone.api); !errors.Is(err, api.ErrState) {
		t.Fatalf("probe a node with a volume: %v, want refused", err)
	}
	// Unknown hosts are refused as brick hosts.
	if _, err := nodes[0].c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "x", Bricks: []string{lone.host + ":" + t.TempDir()}, Force: true}); !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("brick on a node of another cluster: %v", err)
	}
	// A node with bricks cannot be detached; one without can.
	d := t.TempDir()
	if _, err := nodes[0].c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "on1", Bricks: []string{nodes[1].host + ":" + d}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].c.Detach(ctx, nodes[1].host); !errors.Is(err, api.ErrState) {
		t.Fatalf("detach a node with bricks: %v", err)
	}
	if err := nodes[0].c.Delete(ctx, "on1"); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].c.Detach(ctx, nodes[1].host); err != nil {
		t.Fatalf("detach: %v", err)
	}
	waitFor(t, 10*time.Second, "the detached node to be a cluster of one", func() error {
		ni, err := nodes[1].c.Node(ctx)
		if err != nil {
			return err
		}
		if ni.Peers != 1 || ni.Leader != nodes[1].n.ID() {
			return fmt.Errorf("detached node: %+v", ni)
		}
		return nil
	})
	ps, err := nodes[0].c.Peers(ctx)
	if err != nil || len(ps) != 1 {
		t.Fatalf("peers after detach: %v %+v", err, ps)
	}
}

// mustRead returns the content of path on l (up to 1 MiB).
func mustRead(t *testing.T, l layer.Layer, path string) []byte {
	t.Helper()
	ctx := ctxT(t)
	f, err := l.Open(ctx, path, uint32(os.O_RDONLY))
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Release(ctx)
	buf := make([]byte, 1<<20)
	n, err := f.Read(ctx, buf, 0)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return buf[:n]
}

// A node restarted while the others are down cannot apply its log again
// (no quorum): it starts its bricks from the state it last applied, and
// its heal daemon runs from that state too, at once. Before, the daemon
// looked for the volume in the state applied so far, found none, and had
// no healer until the log was applied again: a heal request forwarded to
// the node in that window was refused as "not running".
func TestHealDaemonRunsWithoutQuorumAfterRestart(t *testing.T) {
	nodes := startCluster(t, 3)
	ctx := ctxT(t)
	if _, err := nodes[0].c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "rv", Bricks: nodeBricks(t, nodes), Replica: 3, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].c.Start(ctx, "rv", false); err != nil {
		t.Fatal(err)
	}
	for _, cn := range nodes {
		cn.stop()
	}
	nodes[0].start(t)
	vs := nodes[0].n.latestState().Volumes["rv"]
	if vs == nil {
		t.Fatal("the restarted node has no state of volume rv")
	}
	nodes[0].n.runMu.Lock()
	vr := nodes[0].n.vols[vs.ID]
	nodes[0].n.runMu.Unlock()
	if vr == nil || vr.heal == nil {
		t.Fatal("the restarted node runs no volume rv or no heal daemon for it")
	}
	if vr.heal.Current() == nil {
		t.Fatal("the heal daemon of rv has no healer after the node restarted without a quorum")
	}
}
