package brickrun

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// brickReadyTimeout bounds how long a brick process may take to listen.
const brickReadyTimeout = 30 * time.Second

// brickReadyFd is the descriptor on which a brick process finds its
// readiness pipe (its first extra file).
const brickReadyFd = 3

// Args returns the arguments, after the program name, that run the
// brick cfg as a process: "brick" and the flags of `mortar brick`. The
// brick logs at logLevel and reports readiness on descriptor 3. TLS, when
// on, is passed as --tls-dir and --tls-name, and the access rules as
// --auth-file (or, fixed, --auth-allow and --auth-reject).
func Args(cfg Config, logLevel string) []string {
	args := []string{"brick",
		"--volume", cfg.Volume,
		"--volume-id", cfg.VolumeID,
		"--brick-id", cfg.BrickID,
		"--path", cfg.Path,
		"--listen", cfg.Listen,
		"--log-level", logLevel,
		"--ready-fd", strconv.Itoa(brickReadyFd),
	}
	if cfg.Arbiter {
		args = append(args, "--arbiter")
	}
	if cfg.Disperse {
		args = append(args, "--disperse")
	}
	if cfg.Replicated {
		args = append(args, "--replicated")
	}
	if cfg.Reserve != "" {
		args = append(args, "--reserve="+cfg.Reserve)
	}
	if cfg.ReserveFile != "" {
		args = append(args, "--reserve-file="+cfg.ReserveFile)
	}
	if cfg.FenceFile != "" {
		args = append(args, "--fence-file="+cfg.FenceFile)
	}
	dir, name := cfg.TLSDir, cfg.TLSName
	if cfg.TLS != nil && dir == "" && name == "" {
		dir, name = cfg.TLS.Dir(), cfg.TLS.Name()
	}
	if dir != "" || name != "" {
		args = append(args, "--tls-dir", dir, "--tls-name", name)
	}
	if cfg.AuthFile != "" {
		args = append(args, "--auth-file", cfg.AuthFile)
	} else if !cfg.Auth.Empty() {
		args = append(args, "--auth-allow", strings.Join(cfg.Auth.Allow, ","), "--auth-reject", strings.Join(cfg.Auth.Reject, ","))
	}
	if cfg.MaxConnsPerClient != 0 {
		args = append(args, "--max-conns-per-client", strconv.Itoa(cfg.MaxConnsPerClient))
	}
	return args
}

// procRunner runs every brick as a child process, `EXE brick ...`, as
// GlusterFS runs a glusterfsd per brick, so that one brick can fail (or be
// killed) alone. A brick process logs to LOGDIR/<path>.log and dies with
// SIGKILL when the node's process dies (Pdeathsig).
type procRunner struct {
	exe      string
	logDir   string
	logLevel string
	log      *slog.Logger
	spawns   chan spawnRequest
}

type spawnRequest struct {
	cmd *exec.Cmd
	err chan error
}

func newProcRunner(exe, logDir, logLevel string, log *slog.Logger) *procRunner {
	r := &procRunner{exe: exe, logDir: logDir, logLevel: logLevel, log: log, spawns: make(chan spawnRequest)}
	go r.spawnLoop()
	return r
}

// spawnLoop starts every brick process from one OS thread. Linux sends a
// child its Pdeathsig when the *thread* that forked it ends, not the
// process; the Go runtime may end an ordinary goroutine's thread at any
// time, which would kill bricks for nothing. This goroutine locks its
// thread and never unlocks it, so the thread lives until the process dies
// or close ends the loop, after every brick has exited.
func (r *procRunner) spawnLoop() {
	runtime.LockOSThread()
	for req := range r.spawns {
		req.err <- req.cmd.Start()
	}
}

func (r *procRunner) Close() { close(r.spawns) }

func (r *procRunner) Settle()     {}
func (r *procRunner) Keeps() bool { return false }

// run starts `EXE args...` from the spawning thread (see spawnLoop),
// logging to logPath, with stdin (if not nil) as its standard input and
// the write end of a pipe as descriptor brickReadyFd, and returns the
// pipe's read end. A detached process is in a session of its own and
// outlives the node; any other dies with it.
func (r *procRunner) run(args []string, logPath string, stdin io.Reader, detach bool) (*exec.Cmd, *os.File, error) {
	if err := os.MkdirAll(r.logDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("brick log directory: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("brick log: %w", err)
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer pw.Close()
	cmd := &exec.Cmd{
		Path:       r.exe,
		Args:       append([]string{r.exe}, args...),
		Stdin:      stdin,
		Stdout:     logf,
		Stderr:     logf,
		ExtraFiles: []*os.File{pw}, // brickReadyFd
		// Own process group: a Ctrl-C meant for the node does not reach
		// its bricks; the node stops them itself.
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true},
	}
	if detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	req := spawnRequest{cmd: cmd, err: make(chan error, 1)}
	r.spawns <- req
	if err := <-req.err; err != nil {
		pr.Close()
		return nil, nil, fmt.Errorf("start %s %s: %w", r.exe, args[0], err)
	}
	return cmd, pr, nil
}

func (r *procRunner) Start(cfg Config) (Brick, error) {
	logPath := filepath.Join(r.logDir, LogName(cfg.Path))
	cmd, pr, err := r.run(Args(cfg, r.logLevel), logPath, nil, false)
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	p := &procBrick{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go p.wait()
	if p.listen, err = p.awaitReady(pr); err != nil {
		return nil, err
	}
	r.log.Debug("brick process ready", "volume", cfg.Volume, "path", cfg.Path, "pid", p.PID(), "addr", p.listen, "log", logPath)
	return p, nil
}

// LogName names a brick's log file after its path, as GlusterFS
// does: /data/b1 logs to data-b1.log.
func LogName(path string) string {
	name := strings.ReplaceAll(strings.Trim(path, "/"), "/", "-")
	if name == "" {
		name = "root"
	}
	return name + ".log"
}

// procBrick is one brick process.
type procBrick struct {
	cmd     *exec.Cmd
	logPath string
	listen  string
	exited  chan struct{}
	err     error // how it exited; set before exited is closed
}

func (p *procBrick) wait() {
	p.cmd.Wait() //nolint:errcheck // ProcessState says it all
	p.err = fmt.Errorf("brick process %d ended (%s); its log: %s", p.PID(), p.cmd.ProcessState, p.logPath)
	close(p.exited)
}

// awaitReady reads the process's readiness line (see Run) and
// returns the address it listens on. A process that reports an error,
// exits without a word or takes too long is stopped.
func (p *procBrick) awaitReady(r io.Reader) (string, error) {
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(io.LimitReader(r, 64<<10)).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	var msg string
	select {
	case msg = <-line:
	case <-time.After(brickReadyTimeout):
		p.Kill()
		return "", fmt.Errorf("brick process did not listen within %v; see %s", brickReadyTimeout, p.logPath)
	}
	if addr, ok := strings.CutPrefix(msg, readyOK); ok {
		return addr, nil
	}
	p.Stop(StopTimeout)
	if why, ok := strings.CutPrefix(msg, readyError); ok {
		return "", errors.New(why)
	}
	return "", fmt.Errorf("%v before it listened", p.ExitErr())
}

func (p *procBrick) Addr() string          { return p.listen }
func (p *procBrick) PID() int              { return p.cmd.Process.Pid }
func (p *procBrick) Done() <-chan struct{} { return p.exited }

func (p *procBrick) ExitErr() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}

// stop sends SIGTERM, then SIGKILL after timeout.
func (p *procBrick) Stop(timeout time.Duration) {
	p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited already
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.Kill()
	}
}

func (p *procBrick) Kill() {
	p.cmd.Process.Kill() //nolint:errcheck // it may have exited already
	<-p.exited
}

func (p *procBrick) Recheck() {
	p.cmd.Process.Signal(syscall.SIGHUP) //nolint:errcheck // it may have exited already
}
