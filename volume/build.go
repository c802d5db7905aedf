package volume

import (
	"context"
	"log/slog"
	"net"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/distribute"
	"github.com/mortarfs/mortar/layer/protocol"
)

// BuildOptions tune the client-side graph.
type BuildOptions struct {
	Logger *slog.Logger
	// Dial connects to a node (default: plain TCP); TLS plugs in here.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Graph is a client-side layer stack built from a spec.
type Graph struct {
	Top     layer.Layer
	Spec    Spec
	closers []func() error
}

// Build connects a client to every brick of spec and stacks the volume's
// layers on top of them:
//
//	distribute ─┬─ protocol client ── brick 1
//	            ├─ protocol client ── brick 2
//	            └─ ...
//
// Connections are made in the background; Build does not fail because a
// brick is down (its operations fail with ENOTCONN until it is back).
func Build(spec Spec, opts BuildOptions) (*Graph, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Graph{Spec: spec}
	ping := spec.DurationOption("network.ping-timeout", 0)
	children := make([]distribute.Child, 0, len(spec.Bricks))
	for _, b := range spec.Bricks {
		c := protocol.New(protocol.Config{
			Addr: b.Addr, BrickID: b.ID, VolumeID: spec.ID,
			PingTimeout: ping, Dial: opts.Dial,
			Logger: opts.Logger.With("volume", spec.Name),
		})
		g.closers = append(g.closers, c.Close)
		children = append(children, distribute.Child{ID: b.ID, Layer: c})
	}
	top, err := distribute.New(children, distribute.Options{Logger: opts.Logger})
	if err != nil {
		g.Close()
		return nil, err
	}
	g.Top = top
	return g, nil
}

// Close releases every connection of the graph.
func (g *Graph) Close() error {
	var first error
	for _, c := range g.closers {
		if err := c(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
