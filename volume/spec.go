// Package volume describes volumes (the spec the management daemon keeps and
// clients fetch) and builds a client-side layer graph from a spec.
package volume

import (
	"fmt"
	"strconv"
	"time"
)

// Types of volume.
const (
	Distribute = "distribute"
)

// Brick is one brick of a volume.
type Brick struct {
	ID   string `json:"id"`   // unique id, also stored in the brick directory
	Host string `json:"host"` // host as the operator named it
	Path string `json:"path"` // directory on that host
	Addr string `json:"addr"` // host:port where the node serving it listens
}

// Name returns the brick as the operator writes it, host:/path.
func (b Brick) Name() string { return b.Host + ":" + b.Path }

// Spec is everything a client needs to mount a volume.
type Spec struct {
	Name    string            `json:"name"`
	ID      string            `json:"id"`
	Type    string            `json:"type"`
	Bricks  []Brick           `json:"bricks"`
	Options map[string]string `json:"options,omitempty"`
	// Version increases with every change to the spec.
	Version uint64 `json:"version"`
}

// Option returns the value of option key, or def when unset.
func (s *Spec) Option(key, def string) string {
	if v, ok := s.Options[key]; ok {
		return v
	}
	return def
}

// DurationOption returns option key parsed as seconds (fractions allowed)
// or a Go duration ("1.5s"), or def when unset or malformed.
func (s *Spec) DurationOption(key string, def time.Duration) time.Duration {
	v, ok := s.Options[key]
	if !ok {
		return def
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Duration(f * float64(time.Second))
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	return def
}

// Validate checks that the spec can be built into a graph.
func (s *Spec) Validate() error {
	if s.Name == "" || s.ID == "" {
		return fmt.Errorf("volume spec without name or id")
	}
	if s.Type != Distribute {
		return fmt.Errorf("volume %s: type %q is not supported", s.Name, s.Type)
	}
	if len(s.Bricks) == 0 {
		return fmt.Errorf("volume %s has no bricks", s.Name)
	}
	return nil
}
