package netlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// ErrNoNetem is returned by SlowLink for a delay when the kernel has no
// netem queueing discipline (CONFIG_NET_SCH_NETEM): rates still work.
var ErrNoNetem = errors.New("the kernel has no netem (tc qdisc netem): no link delay")

// Shape is how a link is slowed: both ends get it.
type Shape struct {
	// RateMbit is the rate in Mbit/s; 0 = unshaped.
	RateMbit int
	// Delay is added to every packet leaving either end, so a round trip
	// over the link gains 2×Delay. It needs netem (ErrNoNetem otherwise).
	Delay time.Duration
}

// ends lists the two ends of host h's link as (namespace host, device).
func (h *Host) ends() [2]struct {
	ns  *Host
	dev string
} {
	return [2]struct {
		ns  *Host
		dev string
	}{{h.lab.Client, h.cliDev}, {h, h.dev}}
}

// shape puts s on both ends of h's link, replacing what was there.
func (l *Lab) shape(ctx context.Context, h *Host, s Shape) error {
	for _, e := range h.ends() {
		var args []string
		switch {
		case s.Delay > 0:
			args = []string{"qdisc", "replace", "dev", e.dev, "root", "netem", "delay",
				strconv.FormatInt(s.Delay.Microseconds(), 10) + "us"}
			if s.RateMbit > 0 {
				args = append(args, "rate", fmt.Sprintf("%dmbit", s.RateMbit))
			}
		case s.RateMbit > 0:
			// The burst is 32 kbit (as the classic tbf example for 100
			// Mbit/s), larger for faster rates so that the 1 ms timer does
			// not cap the rate below the target.
			burstKbit := max(32, s.RateMbit/3)
			args = []string{"qdisc", "replace", "dev", e.dev, "root", "tbf", "rate", fmt.Sprintf("%dmbit", s.RateMbit),
				"burst", fmt.Sprintf("%dkbit", burstKbit), "latency", "400ms"}
		default:
			out, err := e.ns.exec(ctx, "tc", "qdisc", "del", "dev", e.dev, "root")
			if err != nil && !strings.Contains(out, "handle of zero") && !strings.Contains(out, "No such") {
				return err
			}
			continue
		}
		out, err := e.ns.exec(ctx, "tc", args...)
		if err != nil && s.Delay > 0 && strings.Contains(out, "unknown") {
			return fmt.Errorf("%w: %v", ErrNoNetem, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// SlowLink shapes host i's link (both ends) to s until RestoreLink.
func (l *Lab) SlowLink(ctx context.Context, i int, s Shape) error {
	l.linkMu.Lock()
	defer l.linkMu.Unlock()
	return l.shape(ctx, l.Hosts[i], s)
}

// CutLink drops every packet crossing host i's link, both ways, until
// RestoreLink: the host is cut off from the client and from every other
// host. Packets vanish silently (routes stay): senders see timeouts, not
// errors, as with a pulled cable.
func (l *Lab) CutLink(ctx context.Context, i int) error {
	l.linkMu.Lock()
	defer l.linkMu.Unlock()
	h := l.Hosts[i]
	if h.cut {
		return nil
	}
	for _, e := range h.ends() {
		if err := e.ns.ensureSink(ctx); err != nil {
			return err
		}
		if _, err := e.ns.exec(ctx, "tc", "qdisc", "replace", "dev", e.dev, "ingress"); err != nil {
			return err
		}
		// Every packet arriving on this end is redirected to the sink,
		// which is down: the redirect drops it.
		if _, err := e.ns.exec(ctx, "tc", "filter", "add", "dev", e.dev, "parent", "ffff:", "protocol", "all",
			"prio", "1", "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", sinkDev); err != nil {
			return err
		}
		h.cut = true
	}
	return nil
}

// sinkDev is a device left down in a namespace: what CutLink redirects
// packets to is dropped.
const sinkDev = "nl-sink"

// ensureSink makes the namespace's sink device (a veth pair left down).
func (h *Host) ensureSink(ctx context.Context) error {
	if h.sink {
		return nil
	}
	if _, err := h.exec(ctx, "ip", "link", "add", "name", sinkDev, "type", "veth", "peer", "name", sinkDev+"p"); err != nil {
		return err
	}
	h.sink = true
	return nil
}

// RestoreLink undoes CutLink and SlowLink on host i's link: it carries
// packets again, at the lab's rate.
func (l *Lab) RestoreLink(ctx context.Context, i int) error {
	l.linkMu.Lock()
	defer l.linkMu.Unlock()
	h := l.Hosts[i]
	if h.cut {
		for _, e := range h.ends() {
			if _, err := e.ns.exec(ctx, "tc", "filter", "del", "dev", e.dev, "parent", "ffff:"); err != nil {
				return err
			}
		}
		h.cut = false
	}
	return l.shape(ctx, h, Shape{RateMbit: l.RateMbit})
}

// LinkThroughput measures a raw TCP transfer of n bytes through host i's
// link, both ways: client→host (up) and host→client (down), in MB/s (10^6
// bytes). It is the iperf-like check that the shaping holds.
func (l *Lab) LinkThroughput(ctx context.Context, i int, n int64) (up, down float64, err error) {
	h := l.Hosts[i]
	ln, err := h.Listen("tcp", net.JoinHostPort(h.Addr, "5201"))
	if err != nil {
		return 0, 0, err
	}
	defer ln.Close()
	deadline := time.Now().Add(60*time.Second + time.Duration(n/1e6)*time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if up, err = l.transfer(ln, n, deadline, true); err != nil {
		return 0, 0, err
	}
	down, err = l.transfer(ln, n, deadline, false)
	return up, down, err
}

// transfer moves n bytes over one connection from the client to ln and
// returns MB/s as seen by the receiver (timed from connect to the last
// byte read).
func (l *Lab) transfer(ln net.Listener, n int64, deadline time.Time, up bool) (float64, error) {
	type side struct {
		c   net.Conn
		err error
	}
	acc := make(chan side, 1)
	go func() {
		c, err := ln.Accept()
		acc <- side{c, err}
	}()
	start := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	cli, err := l.Client.Dial(ctx, "tcp", ln.Addr().String())
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
