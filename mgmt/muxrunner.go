package mgmt

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// hostLogName is the log file of a brick host's own messages, beside its
// bricks' logs.
const hostLogName = "brick-host.log"

// muxRunner runs every brick of the node in one brick host process, `EXE
// brick-host` (see RunBrickHost), as GlusterFS's cluster.brick-multiplex
// does: one Go runtime instead of one per brick. The bricks fail together
// (a killed host takes every brick of the node down) and come back with
// "volume start NAME force", which starts a new host if the old one is
// gone.
type muxRunner struct {
	proc *procRunner // the program, log directory and spawning thread

	mu   sync.Mutex
	host *hostProc // nil: none running
	next int
}

func newMuxRunner(proc *procRunner) *muxRunner { return &muxRunner{proc: proc} }

// hostProc is one brick host process.
type hostProc struct {
	cmd     *exec.Cmd
	logPath string

	inMu sync.Mutex
	in   io.WriteCloser

	mu     sync.Mutex
	bricks map[int]*muxBrick
	exited chan struct{}
	err    error // how it exited; set before exited is closed
}

// muxBrick is a brick of a host.
type muxBrick struct {
	h      *hostProc
	id     int
	ready  chan hostEvent // its first event: listening, or why not
	listen string
	exited chan struct{}
	err    error // how it exited; set before exited is closed
}

func (r *muxRunner) start(cfg BrickConfig) (runningBrick, error) {
	h, id, err := r.hostFor()
	if err != nil {
		return nil, err
	}
	b, err := h.add(id)
	if err != nil {
		return nil, err
	}
	cmd := hostCommand{Op: "start", ID: id, Args: BrickArgs(cfg, r.proc.logLevel)[1:],
		Log: filepath.Join(r.proc.logDir, brickLogName(cfg.Path))}
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
		b.kill()
		return nil, fmt.Errorf("brick did not listen within %v; see %s", brickReadyTimeout, cmd.Log)
	}
	r.proc.log.Debug("brick ready in brick host", "volume", cfg.Volume, "path", cfg.Path, "pid", h.cmd.Process.Pid, "addr", b.listen)
	return b, nil
}

// hostFor returns the running host, starting one if there is none, and a
// new brick number.
func (r *muxRunner) hostFor() (*hostProc, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	if r.host != nil {
		select {
		case <-r.host.exited:
		default:
			return r.host, r.next, nil
		}
	}
	h, err := r.spawnHost()
	if err != nil {
		return nil, 0, err
	}
	r.host = h
	return h, r.next, nil
}

// spawnHost starts a brick host process.
func (r *muxRunner) spawnHost() (*hostProc, error) {
	logPath := filepath.Join(r.proc.logDir, hostLogName)
	stdin, in, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer stdin.Close()
	cmd, events, err := r.proc.run([]string{"brick-host", "--events-fd", fmt.Sprint(brickReadyFd)}, logPath, stdin)
	if err != nil {
		in.Close()
		return nil, err
	}
	h := &hostProc{cmd: cmd, logPath: logPath, in: in, bricks: map[int]*muxBrick{}, exited: make(chan struct{})}
	go h.listen(events)
	r.proc.log.Info("brick host started", "pid", cmd.Process.Pid, "log", logPath)
	return h, nil
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
	line, err := json.Marshal(c)
	if err != nil {
		return err
	}
	h.inMu.Lock()
	defer h.inMu.Unlock()
	if _, err := h.in.Write(append(line, '\n')); err != nil {
		<-h.exited
		return h.err
	}
	return nil
}

// listen hands the host's events to its bricks until the host exits, then
// ends every brick still there with the host's exit.
func (h *hostProc) listen(events io.ReadCloser) {
	defer events.Close()
	sc := bufio.NewScanner(events)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e hostEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			h.event(e)
		}
	}
	io.Copy(io.Discard, events) //nolint:errcheck // until the host is gone: its writes must not block
	h.cmd.Wait()                //nolint:errcheck // ProcessState says it all
	h.inMu.Lock()
	h.in.Close()
	h.inMu.Unlock()
	h.err = fmt.Errorf("brick host process %d ended (%s); its log: %s", h.cmd.Process.Pid, h.cmd.ProcessState, h.logPath)
	h.mu.Lock()
	left := h.bricks
	h.bricks = nil
	h.mu.Unlock()
	for _, b := range left {
		b.err = h.err
		close(b.exited)
	}
	close(h.exited)
}

// event delivers one event to its brick.
func (h *hostProc) event(e hostEvent) {
	h.mu.Lock()
	b := h.bricks[e.ID]
	if b != nil && e.Addr == "" {
		delete(h.bricks, e.ID) // it failed to start, or exited
	}
	h.mu.Unlock()
	switch {
	case b == nil:
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

// close ends the host: it closes its bricks when its stdin ends.
func (r *muxRunner) close() {
	r.mu.Lock()
	h := r.host
	r.host = nil
	r.mu.Unlock()
	defer r.proc.close()
	if h == nil {
		return
	}
	h.inMu.Lock()
	h.in.Close()
	h.inMu.Unlock()
	select {
	case <-h.exited:
	case <-time.After(brickStopTimeout):
		h.cmd.Process.Kill() //nolint:errcheck // it may have exited already
		<-h.exited
	}
}

func (b *muxBrick) addr() string          { return b.listen }
func (b *muxBrick) pid() int              { return b.h.cmd.Process.Pid }
func (b *muxBrick) done() <-chan struct{} { return b.exited }

func (b *muxBrick) exitErr() error {
	select {
	case <-b.exited:
		return b.err
	default:
		return nil
	}
}

// stop closes the brick in its host; a host that does not answer within
// timeout is killed, with its other bricks.
func (b *muxBrick) stop(timeout time.Duration) { b.end("stop", timeout) }

// kill closes the brick's listener, connections and storage at once, as
// a killed brick process would (its clients see their connections reset);
// the host and its other bricks go on.
func (b *muxBrick) kill() { b.end("kill", brickStopTimeout) }

func (b *muxBrick) end(op string, timeout time.Duration) {
	if b.h.send(hostCommand{Op: op, ID: b.id}) != nil {
		<-b.exited
		return
	}
	select {
	case <-b.exited:
	case <-time.After(timeout):
		b.h.cmd.Process.Kill() //nolint:errcheck // it may have exited already
		<-b.exited
	}
}

func (b *muxBrick) recheck() {
	b.h.send(hostCommand{Op: "recheck", ID: b.id}) //nolint:errcheck // a gone host has no connections to check
}
