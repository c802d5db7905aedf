package disperse

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// Options tune a Disperse layer.
type Options struct {
	// ConnectWait is how long an operation waits for K bricks to come up
	// (at mount time); default 2s.
	ConnectWait time.Duration
	Logger      *slog.Logger
	// NoUndo has overwrites ask the bricks to keep nothing of what they
	// replace (layer.Txn.KeepUndo): faster, and a stripe a dying client
	// tears (Geometry.Tears) stays old or new per chunk after heal.
	NoUndo bool
}

// Disperse is the layer over one disperse set of K+M bricks.
//
// The namespace of a disperse set is replicated: every brick holds every
// name, directory, mode, owner, xattr and the pending marks, exactly as a
// replica set with a quorum of K does, so Disperse hands all of that to a
// replicate.Replicate over the same bricks. Only the content of regular
// files differs: each brick holds a fragment (see Record), and Disperse
// overrides what reads, writes and truncates it.
type Disperse struct {
	*replicate.Replicate
	g        Geometry
	codec    *Codec
	children []replicate.Child
	log      *slog.Logger
	keepUndo bool           // overwrites ask the bricks to keep what they replace (undo.go)
	bg       sync.WaitGroup // releases finishing in the background
	// full are the bricks whose last answer to a write or to a probe
	// for room said they have none (roomToSpare).
	full atomic.Uint64
}

// Idle waits until the files released have cleared their Dirty marks and
// closed their fragments (Release does that in the background).
func (d *Disperse) Idle() { d.bg.Wait() }

var _ layer.Layer = (*Disperse)(nil)

// New returns the disperse layer over children (K+M bricks) with
// redundancy m. The bricks' storage must keep fragment sizes
// (posix.Options.Disperse).
func New(children []replicate.Child, m int, opts Options) (*Disperse, error) {
	g, _, err := NewGeometry(len(children), m)
	if err != nil {
		return nil, err
	}
	codec, err := NewCodec(g)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r, err := replicate.New(children, replicate.Options{
		Quorum: replicate.QuorumFixed, QuorumCount: g.K,
		ConnectWait: opts.ConnectWait, OpenAll: true, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("disperse: %w", err)
	}
	return &Disperse{Replicate: r, g: g, codec: codec, children: children, log: log, keepUndo: g.Tears() && !opts.NoUndo}, nil
}

// Geometry returns the set's shape.
func (d *Disperse) Geometry() Geometry { return d.g }
