package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/mortarfs/mortar/internal/netlab"
)

// A netTopo is the network of one measurement: a netlab.Lab (a client
// namespace joined to each server namespace by its own veth pair, both
// ends shaped by a token bucket to RateMbit; server i is 10.231.i.1, the
// client's end of its link 10.231.i.2; servers reach each other through
// the client), with the names the experiments and targets use.
type netTopo struct {
	Client      string
	Servers     []string
	ServerAddrs []string
	ClientAddrs []string
	RateMbit    int

	lab *netlab.Lab
}

// newNetTopo makes the namespaces, veths and qdiscs of servers servers
// behind rateMbit links. On any error what was made is removed before it
// returns; a machine without namespaces gives an unsupported error.
func newNetTopo(ctx context.Context, servers, rateMbit int) (*netTopo, error) {
	if servers < 1 || servers > 8 {
		return nil, fmt.Errorf("netns: %d servers (1..8)", servers)
	}
	lab, err := netlab.New(ctx, netlab.Config{Hosts: servers, RateMbit: rateMbit})
	if errors.Is(err, netlab.ErrUnavailable) {
		return nil, Unsupported("%v", err)
	}
	if err != nil {
		return nil, err
	}
	t := &netTopo{Client: lab.Client.Name, Servers: lab.Names(), ServerAddrs: lab.Addrs(),
		RateMbit: rateMbit, lab: lab}
	for _, h := range lab.Hosts {
		t.ClientAddrs = append(t.ClientAddrs, h.LinkAddr)
	}
	return t, nil
}

// Setup is what the targets are given.
func (t *netTopo) Setup() *NetSetup {
	return &NetSetup{Client: t.Client, Servers: append([]string(nil), t.Servers...),
		ServerAddrs: append([]string(nil), t.ServerAddrs...)}
}

// LinkMBps is the configured rate of one link in MB/s (10^6 bytes).
func (t *netTopo) LinkMBps() float64 { return t.lab.LinkMBps() }

// Close deletes the namespaces (their veths and qdiscs go with them); it
// is bounded in time and safe to call more than once.
func (t *netTopo) Close() error { return t.lab.Close() }

// linkThroughput measures a raw TCP transfer of n bytes through the link
// to server i, both ways, in MB/s: the iperf-like check that the shaping
// holds.
func (t *netTopo) linkThroughput(ctx context.Context, i int, n int64) (up, down float64, err error) {
	return t.lab.LinkThroughput(ctx, i, n)
}
