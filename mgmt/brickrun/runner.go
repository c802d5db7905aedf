package brickrun

import (
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Processes returns the Runner of a node that runs its bricks outside
// itself, by running exe (`mortar` or a test binary; see Args), with
// their logs in logDir: with multiplex, all in one brick host, whose
// control socket is in dataDir and which, with keep, serves on when the
// node stops and is taken over when it starts again; without, each in a
// process of its own (a brick host left by an earlier node is stopped
// first: its bricks would hold their ports).
func Processes(exe, logDir, logLevel, dataDir string, multiplex, keep bool, log *slog.Logger) Runner {
	proc := newProcRunner(exe, logDir, logLevel, log)
	if multiplex {
		return newMuxRunner(proc, dataDir, keep)
	}
	stopLeftoverHost(dataDir, log)
	return proc
}

// StopTimeout is how long a brick may take to exit after SIGTERM before
// it gets SIGKILL.
const StopTimeout = 5 * time.Second

// Runner starts bricks: all in one brick host process or each in a child
// process of its own (Processes), or inside the node (InProc, for tests
// and embedding). The node does everything else the same way for all.
type Runner interface {
	// Start starts a brick and returns once it listens, or with the
	// reason it could not start.
	Start(cfg Config) (Brick, error)
	// Settle runs once the node has started its volumes' bricks at its
	// start: a runner that found bricks serving from before the node
	// started (muxRunner with keep) stops those nobody took over.
	Settle()
	// Keeps reports whether the bricks go on serving when the node
	// closes (they are not stopped then, and a node starting takes them
	// over).
	Keeps() bool
	// Close releases the runner; every brick it started has exited,
	// unless it keeps them.
	Close()
}

// Brick is a brick a Runner started.
type Brick interface {
	Addr() string
	PID() int // 0 for a brick inside the node
	// Done is closed once the brick has exited; ExitErr then says how.
	Done() <-chan struct{}
	ExitErr() error
	// Stop asks the brick to exit, forces it after timeout, and returns
	// once it has exited.
	Stop(timeout time.Duration)
	// Kill ends the brick at once, as SIGKILL does, and returns once it
	// has exited.
	Kill()
	// Recheck makes the brick read its access rules again and close the
	// connections they now refuse (SIGHUP to a brick process).
	Recheck()
}

// errKilled is how an in-process brick ended by Kill exits.
var errKilled = errors.New("brick killed")

// InProc serves each brick in this process on its own listener.
type InProc struct{}

func (InProc) Start(cfg Config) (Brick, error) {
	sb, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	b := &InProcBrick{sb: sb, exited: make(chan struct{})}
	go func() {
		err := sb.Serve()
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
		close(b.exited)
	}()
	return b, nil
}

func (InProc) Close()      {}
func (InProc) Settle()     {}
func (InProc) Keeps() bool { return false }

// InProcBrick is a brick InProc serves in this process.
type InProcBrick struct {
	sb     *Served
	exited chan struct{}

	mu  sync.Mutex
	err error
}

func (b *InProcBrick) Addr() string { return b.sb.Addr() }
func (b *InProcBrick) PID() int     { return 0 }

// Config is what the brick was started with.
func (b *InProcBrick) Config() Config        { return b.sb.cfg }
func (b *InProcBrick) Done() <-chan struct{} { return b.exited }

func (b *InProcBrick) ExitErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *InProcBrick) Recheck() { b.sb.Recheck() }

func (b *InProcBrick) Stop(time.Duration) {
	b.sb.Close()
	<-b.exited
}

// Kill closes the listener, every connection and the storage, so clients
// see their connections reset as when a brick process is killed.
func (b *InProcBrick) Kill() {
	b.mu.Lock()
	if b.err == nil {
		b.err = errKilled
	}
	b.mu.Unlock()
	b.Stop(0)
}
