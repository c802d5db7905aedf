package mgmt

import (
	"errors"
	"sync"
	"time"
)

// brickRunner starts bricks: as child processes (procRunner, what `mortar
// server` uses) or inside the node (inProcRunner, for tests and
// embedding). The node does everything else the same way for both.
type brickRunner interface {
	// start starts a brick and returns once it listens, or with the
	// reason it could not start.
	start(cfg BrickConfig) (runningBrick, error)
	// settle runs once the node has started its volumes' bricks at its
	// start: a runner that found bricks serving from before the node
	// started (muxRunner with keep) stops those nobody took over.
	settle()
	// keeps reports whether the bricks go on serving when the node
	// closes (they are not stopped then, and a node starting takes them
	// over).
	keeps() bool
	// close releases the runner; every brick it started has exited,
	// unless it keeps them.
	close()
}

// runningBrick is a brick that start started.
type runningBrick interface {
	addr() string
	pid() int // 0 for a brick inside the node
	// done is closed once the brick has exited; exitErr then says how.
	done() <-chan struct{}
	exitErr() error
	// stop asks the brick to exit, forces it after timeout, and returns
	// once it has exited.
	stop(timeout time.Duration)
	// kill ends the brick at once, as SIGKILL does, and returns once it
	// has exited.
	kill()
	// recheck makes the brick read its access rules again and close the
	// connections they now refuse (SIGHUP to a brick process).
	recheck()
}

// errKilled is how an in-process brick ended by kill exits.
var errKilled = errors.New("brick killed")

// inProcRunner serves each brick in this process on its own listener.
type inProcRunner struct{}

func (inProcRunner) start(cfg BrickConfig) (runningBrick, error) {
	sb, err := OpenBrick(cfg)
	if err != nil {
		return nil, err
	}
	b := &inProcBrick{sb: sb, exited: make(chan struct{})}
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

func (inProcRunner) close()      {}
func (inProcRunner) settle()     {}
func (inProcRunner) keeps() bool { return false }

type inProcBrick struct {
	sb     *ServedBrick
	exited chan struct{}

	mu  sync.Mutex
	err error
}

func (b *inProcBrick) addr() string          { return b.sb.Addr() }
func (b *inProcBrick) pid() int              { return 0 }
func (b *inProcBrick) done() <-chan struct{} { return b.exited }

func (b *inProcBrick) exitErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *inProcBrick) recheck() { b.sb.Recheck() }

func (b *inProcBrick) stop(time.Duration) {
	b.sb.Close()
	<-b.exited
}

// kill closes the listener, every connection and the storage, so clients
// see their connections reset as when a brick process is killed.
func (b *inProcBrick) kill() {
	b.mu.Lock()
	if b.err == nil {
		b.err = errKilled
	}
	b.mu.Unlock()
	b.stop(0)
}
