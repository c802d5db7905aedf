// Package testbrick runs real bricks on 127.0.0.1 for tests: posix
// storage behind the locks layer and a brick server, which a test can stop
// (as if the brick process were killed) and start again on the same port.
package testbrick

import (
	"net"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer/locks"
)

// Brick is one brick served on 127.0.0.1.
type Brick struct {
	T      testing.TB
	ID     string
	Dir    string
	Volume string
	Opts   posix.Options // VolumeID is set from Volume
	Addr   string        // set by the first Start, kept by the next ones

	ln    net.Listener
	srv   *brick.Server
	Store *posix.Store // the storage while started
}

// New marks a fresh temporary directory as a brick of volume and starts
// it; it is stopped when the test ends.
func New(t testing.TB, id, volume string, opts posix.Options) *Brick {
	t.Helper()
	b := &Brick{T: t, ID: id, Dir: t.TempDir(), Volume: volume, Opts: opts}
	if err := posix.Mark(b.Dir, volume, false); err != nil {
		t.Fatal(err)
	}
	b.Start()
	t.Cleanup(b.Stop)
	return b
}

// Start serves the brick (again, on the same port).
func (b *Brick) Start() {
	b.T.Helper()
	opts := b.Opts
	opts.VolumeID = b.Volume
	st, err := posix.New(b.Dir, opts)
	if err != nil {
		b.T.Fatal(err)
	}
	addr := b.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	for i := 0; ; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil || i == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond) // the old socket may linger briefly
	}
	if err != nil {
		b.T.Fatal(err)
	}
	b.Store, b.ln, b.Addr = st, ln, ln.Addr().String()
	b.srv = brick.NewServer(nil)
	b.srv.Add(b.ID, b.Volume, locks.New(st))
	go b.srv.Serve(ln)
}

// Stop kills the brick: listener and connections closed at once.
func (b *Brick) Stop() {
	if b.srv == nil {
		return
	}
	b.ln.Close()
	b.srv.Close()
	b.Store.Close()
	b.srv = nil
}

// Running reports whether the brick is started.
func (b *Brick) Running() bool { return b.srv != nil }
