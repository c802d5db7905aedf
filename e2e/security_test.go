package e2e

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAuthAllowByAddress: without TLS, a volume's auth.allow is enforced
// by the client's address (issue 21): a mount from 127.0.0.1 of a volume
// that admits only 10.1.1.1 is refused with the reason, a mount already
// connected loses access at once (its brick processes close the
// connections the new rules refuse), and gets it back when the rules
// admit it again.
func TestAuthAllowByAddress(t *testing.T) {
	if tlsDir != "" {
		t.Skip("the TLS run checks rules by certificate (mgmt TestTLSCluster)")
	}
	n := startNode(t)
	n.volume("guarded", 2)
	mnt := n.mount("guarded", "attr-timeout=0", "entry-timeout=0", "negative-timeout=0")
	f := filepath.Join(mnt, "f")
	if err := os.WriteFile(f, []byte("before"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.must("volume", "set", "guarded", "auth.allow", "10.1.1.1")
	other := mountDir(t)
	out, err := n.mortar("mount", n.target("guarded"), other)
	if err == nil {
		unmount(t, other)
		t.Fatalf("a mount from 127.0.0.1 with auth.allow 10.1.1.1 succeeded: %s", out)
	}
	if !strings.Contains(out, "auth.allow") {
		t.Errorf("the refusal does not name the rule: %s", out)
	}
	waitFor(t, "the connected mount to lose access", 20*time.Second, func() bool {
		_, err := os.ReadFile(f)
		return err != nil
	})
	n.must("volume", "set", "guarded", "auth.allow", "127.0.0.1")
	waitFor(t, "the connected mount to get access back", 20*time.Second, func() bool {
		b, err := os.ReadFile(f)
		return err == nil && string(b) == "before"
	})
}

// TestDefaultsListenOnLoopback: a node started with no --listen listens on
// 127.0.0.1 only: its API, its Raft port and its bricks (issue 21: they
// listened on every interface). Every listening socket of the server and
// of its brick processes is looked at, whatever its port.
func TestDefaultsListenOnLoopback(t *testing.T) {
	if tlsDir != "" {
		t.Skip("the TLS run does not change where things listen")
	}
	if ln, err := net.Listen("tcp", "127.0.0.1:7420"); err != nil {
		t.Skipf("port 7420 is taken on this machine (%v): the default cannot be tried", err)
	} else {
		ln.Close()
	}
	n := &node{t: t, data: t.TempDir(), addr: "127.0.0.1:7420", defaults: true}
	n.start()
	t.Cleanup(n.stop)
	pids := []int{n.cmd.Process.Pid}
	for _, b := range n.volume("lo", 2) {
		pids = append(pids, n.brickPID("lo", b))
	}
	addrs := listeners(t, pids)
	if len(addrs) == 0 && strings.Contains(n.log(), "address already in use") {
		t.Skip("another process took port 7420 between the check and the start: the default cannot be tried now")
	}
	if len(addrs) < 2+2 { // API, Raft, two bricks
		t.Fatalf("the server and its bricks listen on %v: fewer sockets than API, Raft and two bricks (did another server take port 7420?)", addrs)
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			t.Errorf("listening on %v, beyond loopback", a)
		}
	}
}

// listeners returns the addresses of the listening TCP sockets that the
// processes pids hold.
func listeners(t *testing.T, pids []int) []*net.TCPAddr {
	inodes := map[string]bool{}
	for _, pid := range pids {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
			}
		}
	}
	var out []*net.TCPAddr
	// The server's own view of the TCP tables: /proc/net is the test
	// process's first thread's, which the netlab tests may have moved into
	// a namespace of theirs.
	for _, table := range []string{"net/tcp", "net/tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pids[0], table))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			hexAddr, hexPort, _ := strings.Cut(f[1], ":")
			port, _ := strconv.ParseUint(hexPort, 16, 16)
			raw, _ := hex.DecodeString(hexAddr)
			for i := 0; i+4 <= len(raw); i += 4 {
				raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
			}
			out = append(out, &net.TCPAddr{IP: net.IP(raw), Port: int(port)})
		}
	}
	return out
}
