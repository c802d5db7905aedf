package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// glusterTarget is GlusterFS from Debian's glusterfs-server package,
// installed by Available if missing. On loopback it uses the machine's
// glusterd (started by the suite if none runs, and stopped by Close at the
// end of the run only then). For network-namespace set-ups it runs one
// private glusterd per server namespace (own working and run directories
// under the experiment's work directory), probes them into one pool, and
// stops them when the mount is closed.
type glusterTarget struct {
	log      *slog.Logger
	progress func(format string, args ...any)
	version  string
	host     string    // brick host on loopback: a non-loopback address of this machine
	sys      *glusterd // the machine's glusterd
	seq      atomic.Int64
	// strictODirect sets performance.strict-o-direct on every volume, so
	// that O_DIRECT writes reach the bricks as mortar's do (by default
	// GlusterFS's write-behind takes them like buffered writes).
	strictODirect bool
}

// NewGlusterTarget returns the GlusterFS target; progress (may be nil)
// tells the person watching about a package installation.
func NewGlusterTarget(log *slog.Logger, progress func(format string, args ...any)) Target {
	if progress == nil {
		progress = func(string, ...any) {}
	}
	return &glusterTarget{log: log, progress: progress}
}

func (t *glusterTarget) Name() string { return "glusterfs" }

// StrictODirect makes a GlusterFS target honour O_DIRECT end to end
// (performance.strict-o-direct on); t must come from NewGlusterTarget.
func StrictODirect(t Target) {
	if g, ok := t.(*glusterTarget); ok {
		g.strictODirect = true
	}
}

// glusterPackages are the Debian packages the target needs.
var glusterPackages = []string{"glusterfs-server", "glusterfs-client"}

func (t *glusterTarget) Available(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("GlusterFS needs root (glusterd, mounts)")
	}
	if err := t.install(ctx); err != nil {
		return err
	}
	out, err := execOut(ctx, "glusterfs", "--version")
	if err != nil {
		return err
	}
	t.version = strings.SplitN(strings.TrimSpace(out), "\n", 2)[0]
	if t.host, err = brickHost(); err != nil {
		return err
	}
	if t.sys == nil {
		sys := &glusterd{}
		if _, err := sys.cli(ctx, "pool", "list"); err != nil {
			t.progress("glusterfs: starting glusterd")
			started, serr := startGlusterd(ctx, "", "")
			if serr != nil {
				// Another run may have started one meanwhile.
				if _, err := sys.cli(ctx, "pool", "list"); err != nil {
					return serr
				}
				started = sys
			}
			sys = started
		}
		t.sys = sys
	}
	t.removeStale(ctx)
	return nil
}

// install installs the packages if glusterd or mount.glusterfs is missing.
func (t *glusterTarget) install(ctx context.Context) error {
	_, e1 := exec.LookPath("glusterd")
	_, e2 := os.Stat("/sbin/mount.glusterfs")
	if e1 == nil && e2 == nil {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("glusterd is missing and there is no apt-get to install %s", strings.Join(glusterPackages, ", "))
	}
	t.progress("glusterfs: installing %s with apt-get", strings.Join(glusterPackages, " "))
	lock := "DPkg::Lock::Timeout=600"
	if _, err := execOut(ctx, "apt-get", "-o", lock, "update", "-qq"); err != nil {
		return fmt.Errorf("installing GlusterFS: %w", err)
	}
	cmd := append([]string{"-o", lock, "install", "-y", "-qq"}, glusterPackages...)
	if _, err := execIn(ctx, "", "env", append([]string{"DEBIAN_FRONTEND=noninteractive", "apt-get"}, cmd...)...); err != nil {
		return fmt.Errorf("installing GlusterFS: %w", err)
	}
	return nil
}

// brickHost is the host name bricks are created with: GlusterFS refuses
// localhost and 127.0.0.1, so the first non-loopback IPv4 address of this
// machine (as `hostname -I` would print), else its host name.
func brickHost() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				return ipn.IP.String(), nil
			}
		}
	}
	h, herr := os.Hostname()
	if herr != nil {
		return "", fmt.Errorf("no address for GlusterFS bricks: %v, %v", err, herr)
	}
	return h, nil
}

// removeStale stops and deletes volumes an interrupted earlier run left
// on the machine's glusterd: they are named mbench-PID-N, and PID is no
// longer running (a concurrent run's volumes are left alone).
func (t *glusterTarget) removeStale(ctx context.Context) {
	out, err := t.sys.cli(ctx, "volume", "list")
	if err != nil {
		return
	}
	for _, name := range strings.Fields(out) {
		f := strings.Split(name, "-")
		if len(f) != 3 || f[0] != "mbench" {
			continue
		}
		if _, err := os.Stat("/proc/" + f[1]); err != nil {
			t.log.Info("removing a GlusterFS volume left by an earlier run", "volume", name)
			t.sys.cli(ctx, "volume", "stop", name, "force")
			t.sys.cli(ctx, "volume", "delete", name)
		}
	}
}

// Close stops the machine's glusterd if this suite started it.
func (t *glusterTarget) Close() error {
	if t.sys == nil {
		return nil
	}
	err := t.sys.stop()
	t.sys = nil
	return err
}

// glusterd is one management daemon: started here (cmd set) or found
// running (cmd nil), in network namespace ns, with its CLI socket sock
// ("" = the default /var/run/glusterd.socket).
type glusterd struct {
	ns, sock, addr string
	cmd            *exec.Cmd
	done           chan struct{}
}

// startGlusterd runs `glusterd -N` in ns. With dir set it is a private
// instance: working directory, run directory, socket and log under dir.
func startGlusterd(ctx context.Context, ns, dir string) (*glusterd, error) {
	g := &glusterd{ns: ns}
	args := []string{"-N"}
	if dir != "" {
		for _, d := range []string{"lib", "run"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				return nil, err
			}
		}
		g.sock = filepath.Join(dir, "run", "glusterd.socket")
		args = append(args, "-l", filepath.Join(dir, "glusterd.log"),
			"--xlator-option", "management.working-directory="+filepath.Join(dir, "lib"),
			"--xlator-option", "management.run-directory="+filepath.Join(dir, "run"),
			"--xlator-option", "management.glusterd-sockfile="+g.sock)
	}
	g.cmd = nsCommand(ns, "glusterd", args...)
	var out strings.Builder
	g.cmd.Stdout, g.cmd.Stderr = &out, &out
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting glusterd: %w", err)
	}
	g.done = make(chan struct{})
	go func() { g.cmd.Wait(); close(g.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := g.cli(ctx, "pool", "list")
		if err == nil {
			return g, nil
		}
		select {
		case <-g.done:
			return nil, fmt.Errorf("glusterd exited at start: %s", lastLines(out.String(), 5))
		case <-ctx.Done():
			g.stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			g.stop()
			return nil, fmt.Errorf("glusterd not answering after 30s: %v", err)
		}
	}
}

// cli runs `gluster --mode=script ARGS` against this glusterd.
func (g *glusterd) cli(ctx context.Context, args ...string) (string, error) {
	pre := []string{"--mode=script"}
	if g.sock != "" {
		pre = append(pre, "--glusterd-sock="+g.sock)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return execIn(ctx, g.ns, "gluster", append(pre, args...)...)
}

// stop stops a glusterd started here; one found running is left alone.
func (g *glusterd) stop() error {
	if g.cmd == nil {
		return nil
	}
	err := stopProcess(g.cmd, g.done, 15*time.Second)
	g.cmd = nil
	return err
}

// Mount creates, starts and mounts a volume of the layout.
func (t *glusterTarget) Mount(ctx context.Context, work string, layout Layout, opts SetupOptions) (_ Mount, err error) {
	if opts.Encryption {
		return nil, Unsupported("GlusterFS 10 has no encryption translator")
	}
	m := &glusterMount{work: work, mnt: filepath.Join(work, "mnt"), version: t.version,
		name: fmt.Sprintf("mbench-%d-%d", os.Getpid(), t.seq.Add(1))}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if err := m.startNodes(ctx, t, opts.Net); err != nil {
		return nil, err
	}
	if err := m.create(ctx, layout, opts.NoClientCache); err != nil {
		return nil, err
	}
	if t.strictODirect {
		if _, err := m.nodes[0].cli(ctx, "volume", "set", m.name, "performance.strict-o-direct", "on"); err != nil {
			return nil, err
		}
		m.version += " (performance.strict-o-direct on)"
	}
	if err := m.mount(ctx, opts); err != nil {
		return nil, err
	}
	return m, nil
}

type glusterMount struct {
	work, mnt, version, name string
	nodes                    []*glusterd // nodes[0] runs the CLI; its addr serves the volfile
	own                      bool        // nodes were started for this mount
	clientNS                 string
	created                  bool
	noCache                  bool
}

func (m *glusterMount) Dir() string     { return m.mnt }
func (m *glusterMount) Version() string { return m.version }

// startNodes picks the machine's glusterd, or starts one private glusterd
// per server namespace and probes them into a pool.
func (m *glusterMount) startNodes(ctx context.Context, t *glusterTarget, ns *NetSetup) error {
	if ns == nil {
		if t.sys == nil {
			return errors.New("glusterfs target used before Available")
		}
		g := *t.sys
		g.addr = t.host
		g.cmd = nil // not ours to stop
		m.nodes = []*glusterd{&g}
		return nil
	}
	m.own, m.clientNS = true, ns.Client
	for i, sns := range ns.Servers {
		g, err := startGlusterd(ctx, sns, filepath.Join(m.work, "glusterd"+strconv.Itoa(i)))
		if err != nil {
			return fmt.Errorf("glusterd in namespace %s: %w", sns, err)
		}
		g.addr = hostOnly(ns.ServerAddrs[i])
		m.nodes = append(m.nodes, g)
	}
	for _, g := range m.nodes[1:] {
		if _, err := m.nodes[0].cli(ctx, "peer", "probe", g.addr); err != nil {
			return err
		}
	}
	return m.waitPeers(ctx)
}

// waitPeers waits until every probed peer is connected.
func (m *glusterMount) waitPeers(ctx context.Context) error {
	want := len(m.nodes) - 1
	deadline := time.Now().Add(60 * time.Second)
	for want > 0 {
		out, err := m.nodes[0].cli(ctx, "peer", "status")
		if err == nil && strings.Count(out, "Peer in Cluster (Connected)") >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GlusterFS peers not connected after 60s: %s %v", out, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}

// killBricks kills the brick processes of the volume by the pid files
// their glusterds keep, when stopping the volume failed.
func (m *glusterMount) killBricks() {
	for _, g := range m.nodes {
		run := "/var/run/gluster"
		if g.sock != "" {
			run = filepath.Dir(g.sock)
		}
		files, _ := filepath.Glob(filepath.Join(run, "vols", m.name, "*.pid"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func hostOnly(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// noCacheOptions turns GlusterFS's client-side caching translators off.
var noCacheOptions = []string{"performance.io-cache", "performance.read-ahead", "performance.write-behind",
	"performance.quick-read", "performance.stat-prefetch", "performance.open-behind"}

// create creates and starts the volume, bricks spread round-robin over
// the nodes.
func (m *glusterMount) create(ctx context.Context, layout Layout, noCache bool) error {
	dirs, err := makeBricks(m.work, layout.BrickCount())
	if err != nil {
		return err
	}
	args := append([]string{"volume", "create", m.name}, layout.Keywords()...)
	for i, b := range dirs {
		args = append(args, m.nodes[i%len(m.nodes)].addr+":"+b)
	}
	g := m.nodes[0]
	m.created = true // also when interrupted: the CLI may die after glusterd did it
	if _, err := g.cli(ctx, append(args, "force")...); err != nil {
		return err
	}
	if noCache {
		for _, o := range noCacheOptions {
			if _, err := g.cli(ctx, "volume", "set", m.name, o, "off"); err != nil {
				return err
			}
		}
	}
	_, err = g.cli(ctx, "volume", "start", m.name)
	return err
}

func (m *glusterMount) mount(ctx context.Context, opts SetupOptions) error {
	m.noCache = opts.NoClientCache
	return m.mountAt(ctx, m.mnt, "client.log")
}

// mountAt mounts the volume at dir (mount -t glusterfs, in the client's
// namespace), the client logging to the work directory's logName.
func (m *glusterMount) mountAt(ctx context.Context, dir, logName string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	o := "log-file=" + filepath.Join(m.work, logName)
	if m.noCache {
		// direct-io-mode=enable: no kernel page cache at all (GlusterFS keeps
		// it across opens by default, so rereads never crossed the network).
		o += ",attribute-timeout=0,entry-timeout=0,direct-io-mode=enable"
	}
	_, err := execIn(ctx, m.clientNS, "mount", "-t", "glusterfs", "-o", o, m.nodes[0].addr+":/"+m.name, dir)
	if err != nil {
		b, _ := os.ReadFile(filepath.Join(m.work, logName))
		return fmt.Errorf("%w (client log: %s)", err, lastLines(string(b), 4))
	}
	if !isMounted(dir) {
		return fmt.Errorf("mount -t glusterfs returned but %s is not mounted", dir)
	}
	return nil
}

// MountClient mounts the volume once more at dir, as another client
// (seed 004); closing the returned Mount unmounts only that one.
func (m *glusterMount) MountClient(ctx context.Context, dir string) (Mount, error) {
	if err := m.mountAt(ctx, dir, "client-"+filepath.Base(dir)+".log"); err != nil {
		return nil, err
	}
	return &extraClient{dir: dir, version: m.version}, nil
}

// Close unmounts, stops and deletes the volume and stops the glusterds
// started for it. The bricks (with GlusterFS's xattrs and .glusterfs)
// go with the work directory.
func (m *glusterMount) Close() error {
	var errs []error
	if err := unmount(m.mnt); err != nil {
		errs = append(errs, err)
	}
	ctx := context.Background()
	if len(m.nodes) > 0 && m.created {
		if err := m.deleteVolume(ctx); err != nil {
			errs = append(errs, err)
			m.killBricks()
		}
	}
	if m.own {
		for _, g := range m.nodes {
			if err := g.stop(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	m.nodes, m.created = nil, false
	return errors.Join(errs...)
}

// deleteVolume stops (whether or not it was started) and deletes the
// volume; one that does not exist (creation interrupted) is fine.
func (m *glusterMount) deleteVolume(ctx context.Context) error {
	g := m.nodes[0]
	if _, err := g.cli(ctx, "volume", "stop", m.name); err != nil {
		g.cli(ctx, "volume", "stop", m.name, "force")
	}
	out, err := g.cli(ctx, "volume", "delete", m.name)
	if err != nil && (strings.Contains(out, "does not exist") || strings.Contains(err.Error(), "does not exist")) {
		return nil
	}
	return err
}
