package mgmt

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// A brick host is one process serving many bricks (`mortar brick-host`,
// GlusterFS's brick multiplexing): fewer processes compete for the CPU, at
// the price of failing together. Each brick keeps its own listener, port,
// TLS and access rules, as in a process of its own. The node drives the
// host over two pipes, one JSON object per line: hostCommand from the node
// on the host's stdin, hostEvent back on its readiness descriptor.

// hostCommand is what the node asks of a brick host.
type hostCommand struct {
	Op string `json:"op"` // "start", "stop", "kill" or "recheck"
	ID int    `json:"id"` // the brick, numbered by the node
	// Args are the flags of `mortar brick` (BrickArgs) for "start".
	Args []string `json:"args,omitempty"`
	// Log is the file the brick logs to, for "start".
	Log string `json:"log,omitempty"`
}

// hostEvent is what a brick host tells the node of one brick: it listens
// (Addr), it could not start (Err), or it has exited (Exited, the reason;
// after a start that succeeded).
type hostEvent struct {
	ID     int    `json:"id"`
	Addr   string `json:"addr,omitempty"`
	Err    string `json:"err,omitempty"`
	Exited string `json:"exited,omitempty"`
}

// BrickParser turns the flags of `mortar brick` into a brick's config,
// logging to logPath.
type BrickParser func(args []string, logPath string) (BrickConfig, io.Closer, error)

// brickHost is the running state of RunBrickHost.
type brickHost struct {
	parse  BrickParser
	out    *json.Encoder
	outMu  sync.Mutex
	mu     sync.Mutex
	bricks map[int]*hostedBrick
	wg     sync.WaitGroup
}

// hostedBrick is one brick of a host, from its start command on.
type hostedBrick struct {
	sb     *ServedBrick // nil while it opens
	logs   io.Closer
	ended  bool // asked to stop or be killed (guarded by brickHost.mu)
	killed bool
}

// RunBrickHost is the body of a brick host process: it reads commands from
// cmds until it ends (the node is gone or done with it) or ctx is done,
// then closes every brick it serves and returns once they have exited.
func RunBrickHost(ctx context.Context, cmds io.Reader, events io.Writer, parse BrickParser) error {
	h := &brickHost{parse: parse, out: json.NewEncoder(events), bricks: map[int]*hostedBrick{}}
	lines := make(chan hostCommand)
	readErr := make(chan error, 1)
	go func() { readErr <- readCommands(cmds, lines) }()
	var err error
	for done := false; !done; {
		select {
		case c := <-lines:
			h.do(c)
		case err = <-readErr:
			done = true
		case <-ctx.Done():
			done = true
		}
	}
	h.closeAll()
	h.wg.Wait()
	return err
}

// readCommands sends each command read from r to out; nil at the end of r.
func readCommands(r io.Reader, out chan<- hostCommand) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var c hostCommand
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return fmt.Errorf("brick host: bad command %q: %w", sc.Text(), err)
		}
		out <- c
	}
	return sc.Err()
}

func (h *brickHost) tell(e hostEvent) {
	h.outMu.Lock()
	defer h.outMu.Unlock()
	h.out.Encode(e) //nolint:errcheck // the node may be gone; its end of the pipe closing ends us too
}

// do carries out one command. Starts and stops run on their own, so that
// a brick slow to open or to close does not hold up the others.
func (h *brickHost) do(c hostCommand) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.bricks[c.ID]
	switch {
	case c.Op == "start" && b == nil:
		b = &hostedBrick{}
		h.bricks[c.ID] = b
		h.wg.Go(func() { h.start(c, b) })
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
	var sb *ServedBrick
	if err == nil {
		if sb, err = OpenBrick(cfg); err != nil {
			logs.Close()
		}
	}
	if err != nil {
		h.mu.Lock()
		delete(h.bricks, c.ID)
		h.mu.Unlock()
		h.tell(hostEvent{ID: c.ID, Err: err.Error()})
		return
	}
	h.mu.Lock()
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
