package brickrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/mortarfs/mortar/wire"
)

// A brick host is one process serving many bricks (`mortar brick-host`,
// GlusterFS's brick multiplexing): fewer processes compete for the CPU, at
// the price of failing together. Each brick keeps its own listener, port,
// TLS and access rules, as in a process of its own. The node drives the
// host over a unix socket, one connection at a time, one JSON object per
// line each way: hostCommand from the node, hostEvent back. The host
// serves its bricks whether a node is connected or not: a node that dies
// or restarts (an upgrade) finds them serving, lists them and takes them
// over, and the volumes' clients never notice.

// hostCommand is what the node asks of a brick host.
type hostCommand struct {
	// Op is "start", "stop", "kill" or "recheck" (of brick ID), "list"
	// (every brick serving) or "shutdown" (close every brick and exit).
	Op string `json:"op"`
	ID int    `json:"id"` // the brick, numbered by the node
	// Args are the flags of `mortar brick` (Args) for "start".
	Args []string `json:"args,omitempty"`
	// Log is the file the brick logs to, for "start".
	Log string `json:"log,omitempty"`
}

// hostFlags are the flags of `mortar brick` added since brick hosts
// outlive their node (see hostEvent.Flags); one with a value is passed
// as --name=value.
var hostFlags = []string{"--replicated", "--reserve", "--reserve-file", "--fence-file"}

// hostEvent is what a brick host tells the node: on connection, its Pid;
// of one brick, that it listens (Addr), could not start (Err) or has
// exited (Exited, the reason; after a start that succeeded); in answer to
// "list", each brick serving (Listed, with its Addr and Args), then End.
type hostEvent struct {
	ID     int    `json:"id"`
	Addr   string `json:"addr,omitempty"`
	Err    string `json:"err,omitempty"`
	Exited string `json:"exited,omitempty"`
	Pid    int    `json:"pid,omitempty"`
	Wire   uint32 `json:"wire,omitempty"` // with Pid: the wire protocol its bricks speak
	// Flags, with Pid: flags of `mortar brick` added since brick hosts
	// were first kept across upgrades that this host knows
	// (hostFlags); a node leaves the others out of what it asks of an
	// older host.
	Flags  []string `json:"flags,omitempty"`
	Busy   bool     `json:"busy,omitempty"` // instead of Pid: another node is connected
	Listed bool     `json:"listed,omitempty"`
	End    bool     `json:"end,omitempty"`
	Args   []string `json:"args,omitempty"`
}

// Parser turns the flags of `mortar brick` into a brick's config,
// logging to logPath.
type Parser func(args []string, logPath string) (Config, io.Closer, error)

// brickHost is the running state of RunHost.
type brickHost struct {
	parse    Parser
	outMu    sync.Mutex
	out      *json.Encoder // the node connected, nil if none
	cur      net.Conn
	mu       sync.Mutex
	bricks   map[int]*hostedBrick
	wg       sync.WaitGroup
	opening  int        // bricks being opened (a list waits for them); under mu
	openDone *sync.Cond // on mu: opening went down
}

// hostedBrick is one brick of a host, from its start command on.
type hostedBrick struct {
	sb     *Served // nil while it opens
	args   []string
	logs   io.Closer
	ended  bool // asked to stop or be killed (guarded by brickHost.mu)
	killed bool
}

// RunHost is the body of a brick host process: it serves the bricks
// the nodes connecting to ctl ask for, until one asks it to shut down or
// ctx is done, then closes every brick and returns once they have exited.
func RunHost(ctx context.Context, ctl net.Listener, parse Parser) error {
	h := &brickHost{parse: parse, bricks: map[int]*hostedBrick{}}
	h.openDone = sync.NewCond(&h.mu)
	conns := make(chan net.Conn)
	go acceptNodes(ctl, conns)
	lines := make(chan hostCommand)
	quit := make(chan struct{})
	defer close(quit)
	for done := false; !done; {
		select {
		case c, ok := <-conns:
			if !ok {
				return errors.New("brick host: control socket closed")
			}
			h.attach(c, lines, quit)
		case c := <-lines:
			done = c.Op == "shutdown"
			h.do(c)
		case <-ctx.Done():
			done = true
		}
	}
	ctl.Close()
	h.closeAll()
	h.wg.Wait()
	return nil
}

// acceptNodes hands every connection of ctl to conns until ctl is
// closed; other accept errors (out of descriptors) are waited out.
func acceptNodes(ctl net.Listener, conns chan<- net.Conn) {
	defer close(conns)
	for {
		c, err := ctl.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		conns <- c
	}
}

// attach makes c the node's connection and reads its commands into lines
// until it ends or quit is closed; while a node is connected, another is
// told the host is busy and let go (the node's own connection ends when
// its process does).
func (h *brickHost) attach(c net.Conn, lines chan<- hostCommand, quit <-chan struct{}) {
	h.outMu.Lock()
	defer h.outMu.Unlock()
	if h.cur != nil {
		json.NewEncoder(c).Encode(hostEvent{Busy: true}) //nolint:errcheck // it may be gone
		c.Close()
		return
	}
	h.cur, h.out = c, json.NewEncoder(c)
	h.out.Encode(hostEvent{Pid: os.Getpid(), Wire: wire.Version, Flags: hostFlags}) //nolint:errcheck // a node gone already reads nothing
	go func() {
		readCommands(c, lines, quit) //nolint:errcheck // a bad line ends the connection; the bricks go on
		h.detach(c)
	}()
}

// detach forgets the node's connection c once it ended.
func (h *brickHost) detach(c net.Conn) {
	c.Close()
	h.outMu.Lock()
	defer h.outMu.Unlock()
	if h.cur == c {
		h.cur, h.out = nil, nil
	}
}

// readCommands sends each command read from r to out until r ends or
// quit is closed.
func readCommands(r io.Reader, out chan<- hostCommand, quit <-chan struct{}) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var c hostCommand
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return fmt.Errorf("brick host: bad command %q: %w", sc.Text(), err)
		}
		select {
		case out <- c:
		case <-quit:
			return nil
		}
	}
	return sc.Err()
}

// tell sends e to the node connected, if any (a node that connects later
// lists the bricks).
func (h *brickHost) tell(e hostEvent) {
	h.outMu.Lock()
	defer h.outMu.Unlock()
	if h.out != nil {
		h.out.Encode(e) //nolint:errcheck // the node may be gone
	}
}

// list tells the node every brick serving, then the end of the list,
// once no brick is being opened. No other event goes out meanwhile: a
// brick's exit comes after its entry.
func (h *brickHost) list() {
	h.outMu.Lock()
	defer h.outMu.Unlock()
	h.mu.Lock()
	for h.opening > 0 {
		h.openDone.Wait()
	}
	var out []hostEvent
	for id, b := range h.bricks {
		if b.sb != nil && !b.ended {
			out = append(out, hostEvent{ID: id, Listed: true, Addr: b.sb.Addr(), Args: b.args})
		}
	}
	h.mu.Unlock()
	if h.out == nil {
		return
	}
	for _, e := range append(out, hostEvent{Listed: true, End: true}) {
		h.out.Encode(e) //nolint:errcheck // the node may be gone
	}
}

// do carries out one command. Starts and stops run on their own, so that
// a brick slow to open or to close does not hold up the others.
func (h *brickHost) do(c hostCommand) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.bricks[c.ID]
	switch {
	case c.Op == "list":
		go h.list()
	case c.Op == "start" && b == nil:
		b = &hostedBrick{args: c.Args}
		h.bricks[c.ID] = b
		h.opening++
		h.wg.Go(func() { h.start(c, b) })
	case c.Op == "start":
		go h.tell(hostEvent{ID: c.ID, Err: fmt.Sprintf("brick host: brick number %d is taken", c.ID)})
	case b == nil:
	case c.Op == "recheck" && b.sb != nil:
		b.sb.Recheck()
	case c.Op == "stop" || c.Op == "kill":
		b.killed = b.killed || c.Op == "kill"
		b.ended = true
		if b.sb != nil {
			go b.sb.Close() // serve tells the node once it has closed
		}
	}
}

// start opens and serves a brick, telling the node its address or why
// not. A brick asked to end while it opened is closed at once.
func (h *brickHost) start(c hostCommand, b *hostedBrick) {
	cfg, logs, err := h.parse(c.Args, c.Log)
	var sb *Served
	if err == nil {
		if sb, err = Open(cfg); err != nil {
			logs.Close()
		}
	}
	h.mu.Lock()
	h.opening--
	h.openDone.Broadcast()
	if err != nil {
		delete(h.bricks, c.ID)
		h.mu.Unlock()
		h.tell(hostEvent{ID: c.ID, Err: err.Error()})
		return
	}
	b.sb, b.logs = sb, logs
	ended := b.ended
	h.mu.Unlock()
	h.tell(hostEvent{ID: c.ID, Addr: sb.Addr()})
	if ended {
		sb.Close()
	}
	h.serve(c.ID, b)
}

// serve serves b until it is closed, then tells the node it exited.
func (h *brickHost) serve(id int, b *hostedBrick) {
	err := b.sb.Serve()
	if cerr := b.sb.Close(); err == nil {
		err = cerr
	}
	h.mu.Lock()
	delete(h.bricks, id)
	killed := b.killed
	h.mu.Unlock()
	why := "stopped"
	switch {
	case killed:
		why = errKilled.Error()
	case err != nil:
		why = err.Error()
	}
	b.sb.cfg.Logger.Info("brick exited", "why", why)
	b.logs.Close()
	h.tell(hostEvent{ID: id, Exited: why})
}

// closeAll asks every brick to end (each tells the node when it has).
func (h *brickHost) closeAll() {
	for id := range h.ids() {
		h.do(hostCommand{Op: "stop", ID: id})
	}
}

// ids returns the numbers of the bricks the host has.
func (h *brickHost) ids() map[int]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := map[int]bool{}
	for id := range h.bricks {
		ids[id] = true
	}
	return ids
}
