package mgmt

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/tlsconf"
)

// DefaultListen is the listen address of a node unless configured: the
// loopback interface only. A node listens on the network (and so do its
// bricks and its Raft traffic) only when told to, with --listen.
var DefaultListen = "127.0.0.1:" + strconv.Itoa(api.DefaultPort)

// Config configures a node. The zero value plus a DataDir is valid.
type Config struct {
	// DataDir holds the node's state (state.json, node.json). Required.
	DataDir string
	// Listen is the TCP address of the HTTP management API (default
	// DefaultListen). Bricks listen on the same host, each on its own port.
	Listen string
	// Advertise is the host:port that other nodes and clients use to reach
	// this node. Default: the Listen address when it names a host;
	// otherwise the machine's host name if it resolves to one of this
	// machine's non-loopback addresses, else its first global unicast
	// address, else 127.0.0.1; with the port actually listened on.
	Advertise string
	// RaftListen is the TCP address of the node's Raft traffic (default:
	// the host of Listen with the port after the API's, 7421 by default,
	// or a free port when the API's port is chosen free).
	RaftListen string
	// TLS, when set, secures the node's every connection with this
	// identity (a node certificate): see tls.go.
	TLS *tlsconf.Identity
	// Logger receives the node's logs (default: discarded).
	Logger *slog.Logger
	// BrickExec, when set, runs every brick as a process of its own, as
	// GlusterFS runs a glusterfsd per brick: the program BrickExec with
	// the arguments brickrun.Args returns (`mortar brick ...`), logging to
	// DataDir/logs/bricks/, killed when the node's process dies (but see
	// KeepBricks). `mortar server` sets it to its own binary. Empty (the default): bricks run
	// inside this process, each on its own listener, which tests and
	// programs embedding a node use (a test binary cannot be a brick).
	BrickExec string
	// BrickMultiplex, with BrickExec, runs every brick of the node in one
	// process (`BrickExec brick-host`, GlusterFS's cluster.brick-multiplex)
	// instead of one process per brick: fewer processes compete for the
	// CPU, but the bricks fail together. `mortar server` sets it unless
	// told --brick-multiplex=false.
	BrickMultiplex bool
	// KeepBricks, with BrickMultiplex, keeps the brick host serving when
	// the node closes or dies; a node starting takes its bricks over.
	KeepBricks bool
	// BrickLogLevel is the log level of brick processes: debug, info
	// (default), warn or error.
	BrickLogLevel string
}

// withDefaults returns c with unset fields filled in (Advertise is derived
// later, once the listen port is known).
func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.BrickLogLevel == "" {
		c.BrickLogLevel = "info"
	}
	return c
}

// Validate reports the first problem with c, after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.DataDir == "" {
		return fmt.Errorf("config: a data directory is required")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("config: listen address %q: %w", c.Listen, err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.BrickLogLevel)); err != nil {
		return fmt.Errorf("config: brick log level %q (want debug, info, warn or error)", c.BrickLogLevel)
	}
	if c.Advertise != "" {
		host, port, err := net.SplitHostPort(c.Advertise)
		if err != nil {
			return fmt.Errorf("config: advertise address %q: %w", c.Advertise, err)
		}
		if host == "" || isUnspecified(host) {
			return fmt.Errorf("config: advertise address %q must name a host others can reach", c.Advertise)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return fmt.Errorf("config: advertise address %q: bad port", c.Advertise)
		}
	}
	return nil
}

// newID returns a random RFC 4122 version 4 UUID string.
func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
