package brickrun

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/wire"
)

// hostLogName is the log file of a brick host's own messages, beside its
// bricks' logs.
const hostLogName = "brick-host.log"

// muxRunner runs every brick of the node in one brick host process, `EXE
// brick-host` (see RunHost), as GlusterFS's cluster.brick-multiplex
// does: one Go runtime instead of one per brick. The bricks fail together
// (a killed host takes every brick of the node down) and come back with
// "volume start NAME force", which starts a new host if the old one is
// gone.
//
// With keep (the server's default), the host outlives the node: it is
// started in a session of its own, the node leaves it serving when it
// closes, and a node starting finds it on its control socket and takes
// its bricks over (adopt) instead of starting them — a crash, restart or
// upgrade of the node does not interrupt I/O. Without, the host dies with
// the node (`mortar dev`, tests).
type muxRunner struct {
	proc *procRunner // the program, log directory and spawning thread
	sock string      // the host's control socket
	keep bool

	mu   sync.Mutex
	host *hostProc // nil: none connected
	next int
}

func newMuxRunner(proc *procRunner, dataDir string, keep bool) *muxRunner {
	// Brick numbers go on from where a host adopted from an earlier node
	// may have left them (bricks it was still opening are not listed).
	return &muxRunner{proc: proc, sock: hostSocket(dataDir), keep: keep, next: int(time.Now().UnixNano() / 1000)}
}

// hostSocket is the control socket of the brick host of the node whose
// data directory is dataDir: in it, unless the path is too long for a
// unix socket; then in /run/mortar (root) or a directory of the user's
// under the temporary directory, named after it.
func hostSocket(dataDir string) string {
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	p := filepath.Join(dataDir, "brick-host.sock")
	if len(p) < 100 {
		return p
	}
	sum := sha256.Sum256([]byte(dataDir))
	dir := "/run/mortar"
	if os.Geteuid() != 0 {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("mortar-%d", os.Geteuid()))
	}
	return filepath.Join(dir, "brick-host-"+hex.EncodeToString(sum[:8])+".sock")
}

// hostBusyWait bounds how long a node waits for a brick host to notice
// that the node before it (a process just killed) is gone.
const hostBusyWait = 5 * time.Second

// hostProc is the connection to one brick host process.
type hostProc struct {
	conn    net.Conn
	pid     int
	wire    uint32   // the wire protocol its bricks speak
	flags   []string // the hostFlags it knows
	logPath string

	inMu sync.Mutex
	enc  *json.Encoder

	mu       sync.Mutex
	bricks   map[int]*muxBrick
	adopted  map[string]*muxBrick // serving when the node connected, not yet taken over; by path
	listed   chan struct{}        // closed at the end of the list
	detached bool                 // the node let go of the host (keep)
	exited   chan struct{}
	err      error // how it ended; set before exited is closed
}

// muxBrick is a brick of a host.
type muxBrick struct {
	h      *hostProc
	id     int
	ready  chan hostEvent // its first event: listening, or why not
	listen string
	args   []string
	exited chan struct{}
	err    error // how it exited; set before exited is closed
}

func (r *muxRunner) Start(cfg Config) (Brick, error) {
	h, err := r.hostFor()
	if err != nil {
		return nil, err
	}
	args := h.known(Args(cfg, r.proc.logLevel)[1:])
	if b := h.takeOver(cfg.Path, args); b != nil {
		r.proc.log.Info("brick taken over from the running brick host", "volume", cfg.Volume, "path", cfg.Path, "pid", h.pid, "addr", b.listen)
		return b, nil
	}
	b, err := h.add(r.nextID())
	if err != nil {
		return nil, err
	}
	b.args = args
	cmd := hostCommand{Op: "start", ID: b.id, Args: args, Log: filepath.Join(r.proc.logDir, LogName(cfg.Path))}
	if err := h.send(cmd); err != nil {
		return nil, err
	}
	select {
	case e := <-b.ready:
		if e.Err != "" {
			return nil, errors.New(e.Err)
		}
		b.listen = e.Addr
	case <-h.exited:
		return nil, h.err
	case <-time.After(brickReadyTimeout):
		b.Kill()
		return nil, fmt.Errorf("brick did not listen within %v; see %s", brickReadyTimeout, cmd.Log)
	}
	r.proc.log.Debug("brick ready in brick host", "volume", cfg.Volume, "path", cfg.Path, "pid", h.pid, "addr", b.listen)
	return b, nil
}

func (r *muxRunner) nextID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	return r.next
}

// hostFor returns the connected host: one already running (its bricks
// to take over), or a new one.
func (r *muxRunner) hostFor() (*hostProc, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.host != nil {
		select {
		case <-r.host.exited:
		default:
			return r.host, nil
		}
	}
	h, err := r.connect()
	if err != nil {
		return nil, err
	}
	r.host = h
	for id := range h.bricks {
		r.next = max(r.next, id)
	}
	return h, nil
}

// connect connects to the running host, or starts one. A host whose
// bricks speak another wire protocol than this mortar (an upgrade that
// changed it) is shut down first: this version's clients could not reach
// them. r.mu is held.
func (r *muxRunner) connect() (*hostProc, error) {
	h, err := r.dialHost()
	switch {
	case err != nil:
		return nil, err
	case h == nil:
		return r.spawnHost()
	case h.wire != wire.Version:
		r.proc.log.Warn("the running brick host speaks another wire protocol: restarting it and its bricks",
			"pid", h.pid, "its", h.wire, "ours", wire.Version)
		h.shutdown()
		return r.spawnHost()
	}
	r.proc.log.Info("brick host found running", "pid", h.pid, "bricks", len(h.bricks), "socket", r.sock)
	return h, nil
}

// dialHost connects to the host serving on the socket, if one does (nil
// if none), waiting while it is busy with a node that just went away.
func (r *muxRunner) dialHost() (*hostProc, error) {
	deadline := time.Now().Add(hostBusyWait)
	for {
		c, err := net.Dial("unix", r.sock)
		if err != nil {
			return nil, nil
		}
		h, err := r.attach(c)
		if !errors.Is(err, errHostBusy) || time.Now().After(deadline) {
			return h, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// errHostBusy: the host has another node connected.
var errHostBusy = errors.New("the brick host serves another node")

// spawnHost starts a brick host process and connects to it.
func (r *muxRunner) spawnHost() (*hostProc, error) {
	if err := os.MkdirAll(filepath.Dir(r.sock), 0o700); err != nil {
		return nil, fmt.Errorf("brick host socket directory: %w", err)
	}
	logPath := filepath.Join(r.proc.logDir, hostLogName)
	args := []string{"brick-host", "--socket", r.sock, "--ready-fd", fmt.Sprint(brickReadyFd)}
	cmd, ready, err := r.proc.run(args, logPath, nil, r.keep)
	if err != nil {
		return nil, err
	}
	defer ready.Close()
	go cmd.Wait() //nolint:errcheck // reaped; the connection tells when it ended
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(io.LimitReader(ready, 64<<10)).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case msg := <-line:
		if !strings.HasPrefix(msg, readyOK) {
			cmd.Process.Kill() //nolint:errcheck // it may have exited already
			return nil, fmt.Errorf("brick host did not start (%q); its log: %s", msg, logPath)
		}
	case <-time.After(brickReadyTimeout):
		cmd.Process.Kill() //nolint:errcheck // it may have exited already
		return nil, fmt.Errorf("brick host did not listen within %v; its log: %s", brickReadyTimeout, logPath)
	}
	c, err := net.Dial("unix", r.sock)
	if err != nil {
		cmd.Process.Kill() //nolint:errcheck // it may have exited already
		return nil, fmt.Errorf("brick host control socket: %w", err)
	}
	h, err := r.attach(c)
	if err == nil {
		r.proc.log.Info("brick host started", "pid", h.pid, "log", logPath, "socket", r.sock)
	}
	return h, err
}

// attach takes the host on c: it learns its pid and the bricks it serves.
func (r *muxRunner) attach(c net.Conn) (*hostProc, error) {
	h := &hostProc{conn: c, logPath: filepath.Join(r.proc.logDir, hostLogName),
		enc: json.NewEncoder(c), bricks: map[int]*muxBrick{}, adopted: map[string]*muxBrick{},
		listed: make(chan struct{}), exited: make(chan struct{})}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var hello hostEvent
	c.SetReadDeadline(time.Now().Add(brickReadyTimeout)) //nolint:errcheck // a unix socket takes it
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &hello) != nil || hello.Pid == 0 && !hello.Busy {
		c.Close()
		return nil, fmt.Errorf("brick host on %s did not say who it is", r.sock)
	}
	c.SetReadDeadline(time.Time{}) //nolint:errcheck // as above
	if hello.Busy {
		c.Close()
		return nil, errHostBusy
	}
	h.pid, h.wire, h.flags = hello.Pid, hello.Wire, hello.Flags
	go h.listen(sc)
	if err := h.send(hostCommand{Op: "list"}); err != nil {
		return nil, err
	}
	select {
	case <-h.listed:
		return h, nil
	case <-h.exited:
		return nil, h.err
	case <-time.After(brickReadyTimeout):
		c.Close()
		return nil, fmt.Errorf("brick host did not list its bricks within %v; its log: %s", brickReadyTimeout, h.logPath)
	}
}

// takeOver returns the brick at path the host served when the node
// connected, if it is the brick args start: the same flags but for the
// log level and the address (a brick first started on port 0 listens on
// the port the node then kept), listening where args ask. One that is
// not (an option changed meanwhile) is stopped, to be started anew.
func (h *hostProc) takeOver(path string, args []string) *muxBrick {
	h.mu.Lock()
	b := h.adopted[path]
	delete(h.adopted, path)
	h.mu.Unlock()
	if b == nil {
		return nil
	}
	if sameBrick(b, args) {
		select {
		case <-b.exited:
			return nil
		default:
			return b
		}
	}
	b.Stop(StopTimeout)
	return nil
}

// known returns args without the hostFlags the host does not know: an
// older host kept across an upgrade serves its bricks as before (a
// replicated brick there marks nothing for the healer until the host is
// restarted) rather than fail to start them.
func (h *hostProc) known(args []string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if !slices.Contains(hostFlags, name) || slices.Contains(h.flags, name) {
			out = append(out, a)
		}
	}
	return out
}

// sameBrick reports whether b serves the brick args start.
func sameBrick(b *muxBrick, args []string) bool {
	host, port, _ := net.SplitHostPort(argValue(args, "--listen"))
	hasHost, hasPort, _ := net.SplitHostPort(b.listen)
	if port != "0" && port != hasPort || !sameHost(host, hasHost) {
		return false
	}
	return slices.Equal(withoutFlags(b.args, "--log-level", "--listen"), withoutFlags(args, "--log-level", "--listen"))
}

// sameHost reports whether a listener asked for host listens on has.
func sameHost(host, has string) bool {
	wildcard := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	if wildcard(host) || wildcard(has) {
		return wildcard(host) && wildcard(has)
	}
	return host == has
}

// withoutFlags returns the flags of a brick without the flags named (each
// with its value).
func withoutFlags(args []string, flags ...string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if slices.Contains(flags, args[i]) {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// argValue returns the value of flag in args ("" if absent).
func argValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// settle stops the bricks the host served when the node connected that
// the node did not take over (their volumes stopped or went meanwhile).
func (r *muxRunner) Settle() {
	r.mu.Lock()
	h := r.host
	if h == nil {
		if found, err := r.dialHost(); err == nil && found != nil {
			h, r.host = found, found
		}
	}
	r.mu.Unlock()
	if h == nil {
		return
	}
	h.mu.Lock()
	left := h.adopted
	h.adopted = map[string]*muxBrick{}
	h.mu.Unlock()
	for path, b := range left {
		r.proc.log.Info("stopping a brick the node no longer runs", "path", path)
		b.Stop(StopTimeout)
	}
}

// shutdown asks the host to close its bricks and exit, and kills it if
// it has not within StopTimeout.
func (h *hostProc) shutdown() {
	h.send(hostCommand{Op: "shutdown"}) //nolint:errcheck // a gone host is shut down
	select {
	case <-h.exited:
	case <-time.After(StopTimeout):
		h.killHost()
		<-h.exited
	}
}

// stopLeftoverHost shuts down a brick host left serving by an earlier
// node on dataDir, for a node that runs its bricks otherwise (one process
// per brick): the host's bricks would hold their ports.
func stopLeftoverHost(dataDir string, log *slog.Logger) {
	r := &muxRunner{sock: hostSocket(dataDir), proc: &procRunner{log: log}}
	h, err := r.dialHost()
	if err != nil || h == nil {
		return
	}
	log.Info("shutting down the brick host an earlier node left serving", "pid", h.pid)
	h.shutdown()
}

// add registers brick id before it is started; it fails with how the
// host ended if it has.
func (h *hostProc) add(id int) (*muxBrick, error) {
	b := &muxBrick{h: h, id: id, ready: make(chan hostEvent, 1), exited: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bricks == nil {
		<-h.exited // listen closes it right after taking the map
		return nil, h.err
	}
	h.bricks[id] = b
	return b, nil
}

// send writes one command to the host; an error means the host is gone.
func (h *hostProc) send(c hostCommand) error {
	h.inMu.Lock()
	err := h.enc.Encode(c)
	h.inMu.Unlock()
	if err != nil {
		h.conn.Close()
		<-h.exited
		return h.err
	}
	return nil
}

// listen hands the host's events (read by sc) to its bricks until the
// connection ends (the host exited, or the node let go of it), then ends
// every brick still there.
func (h *hostProc) listen(sc *bufio.Scanner) {
	for sc.Scan() {
		var e hostEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			h.event(e)
		}
	}
	h.conn.Close()
	h.mu.Lock()
	h.err = fmt.Errorf("brick host process %d ended; its log: %s", h.pid, h.logPath)
	if h.detached {
		h.err = errors.New("the node let go of its brick host")
	}
	left := h.bricks
	h.bricks = nil
	h.mu.Unlock()
	for _, b := range left {
		b.err = h.err
		close(b.exited)
	}
	close(h.exited)
}

// event delivers one event.
func (h *hostProc) event(e hostEvent) {
	if e.Listed {
		h.listedBrick(e)
		return
	}
	h.mu.Lock()
	b := h.bricks[e.ID]
	if b != nil && e.Addr == "" {
		delete(h.bricks, e.ID) // it failed to start, or exited
	}
	h.mu.Unlock()
	switch {
	case b == nil:
	case e.Addr != "" && b.listen != "": // listed already
	case e.Exited != "":
		if e.Exited != "stopped" {
			b.err = errors.New(e.Exited)
		}
		close(b.exited)
	case e.Err != "":
		b.err = errors.New(e.Err)
		b.ready <- e
		close(b.exited) // it never ran: nothing is left to wait for
	default:
		b.ready <- e
	}
}

// listedBrick records a brick the host serves (answer to "list").
func (h *hostProc) listedBrick(e hostEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.End {
		close(h.listed)
		return
	}
	b := &muxBrick{h: h, id: e.ID, listen: e.Addr, args: e.Args, ready: make(chan hostEvent, 1), exited: make(chan struct{})}
	h.bricks[e.ID] = b
	h.adopted[argValue(e.Args, "--path")] = b
}

// close releases the host: with keep it goes on serving its bricks (the
// node's stopAllBricks left them running); otherwise it shuts down, and
// is killed if it does not within StopTimeout.
func (r *muxRunner) Close() {
	r.mu.Lock()
	h := r.host
	r.host = nil
	r.mu.Unlock()
	defer r.proc.Close()
	if h == nil {
		return
	}
	if r.keep {
		h.mu.Lock()
		h.detached = true
		h.mu.Unlock()
		h.conn.Close()
		<-h.exited
		return
	}
	h.shutdown()
}

// keeps reports whether the node leaves its bricks serving when it
// closes.
func (r *muxRunner) Keeps() bool { return r.keep }

// killHost kills the host process.
func (h *hostProc) killHost() {
	if h.pid > 0 {
		syscall.Kill(h.pid, syscall.SIGKILL) //nolint:errcheck // it may have exited already
	}
	h.conn.Close()
}

func (b *muxBrick) Addr() string          { return b.listen }
func (b *muxBrick) PID() int              { return b.h.pid }
func (b *muxBrick) Done() <-chan struct{} { return b.exited }

func (b *muxBrick) ExitErr() error {
	select {
	case <-b.exited:
		return b.err
	default:
		return nil
	}
}

// stop closes the brick in its host; a host that does not answer within
// timeout is killed, with its other bricks.
func (b *muxBrick) Stop(timeout time.Duration) { b.end("stop", timeout) }

// kill closes the brick's listener, connections and storage at once, as
// a killed brick process would (its clients see their connections reset);
// the host and its other bricks go on.
func (b *muxBrick) Kill() { b.end("kill", StopTimeout) }

func (b *muxBrick) end(op string, timeout time.Duration) {
	if b.h.send(hostCommand{Op: op, ID: b.id}) != nil {
		<-b.exited
		return
	}
	select {
	case <-b.exited:
	case <-time.After(timeout):
		b.h.killHost()
		<-b.exited
	}
}

func (b *muxBrick) Recheck() {
	b.h.send(hostCommand{Op: "recheck", ID: b.id}) //nolint:errcheck // a gone host has no connections to check
}
