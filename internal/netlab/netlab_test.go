package netlab

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
)

// newLab makes a lab for a test, skipping the test where namespaces
// cannot be made, and closes it at the end.
func newLab(t *testing.T, ctx context.Context, cfg Config) *Lab {
	t.Helper()
	l, err := New(ctx, cfg)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("no network namespaces here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return l
}

// TestLabLinks makes a two-host lab shaped to 100 Mbit/s, checks the
// shaping with a small TCP transfer, that hosts reach each other through
// the client, that a cut link drops packets and a restored one carries
// them again, that a slowed link is slower, and that Close leaves no
// namespace or directory behind.
func TestLabLinks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, Config{Hosts: 2, RateMbit: 100})
	if l.Hosts[1].Addr != "10.231.1.1" || l.Hosts[1].LinkAddr != "10.231.1.2" || len(l.Names()) != 2 {
		t.Fatalf("hosts %+v %+v", l.Hosts[0], l.Hosts[1])
	}
	up, down, err := l.LinkThroughput(ctx, 0, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100 Mbit/s link: up %.1f MB/s, down %.1f MB/s", up, down)
	for _, v := range []float64{up, down} {
		if v < 2 || v > 14 { // a loaded machine slows it; unshaped it would be GB/s
			t.Errorf("shaped to 12.5 MB/s, measured %.1f MB/s", v)
		}
	}

	// Host 1 serves an echo; host 0 and the client reach it.
	ln, err := l.Hosts[1].Listen("tcp", net.JoinHostPort(l.Hosts[1].Addr, "9000"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	echo := func(from *Host) error {
		ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		c, err := from.Dial(ctx, "tcp", ln.Addr().String())
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		b := make([]byte, 4)
		_, err = io.ReadFull(c, b)
		return err
	}
	for _, from := range []*Host{l.Client, l.Hosts[0]} {
		if err := echo(from); err != nil {
			t.Fatalf("echo from %s: %v", from.Name, err)
		}
	}

	// A connection made before the cut stalls, new ones time out.
	before, err := l.Client.Dial(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	if err := l.CutLink(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for _, from := range []*Host{l.Client, l.Hosts[0]} {
		err := echo(from)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("echo from %s over a cut link: %v, want a timeout", from.Name, err)
		}
	}
	before.SetDeadline(time.Now().Add(300 * time.Millisecond))
	before.Write([]byte("x"))
	if _, err := before.Read(make([]byte, 1)); err == nil {
		t.Error("an open connection still carries data over a cut link")
	}
	if err := l.RestoreLink(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for _, from := range []*Host{l.Client, l.Hosts[0]} {
		if err := echo(from); err != nil {
			t.Errorf("echo from %s after restore: %v", from.Name, err)
		}
	}

	// Slowed to 20 Mbit/s (2.5 MB/s): 1 MiB takes ~0.4 s, well below the
	// 100 Mbit/s link's rate.
	if err := l.SlowLink(ctx, 0, Shape{RateMbit: 20}); err != nil {
		t.Fatal(err)
	}
	up, _, err = l.LinkThroughput(ctx, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("slowed to 20 Mbit/s: up %.1f MB/s", up)
	if up > 4 {
		t.Errorf("slowed to 2.5 MB/s, measured %.1f MB/s", up)
	}
	err = l.SlowLink(ctx, 0, Shape{Delay: 20 * time.Millisecond})
	switch {
	case errors.Is(err, ErrNoNetem):
		t.Logf("delay: %v", err)
	case err != nil:
		t.Errorf("delay: %v", err)
	}
	if err := l.RestoreLink(ctx, 0); err != nil {
		t.Fatal(err)
	}

	out, _ := l.Hosts[0].Exec(ctx, "ip", "-o", "addr", "show")
	if !strings.Contains(out, "10.231.0.1/24") {
		t.Errorf("Exec in host 0: addresses %s", out)
	}
	dir := l.Dir
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, l.base, dir)
}

// checkGone fails if a namespace named base... or dir is left.
func checkGone(t *testing.T, base, dir string) {
	t.Helper()
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), base+"-") {
		t.Errorf("namespaces left: %s", out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("work directory %s left: %v", dir, err)
	}
}

// TestRemoveStale: a lab left by a process that no longer runs (its
// namespaces, a process in one of them, its work directory) is removed
// by the next New.
func TestRemoveStale(t *testing.T) {
	if err := available(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	base := namePrefix + strconv.Itoa(dead.Process.Pid) + "-1"
	ns := base + "-h0"
	if _, err := runHost(ctx, "ip", "netns", "add", ns); err != nil {
		t.Skipf("cannot make namespaces: %v", err)
	}
	defer runHost(context.Background(), "ip", "netns", "del", ns)
	dir := filepath.Join(os.TempDir(), base)
	os.MkdirAll(filepath.Join(dir, "h0"), 0o755)
	sleeper := Command(ns, "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sleeper.Wait() }()
	defer sleeper.Process.Kill()
	// Start returns once `ip netns exec` runs, maybe before it has
	// entered the namespace: wait until the namespace holds the process
	// (on a loaded machine the lab's cleanup could look first and miss it).
	for !slices.Contains(nsPIDs(ctx, ns), sleeper.Process.Pid) {
		if ctx.Err() != nil {
			t.Fatal("the sleeper never entered its namespace")
		}
		time.Sleep(10 * time.Millisecond) // polling: no event tells it
	}

	l := newLab(t, ctx, Config{Hosts: 1})
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("the process in the stale namespace still runs")
	}
	checkGone(t, base, dir)
	if _, err := os.Stat(l.Dir); err != nil {
		t.Errorf("the new lab's directory: %v", err)
	}
}

// TestServerLifecycle starts a mortar server on a host, reaches it from
// the client, kills and restarts it on the same address and data, and
// stops it.
func TestServerLifecycle(t *testing.T) {
	if err := available(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bin := os.Getenv("MORTAR_TEST_BIN") // a binary built elsewhere
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "mortar")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../cmd/mortar").CombinedOutput(); err != nil {
			t.Fatalf("building mortar: %v\n%s", err, out)
		}
	}
	l := newLab(t, ctx, Config{Hosts: 1})
	h := l.Hosts[0]
	s, err := h.StartServer(ctx, ServerConfig{Bin: bin})
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr != "10.231.0.1:7420" || !strings.HasPrefix(s.DataDir(), l.Dir) {
		t.Fatalf("server at %s, data %s", s.Addr, s.DataDir())
	}
	// The client namespace is another machine: it needs the node's secret.
	secretFile := filepath.Join(s.DataDir(), "secret")
	nodeID := func() string {
		out, err := l.Client.Exec(ctx, bin, "volume", "list", "--server", s.Addr, "--secret-file", secretFile)
		if err != nil {
			t.Fatalf("CLI from the client: %v", err)
		}
		secret, err := os.ReadFile(secretFile)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Addr+"/v1/node", nil)
		api.SignRequest(req, nil, strings.TrimSpace(string(secret)))
		resp, err := l.Client.HTTPClient(5 * time.Second).Do(req)
		if err != nil {
			t.Fatalf("API from the client: %v (%s)", err, out)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	id := nodeID()
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Running() || len(nsPIDs(ctx, h.Name)) != 0 {
		t.Fatal("host still runs processes after Kill")
	}
	if err := h.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got := nodeID(); got != id {
		t.Errorf("after restart the node is %s, was %s (same data directory)", got, id)
	}
	if err := h.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if s.Running() {
		t.Fatal("running after Stop")
	}
	if !strings.Contains(s.LogTail(100), "netlab: starting") {
		t.Errorf("log: %s", s.LogTail(10))
	}
}
