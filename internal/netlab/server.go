package netlab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultPort is the port a lab's servers listen on (mortar's default).
const DefaultPort = 7420

// ServerConfig says how to run `mortar server`.
type ServerConfig struct {
	// Bin is the mortar binary.
	Bin string
	// DataDir is the server's --data. Host.StartServer defaults it to
	// Lab.Dir/h<i>/state.
	DataDir string
	// Port is the port of --listen; default DefaultPort.
	Port int
	// LogFile receives the server's stdout and stderr, appended across
	// restarts; default DataDir + ".log".
	LogFile string
	// LogLevel is --log-level; default "info".
	LogLevel string
	// Args are more flags for `mortar server`.
	Args []string
	// Ready bounds the wait for the API to answer; default 20 s.
	Ready time.Duration
}

// Server is a `mortar server` process in a namespace, which can be
// stopped, killed and started again on the same data and address.
type Server struct {
	// NS is the namespace the server runs in ("" = the caller's).
	NS string
	// Addr is the server's --listen, host:port.
	Addr string

	cfg ServerConfig

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	err  error         // cmd's exit, once done is closed
}

// NewServer returns a server to run in namespace ns ("" = the caller's),
// listening on host (an address of that namespace) at cfg.Port. It is
// not started.
func NewServer(ns, host string, cfg ServerConfig) (*Server, error) {
	if cfg.Bin == "" || cfg.DataDir == "" {
		return nil, errors.New("netlab: a server needs Bin and DataDir")
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.LogFile == "" {
		cfg.LogFile = filepath.Clean(cfg.DataDir) + ".log"
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "info"
	}
	if cfg.Ready == 0 {
		cfg.Ready = 20 * time.Second
	}
	return &Server{NS: ns, Addr: net.JoinHostPort(host, strconv.Itoa(cfg.Port)), cfg: cfg}, nil
}

// StartServer starts `mortar server` on h (see Server.Start) and keeps it:
// Stop, Kill, Restart and Lab.Close act on it.
func (h *Host) StartServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	if h.Index < 0 {
		return nil, errors.New("netlab: servers run on hosts, not on the client")
	}
	if h.Server() != nil {
		return nil, fmt.Errorf("netlab: host %d has a server already", h.Index)
	}
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(h.lab.Dir, "h"+strconv.Itoa(h.Index), "state")
	}
	s, err := NewServer(h.Name, h.Addr, cfg)
	if err != nil {
		return nil, err
	}
	h.lab.mu.Lock()
	h.server = s
	h.lab.mu.Unlock()
	return s, s.Start(ctx)
}

// Start runs the server and returns once its API answers GET /v1/node
// with 200, or with the end of its log if it exits first or does not
// answer within cfg.Ready.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return fmt.Errorf("netlab: server %s is running", s.Addr)
	}
	if err := os.MkdirAll(filepath.Dir(s.cfg.LogFile), 0o755); err != nil {
		s.mu.Unlock()
		return err
	}
	logf, err := os.OpenFile(s.cfg.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	fmt.Fprintf(logf, "--- netlab: starting mortar server at %s\n", time.Now().Format(time.RFC3339Nano))
	args := []string{"server", "--data", s.cfg.DataDir, "--listen", s.Addr, "--log-level", s.cfg.LogLevel}
	if hasFlag(s.cfg.Bin, "server", "--keep-bricks") {
		// The bricks die with the server, which dies with this process:
		// a test killed by its timeout leaves no server or brick behind
		// (a later flag in Args may say otherwise).
		args = append(args, "--keep-bricks=false")
	}
	args = append(args, s.cfg.Args...)
	cmd := Command(s.NS, s.cfg.Bin, args...)
	// nsenter execs the binary, which keeps the signal.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.Stdout, cmd.Stderr = logf, logf
	err = startFromLockedThread(cmd)
	logf.Close()
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("starting mortar server: %w", err)
	}
	done := make(chan struct{})
	s.cmd, s.done = cmd, done
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(done)
	}()
	s.mu.Unlock()
	return s.waitReady(ctx, done)
}

var spawner struct {
	once sync.Once
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd *exec.Cmd
	err chan error
}

// startFromLockedThread starts cmd from one OS thread that lives as long
// as this process. Linux sends a child its Pdeathsig when the *thread*
// that forked it ends, not the process, and the Go runtime ends a thread
// whenever a goroutine that locked it returns (as InNetns's do): a server
// forked from such a thread would be killed for nothing.
func startFromLockedThread(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives on
			for req := range spawner.reqs {
				req.err <- req.cmd.Start()
			}
		}()
	})
	req := spawnRequest{cmd: cmd, err: make(chan error, 1)}
	spawner.reqs <- req
	return <-req.err
}

// waitReady polls GET /v1/node from the server's namespace: a starting
// process has no event to wait on.
func (s *Server) waitReady(ctx context.Context, done <-chan struct{}) error {
	hc := HTTPClientIn(s.NS, 2*time.Second)
	deadline := time.Now().Add(s.cfg.Ready)
	url := "http://" + s.Addr + "/v1/node"
	for {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /v1/node: %s", resp.Status)
		}
		select {
		case <-done:
			s.reap()
			s.mu.Lock()
			exit := s.err
			s.mu.Unlock()
			return fmt.Errorf("mortar server at %s exited at start (%v): %s", s.Addr, exit, s.LogTail(8))
		case <-ctx.Done():
			s.Kill()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("mortar server at %s not ready after %v: %v: %s", s.Addr, s.cfg.Ready, err, s.LogTail(8))
		}
	}
}

// reap forgets an exited process.
func (s *Server) reap() {
	s.mu.Lock()
	s.cmd = nil
	s.mu.Unlock()
}

// Running reports whether the server process runs.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// PID is the server's process id, 0 when it does not run.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop sends SIGTERM and waits up to limit for the server to exit (it
// stops its bricks), then kills it. A server that does not run is fine.
func (s *Server) Stop(limit time.Duration) error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	defer s.reap()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(limit):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("mortar server at %s did not stop within %v of SIGTERM; killed", s.Addr, limit)
	}
}

// Kill SIGKILLs the server's process group and waits for it. Its bricks
// die with it (their parent-death signal), a little later: Host.Kill
// waits for them too.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	s.reap()
	return nil
}

// Exited is closed when the current server process exits (nil if none
// runs).
func (s *Server) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	return s.done
}

// LogFile is the file the server's output goes to.
func (s *Server) LogFile() string { return s.cfg.LogFile }

// DataDir is the server's --data.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	b, _ := os.ReadFile(s.cfg.LogFile)
	return LastLines(string(b), n)
}

// Stop stops h's server with SIGTERM (see Server.Stop), waiting up to
// limit.
func (h *Host) Stop(limit time.Duration) error {
	s := h.Server()
	if s == nil {
		return fmt.Errorf("netlab: host %d runs no server", h.Index)
	}
	return s.Stop(limit)
}

// Kill kills every process of host h with SIGKILL (its server and the
// server's bricks), as a power cut would, and waits until they are gone,
// so that a Restart finds the ports free.
func (h *Host) Kill() error {
	if s := h.Server(); s != nil {
		s.Kill()
	}
	ctx, cancel := context.WithTimeout(context.Background(), CmdLimit)
	defer cancel()
	killAndWait(ctx, nsPIDs(ctx, h.Name))
	if ctx.Err() != nil {
		return fmt.Errorf("netlab: processes of host %d still there after %v", h.Index, CmdLimit)
	}
	return nil
}

// Restart starts h's server again on the same data directory and address
// (stopping it first with SIGTERM if it runs), and waits until it answers.
func (h *Host) Restart(ctx context.Context) error {
	s := h.Server()
	if s == nil {
		return fmt.Errorf("netlab: host %d runs no server", h.Index)
	}
	if err := s.Stop(10 * time.Second); err != nil {
		return err
	}
	return s.Start(ctx)
}

var flagsSeen sync.Map // "bin command flag" -> bool

// hasFlag reports whether `bin command --help` lists flag: a benchmark
// may run an older mortar.
func hasFlag(bin, command, flag string) bool {
	key := bin + " " + command + " " + flag
	if v, ok := flagsSeen.Load(key); ok {
		return v.(bool)
	}
	out, _ := exec.Command(bin, command, "--help").CombinedOutput()
	has := strings.Contains(string(out), flag)
	flagsSeen.Store(key, has)
	return has
}
