package brick

import (
	"time"

	"github.com/mortarfs/mortar/wire"
)

// Limits bound what one client connection may cost a server. A zero field
// takes its default (DefaultLimits).
type Limits struct {
	// MaxFrame is the largest frame payload, in bytes, a client may send
	// (default, and ceiling, wire.MaxPayload: a MaxIO write plus 64 KiB).
	// A header claiming more closes the connection with a log line before
	// anything of its payload is read or allocated.
	MaxFrame int
	// MaxInFlight bounds the requests of one connection running at once
	// (default MaxInFlight). At the bound the server stops reading the
	// connection until one finishes: back-pressure, not an error.
	MaxInFlight int
	// MaxInFlightBytes bounds, in the same way, the payload bytes held by
	// one connection's running requests (default 256 MiB). A request is
	// always admitted when nothing else of its connection runs.
	MaxInFlightBytes int64
	// MaxLockWaits bounds the blocking lock requests (Setlk with wait) of
	// one connection waiting at once (default 1024). They do not count
	// against MaxInFlight, since a connection filled with waiters could
	// not carry the unlock they wait for; one beyond the bound fails at
	// once with ENOLCK.
	MaxLockWaits int
	// IdleTimeout closes a connection that sends nothing for that long
	// (default 20 s; clients ping every second when idle): a client whose
	// host died, or that a partition cut off, then releases its files and
	// locks as one that closed its connection does, instead of holding
	// them until TCP keepalive gives up (minutes).
	IdleTimeout time.Duration
	// RecallTimeout is how long a client may keep a directory lease
	// recalled from it (default 10 s: a healthy client hands it back in a
	// round trip per file it held back) before it is cut off, as one that
	// closed its connection.
	RecallTimeout time.Duration
}

// Defaults of Limits.
const (
	DefaultMaxInFlightBytes = 256 << 20
	DefaultMaxLockWaits     = 1024
	DefaultIdleTimeout      = 20 * time.Second
	DefaultRecallTimeout    = 10 * time.Second
)

// DefaultLimits returns the limits a server applies unless told otherwise.
func DefaultLimits() Limits {
	return Limits{
		MaxFrame:         wire.MaxPayload,
		MaxInFlight:      MaxInFlight,
		MaxInFlightBytes: DefaultMaxInFlightBytes,
		MaxLockWaits:     DefaultMaxLockWaits,
		IdleTimeout:      DefaultIdleTimeout,
		RecallTimeout:    DefaultRecallTimeout,
	}
}

// withDefaults fills zero (or negative) fields with their defaults and
// caps MaxFrame at what the protocol allows.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxFrame <= 0 || l.MaxFrame > wire.MaxPayload {
		l.MaxFrame = d.MaxFrame
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = d.MaxInFlight
	}
	if l.MaxInFlightBytes <= 0 {
		l.MaxInFlightBytes = d.MaxInFlightBytes
	}
	if l.MaxLockWaits <= 0 {
		l.MaxLockWaits = d.MaxLockWaits
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.RecallTimeout <= 0 {
		l.RecallTimeout = d.RecallTimeout
	}
	return l
}

// SetLimits sets the limits of the connections that complete their
// handshake from now on; zero fields take their defaults.
func (s *Server) SetLimits(l Limits) {
	s.mu.Lock()
	s.limits = l.withDefaults()
	s.mu.Unlock()
}

// Limits returns the limits new connections get.
func (s *Server) Limits() Limits {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limits.withDefaults()
}
