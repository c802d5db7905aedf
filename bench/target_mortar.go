package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mortarfs/mortar/internal/netlab"
	"github.com/mortarfs/mortar/layer/crypt"
)

// mortarTarget runs the real mortar binary: a `mortar server` child
// process per mount (one per server namespace for network set-ups with
// several servers, probed into one cluster), a volume over bricks in the
// experiment's work directory, and a background `mortar mount`.
type mortarTarget struct {
	bin     string
	log     *slog.Logger
	version string
	// peers: the binary has `mortar peer probe` (clusters of several
	// nodes); found by Available.
	peers bool
	// distribute: the mortar-distribute target, which makes a distribute
	// volume over the bricks of whatever layout it is asked for.
	distribute bool
}

// NewMortarTarget returns the mortar target running the binary bin.
func NewMortarTarget(bin string, log *slog.Logger) Target {
	return &mortarTarget{bin: bin, log: log}
}

// NewMortarDistributeTarget returns the mortar-distribute target: mortar
// with a distribute volume on the bricks of each replicated or dispersed
// layout (distribute x6 for disperse 4+2), measured beside the mortar
// target's volume of that layout, so that the report shows what the
// redundancy costs. It measures no distribute layout: the mortar target
// has those rows already.
func NewMortarDistributeTarget(bin string, log *slog.Logger) Target {
	return &mortarTarget{bin: bin, log: log, distribute: true}
}

func (t *mortarTarget) Name() string {
	if t.distribute {
		return MortarDistribute
	}
	return "mortar"
}

func (t *mortarTarget) Available(ctx context.Context) error {
	if err := canMountFUSE(); err != nil {
		return err
	}
	out, err := execOut(ctx, t.bin, "version")
	if err != nil {
		return fmt.Errorf("mortar binary %s: %w", t.bin, err)
	}
	t.version = strings.TrimSpace(out)
	if c := binaryCommit(t.bin); c != "" {
		t.version += ", commit " + c
	}
	_, err = execOut(ctx, t.bin, "peer", "probe", "--help")
	t.peers = err == nil
	return nil
}

// Mount starts a server (with opts.Net, one in every server namespace,
// probed into one cluster from the first), creates and starts a volume of
// the layout (distribute, replicated or dispersed; always distribute for
// mortar-distribute; bricks round-robin over the servers) and mounts it
// (in the client namespace with opts.Net). Everything started is stopped
// again if a later step fails.
func (t *mortarTarget) Mount(ctx context.Context, work string, layout Layout, opts SetupOptions) (_ Mount, err error) {
	if t.distribute {
		layout = sameBricks(layout)
	}
	if opts.Net != nil && len(opts.Net.Servers) > 1 && !t.peers {
		return nil, Unsupported("this mortar binary has no `peer probe`: no clusters of more than one node")
	}
	m := &mortarMount{t: t, work: work, mnt: filepath.Join(work, "mnt"), version: t.version}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if opts.Encryption {
		if err := m.makeKey(); err != nil {
			return nil, err
		}
	}
	if err := m.startServers(ctx, opts.Net); err != nil {
		return nil, err
	}
	if err := m.probePeers(ctx); err != nil {
		return nil, err
	}
	if err := m.createVolume(ctx, layout); err != nil {
		return nil, err
	}
	if err := m.mount(ctx, opts); err != nil {
		return nil, err
	}
	return m, nil
}

type mortarMount struct {
	t         *mortarTarget
	work, mnt string
	version   string
	addr      string           // host:port of the first server, which the CLI and the mount use
	servers   []*netlab.Server // one per server namespace (one on loopback)
	clientNS  string
	volume    string
	noCache   bool
	keyFile   string // set: the volume is encrypted, with the key in this file
}

func (m *mortarMount) Dir() string     { return m.mnt }
func (m *mortarMount) Version() string { return m.version }

// startServers runs `mortar server` on loopback, or in every server
// namespace (port 7420 on its address), and waits until each answers.
// Server i keeps its state in state (i = 0) or state<i> and logs to
// server.log or server<i>.log in the work directory.
func (m *mortarMount) startServers(ctx context.Context, ns *NetSetup) error {
	type place struct{ ns, host string }
	var places []place
	port := netlab.DefaultPort
	if ns == nil {
		p, err := freePort()
		if err != nil {
			return err
		}
		port = p
		places = []place{{"", "127.0.0.1"}}
	} else {
		m.clientNS = ns.Client
		for i, sns := range ns.Servers {
			places = append(places, place{sns, hostOnly(ns.ServerAddrs[i])})
		}
	}
	for i, p := range places {
		suffix := ""
		if i > 0 {
			suffix = strconv.Itoa(i)
		}
		s, err := netlab.NewServer(p.ns, p.host, netlab.ServerConfig{Bin: m.t.bin, Port: port,
			DataDir: filepath.Join(m.work, "state"+suffix), LogFile: filepath.Join(m.work, "server"+suffix+".log")})
		if err != nil {
			return err
		}
		m.servers = append(m.servers, s)
		if err := s.Start(ctx); err != nil {
			return err
		}
	}
	m.addr = m.servers[0].Addr
	return nil
}

// probePeers makes one cluster of the servers: `peer probe` of every
// other server against the first, then waits until the first lists them
// all connected. A binary with peers registers even a lone node in the
// cluster state a moment after its API answers: that is waited for too.
func (m *mortarMount) probePeers(ctx context.Context) error {
	if !m.t.peers {
		return nil
	}
	for _, s := range m.servers[1:] {
		args := []string{"peer", "probe", hostOnly(s.Addr)}
		if f := secretFile(s); f != "" {
			args = append(args, "--peer-secret-file", f) // the node is another machine
		}
		if _, err := m.cli(ctx, args...); err != nil {
			return err
		}
	}
	return waitPeers(ctx, m.servers[0], len(m.servers), 30*time.Second)
}

// secretFile is the cluster secret file of server s, "" for a binary that
// makes none (before issue 21).
func secretFile(s *netlab.Server) string {
	f := filepath.Join(s.DataDir(), "secret")
	if _, err := os.Stat(f); err != nil {
		return ""
	}
	return f
}

// peerInfo is what GET /v1/peers lists per node (the fields used here).
type peerInfo struct {
	Addr      string `json:"addr"`
	Connected bool   `json:"connected"`
}

// waitPeers polls GET /v1/peers on s until it lists want connected nodes
// (itself included): joining has no event to wait on from outside.
func waitPeers(ctx context.Context, s *netlab.Server, want int, limit time.Duration) error {
	hc := netlab.HTTPClientIn(s.NS, 5*time.Second)
	deadline := time.Now().Add(limit)
	for {
		var peers []peerInfo
		err := getJSON(ctx, hc, "http://"+s.Addr+"/v1/peers", &peers)
		n := 0
		for _, p := range peers {
			if p.Connected {
				n++
			}
		}
		if err == nil && n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mortar cluster: %d of %d nodes connected after %v (%+v, %v)", n, want, limit, peers, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// getJSON GETs url with hc and decodes the JSON answer into v.
func getJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// cli runs a mortar management command against the first server, in
// its namespace.
func (m *mortarMount) cli(ctx context.Context, args ...string) (string, error) {
	return execIn(ctx, m.servers[0].NS, m.t.bin, append(args, "--server", m.addr)...)
}

func (m *mortarMount) createVolume(ctx context.Context, layout Layout) error {
	m.volume = fmt.Sprintf("bench%d", time.Now().UnixNano()%1e6)
	args, err := m.createArgs(layout)
	if err != nil {
		return err
	}
	if _, err := m.cli(ctx, args...); err != nil {
		return err
	}
	if m.keyFile != "" {
		if _, err := m.cli(ctx, "volume", "set", m.volume, "encryption", "on"); err != nil {
			if strings.Contains(err.Error(), "unknown option") {
				return Unsupported("this mortar binary has no encryption option")
			}
			return err
		}
	}
	_, err = m.cli(ctx, "volume", "start", m.volume)
	return err
}

// makeKey writes a new volume key (hex) to the work directory, for an
// encrypted volume.
func (m *mortarMount) makeKey() error {
	m.keyFile = filepath.Join(m.work, "volume.key")
	return os.WriteFile(m.keyFile, []byte(crypt.EncodeKey(crypt.NewKey())+"\n"), 0o600)
}

// createArgs makes the brick directories b1 ... bN of the layout in the
// work directory and returns the `volume create` command for them, with
// GlusterFS's keywords ("disperse 6 redundancy 2 HOST:/b1 ... HOST:/b6"),
// and force: the work directory is usually on the root file system.
// Bricks go round-robin over the servers (brick i on server i mod N), as
// the GlusterFS target's (which says force too).
func (m *mortarMount) createArgs(layout Layout) ([]string, error) {
	dirs, err := makeBricks(m.work, layout.BrickCount())
	if err != nil {
		return nil, err
	}
	hosts := []string{hostOnly(m.addr)}
	if len(m.servers) > 0 {
		hosts = hosts[:0]
		for _, s := range m.servers {
			hosts = append(hosts, hostOnly(s.Addr))
		}
	}
	args := append([]string{"volume", "create", m.volume}, layout.Keywords()...)
	for i, b := range dirs {
		args = append(args, hosts[i%len(hosts)]+":"+b)
	}
	return append(args, "force"), nil
}

func (m *mortarMount) mount(ctx context.Context, opts SetupOptions) error {
	m.noCache = opts.NoClientCache
	if m.noCache {
		// The client layers too (quick-read, nl-cache); a binary from
		// before the option has none of them.
		if _, err := m.cli(ctx, "volume", "set", m.volume, "performance.client-cache", "off"); err != nil &&
			!strings.Contains(err.Error(), "unknown option") {
			return err
		}
	}
	return m.mountAt(ctx, m.mnt, "mount.log")
}

// mountAt mounts the volume at dir with `mortar mount` in the client's
// namespace, logging to the work directory's logName.
func (m *mortarMount) mountAt(ctx context.Context, dir, logName string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"mount", "--log-file", filepath.Join(m.work, logName)}
	if m.noCache {
		args = append(args, "-o", "attr-timeout=0,entry-timeout=0,negative-timeout=0")
	}
	if m.keyFile != "" {
		args = append(args, "-o", "key-file="+m.keyFile)
	}
	if f := secretFile(m.servers[0]); f != "" && m.clientNS != "" {
		args = append(args, "-o", "secret-file="+f) // the client is another machine
	}
	args = append(args, m.addr+":/"+m.volume, dir)
	if _, err := execIn(ctx, m.clientNS, m.t.bin, args...); err != nil {
		return fmt.Errorf("%w (mount log: %s)", err, m.logTail(logName))
	}
	if !isMounted(dir) {
		return fmt.Errorf("mortar mount returned but %s is not mounted: %s", dir, m.logTail(logName))
	}
	return nil
}

// MountClient mounts the volume once more at dir, as another client
// (seed 004); closing the returned Mount unmounts only that one.
func (m *mortarMount) MountClient(ctx context.Context, dir string) (Mount, error) {
	if err := m.mountAt(ctx, dir, "mount-"+filepath.Base(dir)+".log"); err != nil {
		return nil, err
	}
	return &extraClient{dir: dir, version: m.version}, nil
}

// extraClient is one more mount of a volume; Close unmounts it.
type extraClient struct{ dir, version string }

func (c *extraClient) Dir() string     { return c.dir }
func (c *extraClient) Version() string { return c.version }
func (c *extraClient) Close() error    { return unmount(c.dir) }

func (m *mortarMount) logTail(name string) string {
	return fileTail(filepath.Join(m.work, name), 5)
}

// Close unmounts (which ends the mount process) and stops the servers,
// all at once.
func (m *mortarMount) Close() error {
	errs := make([]error, len(m.servers)+1)
	errs[0] = unmount(m.mnt)
	var wg sync.WaitGroup
	for i, s := range m.servers {
		wg.Go(func() { errs[i+1] = s.Stop(15 * time.Second) })
	}
	wg.Wait()
	m.servers = nil
	return errors.Join(errs...)
}
