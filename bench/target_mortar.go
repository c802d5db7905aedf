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
	"time"
)

// mortarTarget runs the real mortar binary: a `mortar server` child
// process per mount, a volume over bricks in the experiment's work
// directory, and a background `mortar mount`.
type mortarTarget struct {
	bin     string
	log     *slog.Logger
	version string
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
	if os.Geteuid() != 0 {
		return errors.New("mounting needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("FUSE is missing: %w", err)
	}
	out, err := execOut(ctx, t.bin, "version")
	if err != nil {
		return fmt.Errorf("mortar binary %s: %w", t.bin, err)
	}
	t.version = strings.TrimSpace(out)
	if c := binaryCommit(t.bin); c != "" {
		t.version += ", commit " + c
	}
	return nil
}

// Mount starts a server, creates and starts a volume of the layout
// (distribute, replicated or dispersed; always distribute for
// mortar-distribute) and mounts it. Everything started is stopped again
// if a later step fails.
func (t *mortarTarget) Mount(ctx context.Context, work string, layout Layout, opts SetupOptions) (_ Mount, err error) {
	if t.distribute {
		layout = sameBricks(layout)
	}
	switch {
	case opts.Encryption:
		return nil, Unsupported("encryption at rest is not implemented yet (issue 7)")
	case opts.Net != nil && len(opts.Net.Servers) > 1:
		return nil, Unsupported("clusters of more than one node are not implemented yet (peer probe)")
	}
	m := &mortarMount{t: t, work: work, mnt: filepath.Join(work, "mnt"), version: t.version}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if err := m.startServer(ctx, opts.Net); err != nil {
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
	t          *mortarTarget
	work, mnt  string
	version    string
	addr       string // host:port of the server
	serverNS   string // network namespace of the server ("" = ours)
	clientNS   string
	server     *exec.Cmd
	serverDone chan struct{}
	volume     string
	noCache    bool
}

func (m *mortarMount) Dir() string     { return m.mnt }
func (m *mortarMount) Version() string { return m.version }

// startServer runs `mortar server` and waits until it answers.
func (m *mortarMount) startServer(ctx context.Context, ns *NetSetup) error {
	if ns != nil {
		m.serverNS, m.clientNS = ns.Servers[0], ns.Client
		m.addr = hostPort(ns.ServerAddrs[0], 7420)
	} else {
		port, err := freePort()
		if err != nil {
			return err
		}
		m.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	logf, err := os.Create(filepath.Join(m.work, "server.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	m.server = nsCommand(m.serverNS, m.t.bin, "server", "--data", filepath.Join(m.work, "state"),
		"--listen", m.addr, "--log-level", "info")
	m.server.Stdout, m.server.Stderr = logf, logf
	if err := m.server.Start(); err != nil {
		return fmt.Errorf("starting mortar server: %w", err)
	}
	m.serverDone = make(chan struct{})
	go func() { m.server.Wait(); close(m.serverDone) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := m.cli(ctx, "volume", "list")
		if err == nil {
			return nil
		}
		select {
		case <-m.serverDone:
			m.server = nil
			return fmt.Errorf("mortar server exited at start: %s", m.logTail("server.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mortar server at %s not ready after 20s: %v", m.addr, err)
		}
	}
}

// hostPort adds port to addr unless it has one.
func hostPort(addr string, port int) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(port))
}

// cli runs a mortar management command against this mount's server, in
// the server's namespace.
func (m *mortarMount) cli(ctx context.Context, args ...string) (string, error) {
	return execIn(ctx, m.serverNS, m.t.bin, append(args, "--server", m.addr)...)
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
	_, err = m.cli(ctx, "volume", "start", m.volume)
	return err
}

// createArgs makes the brick directories b1 ... bN of the layout in the
// work directory and returns the `volume create` command for them, with
// GlusterFS's keywords ("disperse 6 redundancy 2 HOST:/b1 ... HOST:/b6").
func (m *mortarMount) createArgs(layout Layout) ([]string, error) {
	dirs, err := makeBricks(m.work, layout.BrickCount())
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(m.addr)
	args := append([]string{"volume", "create", m.volume}, layout.Keywords()...)
	for _, b := range dirs {
		args = append(args, host+":"+b)
	}
	return args, nil
}

func (m *mortarMount) mount(ctx context.Context, opts SetupOptions) error {
	m.noCache = opts.NoClientCache
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
	b, _ := os.ReadFile(filepath.Join(m.work, name))
	return lastLines(string(b), 5)
}

// Close unmounts (which ends the mount process) and stops the server.
func (m *mortarMount) Close() error {
	var errs []error
	if err := unmount(m.mnt); err != nil {
		errs = append(errs, err)
	}
	if m.server != nil {
		if err := stopProcess(m.server, m.serverDone, 15*time.Second); err != nil {
			errs = append(errs, err)
		}
		m.server = nil
	}
	return errors.Join(errs...)
}
