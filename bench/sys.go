package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/internal/netlab"
)

// This file holds the operating-system helpers the targets and the
// experiments share: running commands (optionally in a network namespace),
// dropping caches, timing shell loops, mounts.

// Commands run as internal/netlab runs them: in a process group of their
// own (so a Ctrl-C on the terminal reaches the benchmark, which tears down
// in order), inside a network namespace when one is named.
var (
	nsCommand    = netlab.Command
	execIn       = netlab.Exec
	startAndWait = netlab.StartAndWait
	lastLines    = netlab.LastLines
)

// execOut runs a short command in the benchmark's own namespace.
func execOut(ctx context.Context, name string, args ...string) (string, error) {
	return execIn(ctx, "", name, args...)
}

// DropCaches writes back dirty pages and drops the page, dentry and inode
// caches, so that the next read comes from the bricks' disk (cold).
func DropCaches(ctx context.Context) error {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		return fmt.Errorf("dropping caches (needs root): %w", err)
	}
	return ctx.Err()
}

// timeShell runs script with sh in dir and returns how long it took.
func timeShell(ctx context.Context, dir, script string) (time.Duration, error) {
	cmd := nsCommand("", "sh", "-c", script)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := startAndWait(ctx, cmd)
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("sh -c %q in %s: %w: %s", shorten(script, 60), dir, err, lastLines(out.String(), 4))
	}
	return d, nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// isMounted reports whether dir is a mount point (per /proc/self/mounts).
func isMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	return bytes.Contains(b, []byte(" "+dir+" "))
}

// waitMounted polls /proc/self/mounts until dir is a mount point, and
// fails if done is closed first (the process that was to mount it
// exited), ctx ends or limit passes.
func waitMounted(ctx context.Context, dir string, done <-chan struct{}, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for !isMounted(dir) {
		select {
		case <-done:
			return fmt.Errorf("exited before %s was mounted", dir)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not mounted after %v", dir, limit)
		}
	}
	return nil
}

// canMountFUSE says why this process cannot make FUSE mounts, if it
// cannot: it needs root and /dev/fuse.
func canMountFUSE() error {
	if os.Geteuid() != 0 {
		return errors.New("mounting needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("FUSE is missing: %w", err)
	}
	return nil
}

// fileTail is the last n lines of the file at path (a log), "" if it
// cannot be read.
func fileTail(path string, n int) string {
	b, _ := os.ReadFile(path)
	return lastLines(string(b), n)
}

// unmountUnder lazily unmounts every mount below dir (left by a target
// whose tear-down failed), so that removing dir cannot reach into a
// mounted volume.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			syscall.Unmount(f[1], syscall.MNT_DETACH)
		}
	}
}

// unmount unmounts dir, lazily if a plain umount fails (busy or dead).
func unmount(dir string) error {
	if !isMounted(dir) {
		return nil
	}
	var err error
	for i := 0; i < 5; i++ {
		if err = syscall.Unmount(dir, 0); err == nil || errors.Is(err, syscall.EINVAL) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	if lerr := syscall.Unmount(dir, syscall.MNT_DETACH); lerr != nil {
		return fmt.Errorf("umount %s: %v; lazy umount: %w", dir, err, lerr)
	}
	return nil
}

// stopProcess sends SIGTERM to cmd's process and waits up to limit for
// exit (done is closed by whoever waits on cmd), then kills it.
func stopProcess(cmd *exec.Cmd, done <-chan struct{}, limit time.Duration) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not stop within %v of SIGTERM; killed", filepath.Base(cmd.Path), limit)
	}
}

// labelFor is the layout column of a target's rows: the local disk and
// FUSE passthrough have no layout; mortar-distribute has a distribute
// volume on the layout's bricks.
func labelFor(target string, l Layout) string {
	switch target {
	case "local":
		return "local disk"
	case FUSEPassthrough:
		return "FUSE passthrough"
	case MortarDistribute:
		return sameBricks(l).String()
	}
	return l.String()
}

// onLocalDisk says whether target keeps its files in one directory of the
// local disk, directly or through FUSE: it has no layouts, no servers and
// no network.
func onLocalDisk(target string) bool {
	return target == "local" || target == FUSEPassthrough
}

// measures says whether target measures layout at all (no row in the
// tables otherwise): mortar-distribute leaves distribute layouts to the
// mortar target.
func measures(target string, l Layout) bool {
	return target != MortarDistribute || l.Kind != "distribute"
}

// makeBricks makes the brick directories b1 ... bN under work and returns
// their paths.
func makeBricks(work string, n int) ([]string, error) {
	var dirs []string
	for i := 1; i <= n; i++ {
		b := filepath.Join(work, "b"+strconv.Itoa(i))
		if err := os.MkdirAll(b, 0o755); err != nil {
			return nil, err
		}
		dirs = append(dirs, b)
	}
	return dirs, nil
}

// eachLayout runs fn on every target for each layout in turn (target by
// target), through Runner.Each so set-up failures are recorded; the local
// and passthrough targets, which have no layouts, run once, with the
// first.
func eachLayout(ctx context.Context, r *Runner, layouts []Layout, opts SetupOptions,
	fn func(ctx context.Context, t Target, l Layout, m Mount) error) error {
	all := r.Targets
	defer func() { r.Targets = all }()
	for _, t := range all {
		ls := layouts
		if onLocalDisk(t.Name()) {
			ls = layouts[:1]
		}
		for _, l := range ls {
			r.Targets = []Target{t}
			err := r.Each(ctx, l, opts, func(ctx context.Context, t Target, m Mount) error {
				return fn(ctx, t, l, m)
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}
