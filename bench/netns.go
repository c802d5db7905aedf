package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A netTopo is a star of network namespaces made for one measurement: a
// client namespace joined to each server namespace by its own veth pair,
// both ends of every pair shaped by a token bucket (tbf) to RateMbit.
// Server i is 10.231.i.1/24 in its namespace, the client's end of that
// link 10.231.i.2/24. The addresses exist only inside the namespaces made
// here, so no traffic of the benchmark leaves them. The client namespace
// forwards between links so that servers reach each other (GlusterFS peers
// probe each other), and every server routes 10.231.0.0/16 through it.
//
// The namespaces are named mbench<pid>-cli and mbench<pid>-srv<i>, so two
// runs at once keep apart, and a run removes what a killed one left.
// Close deletes the namespaces (their veths and qdiscs go with them); it is
// bounded in time and safe to call more than once.
type netTopo struct {
	Client      string
	Servers     []string
	ServerAddrs []string
	ClientAddrs []string
	RateMbit    int

	made []string // namespaces this topo created, deleted by Close
}

const (
	netnsPrefix = "mbench"         // + pid + "-cli" / "-srv<i>"
	netCmdLimit = 15 * time.Second // one ip/tc command
)

// newNetTopo makes the namespaces, veths and qdiscs. On any error what was
// made is removed before it returns.
func newNetTopo(ctx context.Context, servers, rateMbit int) (_ *netTopo, err error) {
	if servers < 1 || servers > 8 {
		return nil, fmt.Errorf("netns: %d servers (1..8)", servers)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, Unsupported("network namespaces need iproute2 (ip, tc): %v", err)
	}
	removeStaleNetns(ctx)
	t := &netTopo{Client: nsName("cli"), RateMbit: rateMbit}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if err := t.addNS(ctx, t.Client); err != nil {
		return nil, err
	}
	if err := nsRun(ctx, t.Client, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"); err != nil {
		return nil, err
	}
	for i := 0; i < servers; i++ {
		if err := t.addServer(ctx, i); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// nsName names a namespace of this process: two benchmark runs at once
// (two people on one machine) never share or delete each other's.
func nsName(role string) string { return fmt.Sprintf("%s%d-%s", netnsPrefix, os.Getpid(), role) }

// removeStaleNetns deletes the namespaces a benchmark process that no
// longer runs left behind (killed before its clean-up).
func removeStaleNetns(ctx context.Context) {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), netnsPrefix)
		pid, _, ok2 := strings.Cut(rest, "-")
		if !ok || !ok2 || pid == "" || strings.Trim(pid, "0123456789") != "" {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue // its process still runs
		}
		_ = runCmd(ctx, "ip", "netns", "del", e.Name())
	}
}

// addNS creates a namespace and brings its loopback up.
func (t *netTopo) addNS(ctx context.Context, name string) error {
	if err := runCmd(ctx, "ip", "netns", "add", name); err != nil {
		return err
	}
	t.made = append(t.made, name)
	return runCmd(ctx, "ip", "-n", name, "link", "set", "lo", "up")
}

// addServer makes server namespace i and its shaped link to the client.
func (t *netTopo) addServer(ctx context.Context, i int) error {
	ns := nsName(fmt.Sprintf("srv%d", i))
	if err := t.addNS(ctx, ns); err != nil {
		return err
	}
	cif, sif := fmt.Sprintf("mb-c%d", i), fmt.Sprintf("mb-s%d", i)
	saddr, caddr := fmt.Sprintf("10.231.%d.1", i), fmt.Sprintf("10.231.%d.2", i)
	// Both ends are created directly inside their namespaces: nothing is
	// ever added to the host's own namespace.
	steps := [][]string{
		{"ip", "link", "add", cif, "netns", t.Client, "type", "veth", "peer", "name", sif, "netns", ns},
		{"ip", "-n", t.Client, "addr", "add", caddr + "/24", "dev", cif},
		{"ip", "-n", ns, "addr", "add", saddr + "/24", "dev", sif},
		{"ip", "-n", t.Client, "link", "set", cif, "up"},
		{"ip", "-n", ns, "link", "set", sif, "up"},
		{"ip", "-n", ns, "route", "add", "10.231.0.0/16", "via", caddr},
	}
	for _, s := range steps {
		if err := runCmd(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	for _, end := range [][2]string{{t.Client, cif}, {ns, sif}} {
		if err := shapeLink(ctx, end[0], end[1], t.RateMbit); err != nil {
			return err
		}
	}
	t.Servers = append(t.Servers, ns)
	t.ServerAddrs = append(t.ServerAddrs, saddr)
	t.ClientAddrs = append(t.ClientAddrs, caddr)
	return nil
}

// shapeLink puts a token bucket on the egress of dev in ns. The burst is
// 32 kbit (as the classic tbf example for 100 Mbit/s), larger for faster
// rates so that the 1 ms timer does not cap the rate below the target.
func shapeLink(ctx context.Context, ns, dev string, rateMbit int) error {
	burstKbit := 32
	if b := rateMbit / 3; b > burstKbit {
		burstKbit = b
	}
	return nsRun(ctx, ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
		"rate", fmt.Sprintf("%dmbit", rateMbit), "burst", fmt.Sprintf("%dkbit", burstKbit), "latency", "400ms")
}

// Setup is what the targets are given.
func (t *netTopo) Setup() *NetSetup {
	return &NetSetup{Client: t.Client, Servers: append([]string(nil), t.Servers...),
		ServerAddrs: append([]string(nil), t.ServerAddrs...)}
}

// LinkMBps is the configured rate of one link in MB/s (10^6 bytes).
func (t *netTopo) LinkMBps() float64 { return float64(t.RateMbit) / 8 }

// Close deletes every namespace this topo made, each bounded in time.
func (t *netTopo) Close() error {
	var errs []error
	for i := len(t.made) - 1; i >= 0; i-- {
		ctx, cancel := context.WithTimeout(context.Background(), netCmdLimit)
		if err := runCmd(ctx, "ip", "netns", "del", t.made[i]); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	t.made = nil
	return errors.Join(errs...)
}

// nsRun runs a short command inside namespace ns, bounded by netCmdLimit.
func nsRun(ctx context.Context, ns, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, netCmdLimit)
	defer cancel()
	_, err := execIn(ctx, ns, name, args...)
	return err
}

// runCmd runs a short command in the host namespace, bounded by netCmdLimit.
func runCmd(ctx context.Context, name string, args ...string) error {
	return nsRun(ctx, "", name, args...)
}

// inNetns runs fn on an OS thread that has entered namespace ns. Sockets
// created by fn stay in ns after it returns. The thread stays locked and
// so ends with its goroutine: it never goes back to the scheduler in the
// wrong namespace.
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// linkThroughput measures a raw TCP transfer of n bytes through the link
// to server i, both ways: client→server (up) and server→client (down), in
// MB/s (10^6 bytes). It is the iperf-like check that the shaping holds.
func (t *netTopo) linkThroughput(ctx context.Context, i int, n int64) (up, down float64, err error) {
	var ln net.Listener
	addr := net.JoinHostPort(t.ServerAddrs[i], "5201")
	if err := inNetns(t.Servers[i], func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		return 0, 0, err
	}
	defer ln.Close()
	deadline := time.Now().Add(60*time.Second + time.Duration(n/1e6)*time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if up, err = t.transfer(ln, i, n, deadline, true); err != nil {
		return 0, 0, err
	}
	down, err = t.transfer(ln, i, n, deadline, false)
	return up, down, err
}

// transfer moves n bytes over one connection and returns MB/s as seen by
// the receiver (timed from connect to the last byte read).
func (t *netTopo) transfer(ln net.Listener, i int, n int64, deadline time.Time, up bool) (float64, error) {
	type side struct {
		c   net.Conn
		err error
	}
	acc := make(chan side, 1)
	go func() {
		c, err := ln.Accept()
		acc <- side{c, err}
	}()
	var cli net.Conn
	start := time.Now()
	err := inNetns(t.Client, func() (err error) {
		d := net.Dialer{Deadline: deadline}
		cli, err = d.Dial("tcp", ln.Addr().String())
		return err
	})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	s := <-acc
	if s.err != nil {
		return 0, s.err
	}
	defer s.c.Close()
	src, dst := cli, s.c
	if !up {
		src, dst = s.c, cli
	}
	src.SetDeadline(deadline)
	dst.SetDeadline(deadline)
	werr := make(chan error, 1)
	go func() {
		_, err := io.CopyN(src, zeroReader{}, n)
		werr <- err
	}()
	got, err := io.CopyN(io.Discard, dst, n)
	elapsed := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("link transfer: %d of %d bytes: %w", got, n, err)
	}
	if err := <-werr; err != nil {
		return 0, err
	}
	return float64(n) / 1e6 / elapsed.Seconds(), nil
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
