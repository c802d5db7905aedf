package mgmt

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"strconv"
)

// DefaultPort is the port a node listens on for both its management API
// and its bricks. (GlusterFS uses 24007 for glusterd and 49152 and up for
// bricks; mortar stays clear of both.)
const DefaultPort = 7420

// DefaultListen is the listen address of a node unless configured.
var DefaultListen = ":" + strconv.Itoa(DefaultPort)

// Config configures a node. The zero value plus a DataDir is valid.
type Config struct {
	// DataDir holds the node's state (state.json, node.json). Required.
	DataDir string
	// Listen is the TCP address to accept connections on, for the HTTP
	// management API and the brick protocol alike (default DefaultListen).
	Listen string
	// Advertise is the host:port that other nodes and clients use to reach
	// this node. Default: the Listen address when it names a host;
	// otherwise the machine's host name if it resolves to one of this
	// machine's non-loopback addresses, else its first global unicast
	// address, else 127.0.0.1; with the port actually listened on.
	Advertise string
	// Logger receives the node's logs (default: discarded).
	Logger *slog.Logger
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
