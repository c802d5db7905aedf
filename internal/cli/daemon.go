package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A background mount re-executes the binary with the same arguments and
// daemonEnv set. The child (in its own session, stdio on the log file)
// mounts and writes "ok" or "error: why" to the pipe on descriptor 3; the
// parent waits for that and exits with the outcome.
const (
	daemonEnv    = "MORTAR_MOUNT_DAEMON"
	readyFd      = 3
	readyTimeout = 2 * time.Minute
)

// defaultMountLog is where a background mount of volume name at
// mountpoint logs.
func defaultMountLog(name, mountpoint string) string {
	dir := "/var/log/mortar"
	if os.Geteuid() != 0 {
		dir = filepath.Join(os.TempDir(), "mortar-"+strconv.Itoa(os.Geteuid()))
	}
	esc := strings.ReplaceAll(strings.Trim(mountpoint, "/"), "/", "-")
	if esc == "" {
		esc = "root"
	}
	return filepath.Join(dir, "mount-"+name+"-"+esc+".log")
}

// daemonReadyPipe returns the readiness pipe when this process is the
// background child of a mount.
func daemonReadyPipe() (*os.File, bool) {
	if os.Getenv(daemonEnv) == "" {
		return nil, false
	}
	os.Unsetenv(daemonEnv)
	return os.NewFile(readyFd, "mortar-ready"), true
}

// serveMountDaemon is the background child: it mounts, reports on pipe,
// and serves until unmounted. Its stderr is the log file.
func serveMountDaemon(req mountRequest, pipe *os.File) error {
	var once sync.Once
	ready := func(err error) {
		once.Do(func() {
			msg := "ok\n"
			if err != nil {
				msg = "error: " + err.Error() + "\n"
			}
			pipe.WriteString(msg) //nolint:errcheck // the parent may be gone
			pipe.Close()
		})
	}
	level := req.Opts.LogLevel
	if level == "" {
		level = "info"
	}
	log, err := newLogger(os.Stderr, level)
	if err != nil {
		ready(err)
		return err
	}
	// Like any daemon, hold no directory busy (req's paths are absolute).
	if err := os.Chdir("/"); err != nil {
		log.Warn("chdir / failed", "err", err)
	}
	err = mountAndServe(req, log, ready)
	ready(err) // in case mountAndServe failed before calling it
	return err
}

// startMountDaemon starts the background child and waits until it says
// whether the mount is live.
func startMountDaemon(req mountRequest) error {
	if err := os.MkdirAll(filepath.Dir(req.LogFile), 0o755); err != nil {
		return fmt.Errorf("log directory: %w", err)
	}
	logf, err := os.OpenFile(req.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        os.Args,
		Env:         append(os.Environ(), daemonEnv+"=1"),
		Stdin:       devnull,
		Stdout:      logf,
		Stderr:      logf,
		ExtraFiles:  []*os.File{w}, // descriptor 3 = readyFd
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("start mount process: %w", err)
	}
	if err := waitReady(r, cmd.Process, req.LogFile); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// waitReady reads the child's report. A child that exits without one, or
// takes too long (it is killed then), is an error naming the log file.
func waitReady(r io.Reader, p *os.Process, logFile string) error {
	type result struct {
		msg string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		data, err := io.ReadAll(io.LimitReader(r, 64<<10))
		ch <- result{strings.TrimSpace(string(data)), err}
	}()
	var res result
	select {
	case res = <-ch:
	case <-time.After(readyTimeout):
		p.Kill()
		return fmt.Errorf("the mount did not become ready within %v; see %s", readyTimeout, logFile)
	}
	switch {
	case res.err != nil:
		return fmt.Errorf("waiting for the mount process: %w", res.err)
	case res.msg == "ok":
		return nil
	case strings.HasPrefix(res.msg, "error: "):
		return errors.New(strings.TrimPrefix(res.msg, "error: "))
	}
	return fmt.Errorf("the mount process exited before the volume was mounted; see %s", logFile)
}
