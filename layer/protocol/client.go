// Package protocol is the client side of the wire protocol: a layer whose
// operations run on a remote brick.
package protocol

import (
	"context"
	"log/slog"
	"net"
	"time"
)

// Config says which brick to talk to and how.
type Config struct {
	Addr     string // host:port of the node serving the brick
	BrickID  string
	VolumeID string
	// PingInterval and PingTimeout bound how long a dead brick goes
	// unnoticed (defaults 1s and 5s).
	PingInterval, PingTimeout time.Duration
	// Dial connects to Addr (default net.Dialer with a 5s timeout); TLS
	// plugs in here.
	Dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	Logger *slog.Logger
}

// Client is a layer.Layer whose operations run on a remote brick. It
// connects in the background and reconnects after failures; operations
// while disconnected fail with ENOTCONN.
type Client struct{}

// New returns a client for the brick in cfg.
func New(cfg Config) *Client { panic("TODO") }

// Close closes the connection and fails outstanding operations.
func (c *Client) Close() error { panic("TODO") }
