package brickrun

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/wire"
)

// testHost is a RunHost driven over its control socket, as the node
// drives a brick host process.
type testHost struct {
	t      *testing.T
	sock   string
	conn   net.Conn
	events *json.Decoder
	ended  chan error
}

// hostParse reads "path brick-id" as a brick of volume "v" on a free port.
func hostParse(args []string, logPath string) (Config, io.Closer, error) {
	if len(args) != 2 {
		return Config{}, nil, errors.New("want PATH BRICK-ID")
	}
	return Config{Volume: "v", VolumeID: "v", Path: args[0], BrickID: args[1], Listen: "127.0.0.1:0"}, io.NopCloser(nil), nil
}

func startTestHost(t *testing.T) *testHost {
	sock := filepath.Join(t.TempDir(), "h.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	h := &testHost{t: t, sock: sock, ended: make(chan error, 1)}
	go func() { h.ended <- RunHost(context.Background(), ln, hostParse) }()
	h.connect()
	t.Cleanup(func() {
		h.conn.Write([]byte(`{"op":"shutdown"}` + "\n")) //nolint:errcheck // a host shut down already reads nothing
		<-h.ended
	})
	return h
}

// connect (again) to the host, as a node starting does: while the host
// has not yet seen the last node's connection end, it says it is busy.
func (h *testHost) connect() {
	h.t.Helper()
	for {
		c, err := net.Dial("unix", h.sock)
		if err != nil {
			h.t.Fatal(err)
		}
		h.conn, h.events = c, json.NewDecoder(c)
		e := h.next()
		if e.Busy {
			c.Close()
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if e.Pid != os.Getpid() || e.Wire != wire.Version {
			h.t.Fatalf("first event %+v, want the host's pid and wire protocol", e)
		}
		return
	}
}

func (h *testHost) send(c hostCommand) {
	h.t.Helper()
	b, _ := json.Marshal(c)
	if _, err := h.conn.Write(append(b, '\n')); err != nil {
		h.t.Fatal(err)
	}
}

func (h *testHost) next() hostEvent {
	h.t.Helper()
	var e hostEvent
	if err := h.events.Decode(&e); err != nil {
		h.t.Fatal(err)
	}
	return e
}

// brickDir returns a directory marked as a brick of volume "v".
func brickDir(t *testing.T) string {
	d := t.TempDir()
	if err := posix.Mark(d, "v", true); err != nil {
		t.Fatal(err)
	}
	return d
}

func lookupRoot(addr, id string) error {
	pc := protocol.New(protocol.Config{Addr: addr, BrickID: id, VolumeID: "v", ConnectWait: 5 * time.Second})
	defer pc.Close()
	_, err := pc.Lookup(context.Background(), "/")
	return err
}

// A brick host serves each brick it is asked to start on its own port,
// says why one cannot start, ends one brick alone when asked (the others
// go on), serves on when its node goes away, lists its bricks to the
// next, and closes them when asked to shut down.
func TestBrickHostServesBricksApart(t *testing.T) {
	h := startTestHost(t)
	h.send(hostCommand{Op: "start", ID: 1, Args: []string{brickDir(t), "b1"}})
	h.send(hostCommand{Op: "start", ID: 2, Args: []string{brickDir(t), "b2"}})
	h.send(hostCommand{Op: "start", ID: 3, Args: []string{t.TempDir(), "b3"}}) // not a brick
	addrs := map[int]string{}
	for range 3 {
		e := h.next()
		switch {
		case e.ID == 3 && e.Err == "":
			t.Fatalf("an unmarked directory was served: %+v", e)
		case e.ID != 3 && e.Addr == "":
			t.Fatalf("brick %d did not start: %+v", e.ID, e)
		}
		addrs[e.ID] = e.Addr
	}
	if addrs[1] == addrs[2] {
		t.Fatalf("two bricks on one address %s", addrs[1])
	}
	for id, name := range map[int]string{1: "b1", 2: "b2"} {
		if err := lookupRoot(addrs[id], name); err != nil {
			t.Fatalf("brick %s: %v", name, err)
		}
	}
	h.send(hostCommand{Op: "kill", ID: 1})
	if e := h.next(); e.ID != 1 || e.Exited != errKilled.Error() {
		t.Fatalf("after kill: %+v, want brick 1 exited killed", e)
	}
	if c, err := net.Dial("tcp", addrs[1]); err == nil {
		c.Close()
		t.Fatal("a killed brick's port still accepts connections")
	}
	if err := lookupRoot(addrs[2], "b2"); err != nil {
		t.Fatalf("the other brick after one was killed: %v", err)
	}
	// The node goes away: the host goes on serving. A node connecting
	// again finds the brick serving, with its flags.
	old := h.conn
	if err := lookupRoot(addrs[2], "b2"); err != nil {
		t.Fatalf("the brick after its node went away: %v", err)
	}
	// Another node connecting meanwhile is turned away.
	other, err := net.Dial("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	var e hostEvent
	if err := json.NewDecoder(other).Decode(&e); err != nil || !e.Busy {
		t.Fatalf("a second node got %+v, %v; want busy", e, err)
	}
	other.Close()
	old.Close()
	h.connect()
	h.send(hostCommand{Op: "list"})
	if e := h.next(); !e.Listed || e.ID != 2 || e.Addr != addrs[2] || len(e.Args) != 2 || e.Args[1] != "b2" {
		t.Fatalf("listed %+v, want brick 2 at %s", e, addrs[2])
	}
	if e := h.next(); !e.Listed || !e.End {
		t.Fatalf("listed %+v, want the end of the list", e)
	}
	h.send(hostCommand{Op: "shutdown"})
	if e := h.next(); e.ID != 2 || e.Exited != "stopped" {
		t.Fatalf("after shutdown: %+v, want brick 2 stopped", e)
	}
	if err := <-h.ended; err != nil {
		t.Fatal(err)
	}
	h.ended <- nil // for the cleanup
}

// A brick asked to stop while it opens still reports where it listened,
// then that it stopped; the host goes on serving the others.
func TestBrickHostStopWhileOpening(t *testing.T) {
	h := startTestHost(t)
	h.send(hostCommand{Op: "start", ID: 1, Args: []string{brickDir(t), "b1"}})
	h.send(hostCommand{Op: "stop", ID: 1})
	if e := h.next(); e.ID != 1 || e.Addr == "" {
		t.Fatalf("first event %+v, want brick 1's address", e)
	}
	if e := h.next(); e.ID != 1 || e.Exited != "stopped" {
		t.Fatalf("second event %+v, want brick 1 stopped", e)
	}
	h.send(hostCommand{Op: "start", ID: 2, Args: []string{brickDir(t), "b2"}})
	e := h.next()
	if e.ID != 2 || e.Addr == "" {
		t.Fatalf("after a stop: %+v, want brick 2's address", e)
	}
	if err := lookupRoot(e.Addr, "b2"); err != nil {
		t.Fatal(err)
	}
}

// A node takes over a running brick only if it is the brick it would
// start: the same flags but the log level, on the address it would ask.
func TestSameBrick(t *testing.T) {
	running := &muxBrick{listen: "127.0.0.1:4000",
		args: []string{"brick", "--path", "/b", "--listen", "127.0.0.1:0", "--log-level", "info"}}
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"brick", "--path", "/b", "--listen", "127.0.0.1:4000", "--log-level", "debug"}, true},
		{[]string{"brick", "--path", "/b", "--listen", "127.0.0.1:0", "--log-level", "info"}, true},
		{[]string{"brick", "--path", "/b", "--listen", "127.0.0.1:4001", "--log-level", "info"}, false},
		{[]string{"brick", "--path", "/b", "--listen", "10.0.0.5:4000", "--log-level", "info"}, false},
		{[]string{"brick", "--path", "/b", "--listen", ":4000", "--log-level", "info"}, false},
		{[]string{"brick", "--path", "/b", "--listen", "127.0.0.1:4000", "--log-level", "info", "--arbiter"}, false},
	} {
		if got := sameBrick(running, c.args); got != c.want {
			t.Errorf("sameBrick(%v) = %v, want %v", c.args, got, c.want)
		}
	}
	wild := &muxBrick{listen: "[::]:4000", args: []string{"brick", "--listen", ":4000"}}
	if !sameBrick(wild, []string{"brick", "--listen", "0.0.0.0:4000"}) {
		t.Error("a brick on every address is not the brick asked on 0.0.0.0")
	}
}

// A brick host kept across an upgrade that does not know a flag added
// since is asked to start its bricks without it (it would refuse them
// all), and takes over the bricks it serves as the same ones; a host
// that knows the flag gets it.
func TestOlderHostGetsOnlyFlagsItKnows(t *testing.T) {
	args := Args(Config{Volume: "v", VolumeID: "id", BrickID: "b", Path: "/p", Listen: "127.0.0.1:1", Replicated: true}, "info")[1:]
	if !slices.Contains(args, "--replicated") {
		t.Fatalf("BrickArgs of a replicated brick: %v", args)
	}
	older := (&hostProc{}).known(args)
	if slices.Contains(older, "--replicated") || len(older) != len(args)-1 {
		t.Errorf("for a host that does not know --replicated: %v", older)
	}
	if got := (&hostProc{flags: hostFlags}).known(args); !slices.Equal(got, args) {
		t.Errorf("for a host that knows it: %v, want %v", got, args)
	}
}
