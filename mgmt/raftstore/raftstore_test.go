package raftstore

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/internal/atomicfile"
	"github.com/mortarfs/mortar/internal/proof"
	"github.com/mortarfs/mortar/internal/wiretap"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
)

// newSecret returns a cluster secret: 32 random bytes in hex.
func newSecret() string { return hex.EncodeToString(proof.Nonce(32)) }

// openTestRaft opens a one-node Raft store in dir on a free port, with
// secret as the cluster secret.
func openTestRaft(t *testing.T, dir, secret string) *Store {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, "n1", ln, ln.Addr().String(), nil, func() string { return secret }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The Raft store keeps what was applied across a restart, refuses bad
// commands without changing anything, and takes over the state.json of a
// node that ran before Raft.
func TestRaftStorePersists(t *testing.T) {
	dir := t.TempDir()
	legacy := state.NewState()
	if err := legacy.Apply(state.Command{Op: state.OpSetNode, Node: &state.Node{ID: "n1", Addr: "h:1"}}); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, "state.json"), legacy); err != nil {
		t.Fatal(err)
	}
	st := openTestRaft(t, dir, newSecret())
	if got := st.State(); !reflect.DeepEqual(got, legacy) {
		t.Fatalf("state taken from state.json:\n%+v\nwant\n%+v", got, legacy)
	}
	if err := st.Apply(state.Command{Op: state.OpCreateVolume, Volume: &state.Volume{Name: "gv0", ID: "v1", Type: "distribute",
		Bricks: []state.Brick{{ID: "v1-b1", Node: "n1", Host: "localhost", Path: "/b1"}}}}); err != nil {
		t.Fatal(err)
	}
	before := st.State()
	if err := st.Apply(state.Command{Op: state.OpDeleteVolume, Name: "zzz"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("delete of a missing volume: %v", err)
	}
	if !reflect.DeepEqual(st.State(), before) {
		t.Fatal("a refused command changed the state")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	again := openTestRaft(t, dir, newSecret())
	defer again.Close()
	if err := again.WaitLeader(LeaderWait); err != nil {
		t.Fatal(err)
	}
	// The log is applied again once this node leads; Barrier waits for it.
	if err := again.raft.Barrier(ApplyTimeout).Error(); err != nil {
		t.Fatal(err)
	}
	if got := again.State(); !reflect.DeepEqual(got, before) {
		t.Fatalf("reopened state differs:\n%+v\n%+v", got, before)
	}
}

// TestRaftNeedsSecret: a connection to the Raft port gets a challenge,
// and is closed without an answer unless it answers it with the cluster
// secret: not an HTTP request, not a wrong secret, not a valid answer
// recorded on an earlier connection. A right answer, whose bytes hold
// nothing of the secret, keeps it open.
func TestRaftNeedsSecret(t *testing.T) {
	secret := newSecret()
	n := openTestRaft(t, t.TempDir(), secret)
	defer n.Close()
	var recorded []byte
	for _, c := range []struct {
		name   string
		answer func(challenge []byte) []byte
	}{
		{"http", func([]byte) []byte { return []byte("GET / HTTP/1.0\r\n\r\n" + strings.Repeat(" ", 64)) }},
		{"wrong secret", func(ch []byte) []byte { return proof.MAC(newSecret(), raftLabel, string(ch)) }},
		{"replayed", func([]byte) []byte { return recorded }},
	} {
		if c.name == "replayed" {
			recorded = raftAnswerOf(t, n, secret, true).Sent()
		}
		conn, challenge := raftChallengeOf(t, n)
		conn.Write(c.answer(challenge))
		conn.Write(bytes.Repeat([]byte{0}, 64)) // would be a Raft request
		conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		b, err := io.ReadAll(conn)
		if errors.Is(err, syscall.ECONNRESET) {
			err = nil // closed with our bytes unread
		}
		if len(b) != 0 || err != nil {
			t.Fatalf("answer %s: read %q, %v; want the connection closed", c.name, b, err)
		}
	}
}

// raftChallengeOf opens a Raft connection to n and reads its challenge.
func raftChallengeOf(t *testing.T, n *Store) (net.Conn, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", n.bind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch := make([]byte, len(raftMagic)+raftNonce)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(conn, ch); err != nil || string(ch[:len(raftMagic)]) != raftMagic {
		t.Fatalf("no challenge: %q, %v", ch, err)
	}
	return conn, ch[len(raftMagic):]
}

// raftAnswerOf answers n's challenge as a node's dialer does, on a
// recorded connection, checks that n keeps it open (or not, unless ok),
// and that the secret is not in what was sent.
func raftAnswerOf(t *testing.T, n *Store, secret string, ok bool) *wiretap.Tap {
	t.Helper()
	conn, err := net.Dial("tcp", n.bind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	tap := &wiretap.Tap{}
	rc := tap.Wrap(conn)
	if err := answer(rc, secret, time.Now().Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	rc.SetReadDeadline(time.Now().Add(time.Second))
	_, err = rc.Read(make([]byte, 1))
	var ne net.Error
	if open := errors.As(err, &ne) && ne.Timeout(); open != ok {
		t.Fatalf("answered with secret %.8s…: open %v (%v), want %v", secret, open, err, ok)
	}
	tap.MustNotShow(t, secret)
	return tap
}

// TestRaftAnswerProvesSecret: a dialer holding the cluster secret is
// admitted, one holding another is not, and neither sends its secret.
func TestRaftAnswerProvesSecret(t *testing.T) {
	secret := newSecret()
	n := openTestRaft(t, t.TempDir(), secret)
	defer n.Close()
	raftAnswerOf(t, n, secret, true)
	raftAnswerOf(t, n, newSecret(), false)
}
