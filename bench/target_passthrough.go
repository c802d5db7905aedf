package bench

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// FUSEPassthrough is the name of the target measuring FUSE alone: a
// directory of the local disk mounted through `mortar passthrough`.
const FUSEPassthrough = "fuse-passthrough"

// passthroughTarget mounts a directory of the work directory through
// `mortar passthrough` (go-fuse's loopback file system with mortar's kernel
// settings, the kernel's FUSE passthrough off): the same disk as the other
// targets' bricks with the kernel's FUSE boundary and nothing else in
// between, the ceiling any FUSE file system can reach here. Layouts mean
// nothing to it (its rows say "FUSE passthrough"); it has no network and
// no encryption. It honours NoClientCache (--no-cache).
type passthroughTarget struct {
	bin     string
	version string
}

// NewPassthroughTarget returns the FUSE passthrough target running the
// mortar binary bin.
func NewPassthroughTarget(bin string) Target { return &passthroughTarget{bin: bin} }

func (t *passthroughTarget) Name() string { return FUSEPassthrough }

func (t *passthroughTarget) Available(ctx context.Context) error {
	if err := canMountFUSE(); err != nil {
		return err
	}
	if _, err := execOut(ctx, t.bin, "passthrough", "--help"); err != nil {
		return fmt.Errorf("mortar binary %s has no passthrough command: %w", t.bin, err)
	}
	t.version = "go-fuse loopback (mortar passthrough), kernel FUSE passthrough off"
	if v := goFuseVersion(t.bin); v != "" {
		t.version = "go-fuse " + v + " loopback (mortar passthrough), kernel FUSE passthrough off"
	}
	return nil
}

// goFuseVersion is the go-fuse version the Go binary at path was built
// with, "" if it cannot be read.
func goFuseVersion(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/hanwen/go-fuse/v2" {
			return d.Version
		}
	}
	return ""
}

// Mount makes a backing directory and a mount point in work and mounts
// the one at the other with `mortar passthrough`, which logs to
// passthrough.log in work.
func (t *passthroughTarget) Mount(ctx context.Context, work string, layout Layout, opts SetupOptions) (Mount, error) {
	if opts.Encryption {
		return nil, Unsupported("FUSE passthrough does not encrypt (the FUSE ceiling, as the local disk is the baseline)")
	}
	m := &passthroughMount{t: t, work: work, backing: filepath.Join(work, "passthrough-data"), noCache: opts.NoClientCache}
	if err := os.MkdirAll(m.backing, 0o755); err != nil {
		return nil, err
	}
	p, err := m.start(ctx, filepath.Join(work, "mnt"), "passthrough.log")
	if err != nil {
		return nil, err
	}
	m.passthroughProc = p
	return m, nil
}

// passthroughMount is the target's mount; Close also removes the backing
// directory and the mount point.
type passthroughMount struct {
	*passthroughProc
	t             *passthroughTarget
	work, backing string
	noCache       bool
}

// MountClient mounts the backing directory once more at dir, by another
// `mortar passthrough` process (seed 004's clients: one FUSE server each,
// as mortar's); closing the returned Mount unmounts only that one.
func (m *passthroughMount) MountClient(ctx context.Context, dir string) (Mount, error) {
	return m.start(ctx, dir, "passthrough-"+filepath.Base(dir)+".log")
}

func (m *passthroughMount) Close() error {
	err := m.passthroughProc.Close()
	if isMounted(m.dir) {
		return err // never remove through a mount
	}
	return errors.Join(err, os.RemoveAll(m.dir), os.RemoveAll(m.backing))
}

// start runs `mortar passthrough` of the backing directory at dir, logging
// to logName in the work directory, and returns once dir is mounted.
func (m *passthroughMount) start(ctx context.Context, dir, logName string) (*passthroughProc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	log := filepath.Join(m.work, logName)
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := []string{"passthrough", m.backing, dir}
	if m.noCache {
		args = []string{"passthrough", "--no-cache", m.backing, dir}
	}
	p := &passthroughProc{dir: dir, version: m.t.version, cmd: nsCommand("", m.t.bin, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	err = p.cmd.Start()
	logf.Close()
	if err != nil {
		return nil, fmt.Errorf("starting mortar passthrough: %w", err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	if err := waitMounted(ctx, dir, p.done, 15*time.Second); err != nil {
		p.Close()
		return nil, fmt.Errorf("mortar passthrough: %w (log: %s)", err, fileTail(log, 5))
	}
	return p, nil
}

// passthroughProc is one `mortar passthrough` process and the mount it
// serves; Close stops it and unmounts.
type passthroughProc struct {
	dir, version string
	cmd          *exec.Cmd
	done         chan struct{} // closed when cmd has exited
}

func (p *passthroughProc) Dir() string     { return p.dir }
func (p *passthroughProc) Version() string { return p.version }

// Close sends SIGTERM (on which the process unmounts and exits), kills the
// process if it has not exited within 15 s, and unmounts what is left,
// lazily if need be.
func (p *passthroughProc) Close() error {
	return errors.Join(stopProcess(p.cmd, p.done, 15*time.Second), unmount(p.dir))
}
