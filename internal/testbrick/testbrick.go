// Package testbrick runs real bricks on 127.0.0.1 for tests: posix
// storage behind the locks layer and a brick server, which a test can stop
// (as if the brick process were killed) and start again on the same port;
// and, for tests of one layer, a brick's storage alone (NewStore).
package testbrick

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer/locks"
	"github.com/mortarfs/mortar/layer/protocol"
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

// NewStore marks a fresh temporary directory as a brick of volume (with
// force, as New) and opens its storage alone, without a server; it is
// closed when the test ends.
func NewStore(t testing.TB, volume string) *posix.Store {
	t.Helper()
	dir := t.TempDir()
	if err := posix.Mark(dir, volume, true); err != nil {
		t.Fatal(err)
	}
	s, err := posix.New(dir, posix.Options{VolumeID: volume})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// New marks a fresh temporary directory as a brick of volume (with force:
// temporary directories are most likely on the root file system) and
// starts it; it is stopped when the test ends.
func New(t testing.TB, id, volume string, opts posix.Options) *Brick {
	t.Helper()
	b := &Brick{T: t, ID: id, Dir: t.TempDir(), Volume: volume, Opts: opts}
	if err := posix.Mark(b.Dir, volume, true); err != nil {
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

// Set is bricks of one volume, each behind a network client, as a replica
// or disperse set sees them.
type Set struct {
	T       testing.TB
	Bricks  []*Brick
	Clients []*protocol.Client
}

// NewSet starts n bricks of volume (opts gives brick i its storage
// options) and a client for each, and waits until they are connected.
func NewSet(t testing.TB, n int, volume string, opts func(i int) posix.Options) *Set {
	t.Helper()
	return newSet(t, n, volume, opts, false)
}

// NewLeasingSet is NewSet with clients that ask for directory leases
// (protocol.Config.DirLeases): a directory made through them leases its
// names to the client, as create-behind needs.
func NewLeasingSet(t testing.TB, n int, volume string, opts func(i int) posix.Options) *Set {
	t.Helper()
	return newSet(t, n, volume, opts, true)
}

func newSet(t testing.TB, n int, volume string, opts func(i int) posix.Options, leases bool) *Set {
	t.Helper()
	s := &Set{T: t}
	for i := 0; i < n; i++ {
		b := New(t, fmt.Sprintf("brick-%d", i), volume, opts(i))
		c := protocol.New(protocol.Config{Addr: b.Addr, BrickID: b.ID, VolumeID: volume,
			ConnectWait: 50 * time.Millisecond, DirLeases: leases})
		t.Cleanup(func() { c.Close() })
		s.Bricks = append(s.Bricks, b)
		s.Clients = append(s.Clients, c)
	}
	for i := range s.Clients {
		s.waitClient(i, true)
	}
	return s
}

// Name is how brick i is named to the layers ("addr:dir").
func (s *Set) Name(i int) string { return s.Bricks[i].Addr + ":" + s.Bricks[i].Dir }

// waitClient waits until the client of brick i is connected (or not).
func (s *Set) waitClient(i int, up bool) {
	s.T.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Clients[i].Connected() != up {
		if time.Now().After(deadline) {
			s.T.Fatalf("client of brick %d: connected is not %v after 10s", i, up)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Kill stops brick i and waits until its client has noticed.
func (s *Set) Kill(i int) {
	s.T.Helper()
	s.Bricks[i].Stop()
	s.waitClient(i, false)
}

// Revive starts brick i again on its port and waits for its client.
func (s *Set) Revive(i int) {
	s.T.Helper()
	s.Bricks[i].Start()
	s.waitClient(i, true)
}
