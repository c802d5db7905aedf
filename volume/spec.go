// Package volume describes volumes (the spec the management daemon keeps and
// clients fetch) and builds a client-side layer graph from a spec.
package volume

import (
	"fmt"
	"github.com/mortarfs/mortar/volume/options"
	"strconv"
	"time"

	"github.com/mortarfs/mortar/layer/disperse"
)

// Types of volume.
const (
	// Distribute spreads files over the bricks by name hash.
	Distribute = "distribute"
	// Replicate groups the bricks in sets of Replica consecutive bricks,
	// every set holding a copy of its files; files are distributed over
	// the sets (distributed-replicate when there is more than one set).
	Replicate = "replicate"
	// Disperse groups the bricks in sets of Disperse consecutive bricks
	// and erasure-codes every file over its set, which survives any
	// Redundancy of them down; files are distributed over the sets
	// (distributed-disperse when there is more than one set).
	Disperse = "disperse"
)

// Brick is one brick of a volume.
type Brick struct {
	ID   string `json:"id"`   // unique id, also stored in the brick directory
	Host string `json:"host"` // host as the operator named it
	Path string `json:"path"` // directory on that host
	Addr string `json:"addr"` // host:port where the brick is served
	// Arbiter bricks hold names and metadata but no file data.
	Arbiter bool `json:"arbiter,omitempty"`
}

// Name returns the brick as the operator writes it, host:/path.
func (b Brick) Name() string { return b.Host + ":" + b.Path }

// Spec is everything a client needs to mount a volume.
type Spec struct {
	Name   string  `json:"name"`
	ID     string  `json:"id"`
	Type   string  `json:"type"`
	Bricks []Brick `json:"bricks"`
	// Replica is the size of a replica set (Replicate volumes). The sets
	// are Bricks[0:Replica], Bricks[Replica:2*Replica], ...
	Replica int `json:"replica,omitempty"`
	// Disperse is the size of a disperse set and Redundancy the number
	// of its bricks that may be lost (Disperse volumes). The sets are
	// Bricks[0:Disperse], Bricks[Disperse:2*Disperse], ...
	Disperse   int               `json:"disperse,omitempty"`
	Redundancy int               `json:"redundancy,omitempty"`
	Options    map[string]string `json:"options,omitempty"`
	// Layout places names on the sets (distribute's children, named by
	// the ID of their first brick); nil is EvenLayout over the sets, in
	// order. A set may be in no range: just added, before its first
	// rebalance gives it one.
	Layout *Layout `json:"layout,omitempty"`
	// Previous is the layout a rebalance is moving files away from, set
	// only while it runs: clients look a name up where Layout puts it
	// and, if it is not there yet, where Previous put it. A set being
	// removed is in Previous but not in Layout.
	Previous *Layout `json:"previous,omitempty"`
	// Version increases with every change to the spec.
	Version uint64 `json:"version"`
	// Secret is the volume's secret, which its bricks require of every
	// client (but node certificates); the spec is handed only to clients
	// the volume's auth.allow and auth.reject admit.
	Secret string `json:"secret,omitempty"`
}

// Value returns the value of option key, or its default in the table of
// options (volume/options) when unset.
func (s *Spec) Value(key string) string { return s.Option(key, options.Default(key)) }

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
	if len(s.Bricks) == 0 {
		return fmt.Errorf("volume %s has no bricks", s.Name)
	}
	// Brick ids name the sets (distribute's children, in layouts and
	// pointer files): an empty or repeated one would make them ambiguous.
	seen := make(map[string]bool, len(s.Bricks))
	for _, b := range s.Bricks {
		if b.ID == "" || seen[b.ID] {
			return fmt.Errorf("volume %s: brick %s has an empty or repeated id %q", s.Name, b.Name(), b.ID)
		}
		seen[b.ID] = true
	}
	if err := s.validateType(); err != nil {
		return err
	}
	return s.validateLayouts()
}

func (s *Spec) validateType() error {
	switch s.Type {
	case Distribute:
		for _, b := range s.Bricks {
			if b.Arbiter {
				return fmt.Errorf("volume %s: arbiter brick %s in a distribute volume", s.Name, b.Name())
			}
		}
		return nil
	case Replicate:
		return s.validateSets()
	case Disperse:
		return s.validateDisperse()
	}
	return fmt.Errorf("volume %s: type %q is not supported", s.Name, s.Type)
}

// MaxReplica is the largest replica set (pending work is a 64-bit mask).
const MaxReplica = 16

func (s *Spec) validateSets() error {
	if s.Replica < 2 || s.Replica > MaxReplica {
		return fmt.Errorf("volume %s: replica count %d is out of range 2..%d", s.Name, s.Replica, MaxReplica)
	}
	if len(s.Bricks)%s.Replica != 0 {
		return fmt.Errorf("volume %s: %d bricks do not make sets of %d", s.Name, len(s.Bricks), s.Replica)
	}
	for _, set := range s.Sets() {
		data := 0
		for _, b := range set {
			if !b.Arbiter {
				data++
			}
		}
		if data == 0 {
			return fmt.Errorf("volume %s: replica set of %s has no data brick", s.Name, set[0].Name())
		}
	}
	return nil
}

// MaxDisperse is the largest disperse set: its namespace is kept as a
// replica set's is, with a 64-bit mask of pending work whose bit 63 is
// the dirty mark.
const MaxDisperse = disperse.MaxSet

func (s *Spec) validateDisperse() error {
	if s.Disperse > MaxDisperse {
		return fmt.Errorf("volume %s: a disperse set has at most %d bricks (got %d)", s.Name, MaxDisperse, s.Disperse)
	}
	if _, _, err := disperse.NewGeometry(s.Disperse, s.Redundancy); err != nil {
		return fmt.Errorf("volume %s: disperse %d redundancy %d: %w", s.Name, s.Disperse, s.Redundancy, err)
	}
	if len(s.Bricks)%s.Disperse != 0 {
		return fmt.Errorf("volume %s: %d bricks do not make disperse sets of %d", s.Name, len(s.Bricks), s.Disperse)
	}
	for _, b := range s.Bricks {
		if b.Arbiter {
			return fmt.Errorf("volume %s: arbiter brick %s in a disperse volume", s.Name, b.Name())
		}
	}
	return nil
}

// validateLayouts checks Layout and Previous against the sets.
func (s *Spec) validateLayouts() error {
	ids := s.SetIDs()
	for _, l := range []struct {
		name string
		l    *Layout
	}{{"layout", s.Layout}, {"previous layout", s.Previous}} {
		if l.l == nil {
			continue
		}
		if err := l.l.Validate(ids); err != nil {
			return fmt.Errorf("volume %s: %s: %w", s.Name, l.name, err)
		}
	}
	return nil
}

// SetIDs returns the id of every set (the ID of its first brick), in order:
// distribute's child ids.
func (s *Spec) SetIDs() []string {
	var ids []string
	for _, set := range s.Sets() {
		ids = append(ids, set[0].ID)
	}
	return ids
}

// CurrentLayout returns Layout, or EvenLayout over the sets without one.
func (s *Spec) CurrentLayout() Layout {
	if s.Layout != nil {
		return *s.Layout
	}
	return EvenLayout(s.SetIDs())
}

// SetSize is the number of bricks in a set: Replica for a Replicate
// volume, Disperse for a Disperse volume, 1 for a Distribute volume.
func (s *Spec) SetSize() int {
	n := 0
	switch s.Type {
	case Replicate:
		n = s.Replica
	case Disperse:
		n = s.Disperse
	}
	return max(n, 1)
}

// Sets returns the replica sets of a Replicate volume, the disperse sets
// of a Disperse volume, or one set per brick for a Distribute volume.
func (s *Spec) Sets() [][]Brick {
	n := s.SetSize()
	var sets [][]Brick
	for i := 0; i+n <= len(s.Bricks); i += n {
		sets = append(sets, s.Bricks[i:i+n])
	}
	return sets
}
