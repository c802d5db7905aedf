package volume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/crypt"
	"github.com/mortarfs/mortar/layer/disperse"
	"github.com/mortarfs/mortar/layer/distribute"
	"github.com/mortarfs/mortar/layer/mdcache"
	"github.com/mortarfs/mortar/layer/nlcache"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/layer/quickread"
	"github.com/mortarfs/mortar/layer/readdirahead"
	"github.com/mortarfs/mortar/layer/replicate"
	"github.com/mortarfs/mortar/layer/writebehind"
)

// Dial connects to a brick (nil: plain TCP); TLS plugs in here.
type Dial = func(ctx context.Context, network, addr string) (net.Conn, error)

// BuildOptions tune the client-side graph.
type BuildOptions struct {
	Logger *slog.Logger
	// Dial connects to a node (default: plain TCP); TLS plugs in here.
	Dial Dial
	// Key is the volume key (crypt.KeySize bytes) of a volume with the
	// option encryption on; Build fails without it.
	Key []byte
	// Ciphertext builds an encrypted volume's graph without the crypt
	// layer, for servers that move files without reading them
	// (rebalance): they see and copy ciphertext, and need no key. Such a
	// graph has no read cache (quick-read) either, on any volume: its top
	// is distribute.
	Ciphertext bool

	// OnChange is told what other clients change on the volume, after
	// the graph's own caches forgot it, when the volume's option
	// features.cache-invalidation is on (the kernel's caches of a mount
	// are forgotten here). It must not wait for the network.
	OnChange func(layer.Change)

	// windows are write-behind's, shared by the graphs a Live builds one
	// after another (nil: Build makes them), so that an operation on the
	// new graph sends the windows of files still open on an old one.
	windows *writebehind.Windows
}

// ClientCache reports whether the spec's clients may cache at all.
func (s *Spec) ClientCache() bool { return s.Value(options.OptClientCache) != "off" }

// Encrypted reports whether the spec's volume encrypts file contents.
func (s *Spec) Encrypted() bool { return s.Value(options.OptEncryption) == "on" }

// Graph is a client-side layer stack built from a spec.
type Graph struct {
	Top     layer.Layer
	Spec    Spec
	closers []func() error
	idle    []func() // wait for work a layer finishes in the background
	clients []*protocol.Client
	windows *writebehind.Windows // write-behind's (see BuildOptions)
	// caches are the graph's layers that forget what other clients
	// change (set once Build has stacked them).
	caches   atomic.Pointer[[]layer.Forgetter]
	onChange func(layer.Change) // BuildOptions.OnChange
	crypt    *crypt.Layer       // nil: the volume is not encrypted here
}

// CheckKey fails with crypt.ErrWrongKey if the graph encrypts with a key
// that is not the volume's (see crypt.Layer.CheckKey); nil on a volume
// that is not encrypted, or seen as ciphertext. A check that cannot be
// made (no brick answers within wait) is logged, not failed: the first
// read then tells.
func (g *Graph) CheckKey(ctx context.Context, wait time.Duration, log *slog.Logger) error {
	if g.crypt == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := g.crypt.CheckKey(ctx)
	if err != nil && !errors.Is(err, crypt.ErrWrongKey) {
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		log.Warn("could not check the volume key; a wrong one fails at the first read", "volume", g.Spec.Name, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("volume %s: %w (key check value on the volume root)", g.Spec.Name, err)
	}
	return nil
}

// changed is told a change by a brick's client: the graph's caches
// forget it, then the mount's.
func (g *Graph) changed(c layer.Change) {
	if fs := g.caches.Load(); fs != nil {
		for _, f := range *fs {
			f.Forget(c)
		}
	}
	if g.onChange != nil {
		g.onChange(c)
	}
}

// watches reports whether the graph's clients ask the bricks for change
// notices: the option is on and the graph has caches to keep coherent.
func watches(spec Spec, opts BuildOptions) bool {
	return spec.Value(options.OptCacheInvalidation) == "on" && spec.ClientCache() && !opts.Ciphertext
}

// Clients are the graph's brick clients, in the order of Spec.Bricks.
func (g *Graph) Clients() []*protocol.Client { return g.clients }

// Connected reports whether the graph is connected to every brick now.
func (g *Graph) Connected() bool {
	for _, c := range g.clients {
		if !c.Connected() {
			return false
		}
	}
	return true
}

// Build connects a client to every brick of spec and stacks the volume's
// layers on top of them:
//
//	distribute ─┬─ protocol client ── brick 1
//	            ├─ protocol client ── brick 2
//	            └─ ...
//
// and for a replicated volume, one replicate layer per replica set:
//
//	distribute ─┬─ replicate ─┬─ protocol client ── brick 1
//	            │             ├─ protocol client ── brick 2
//	            │             └─ protocol client ── brick 3 (arbiter)
//	            └─ replicate ── ...
//
// and for a dispersed volume, one disperse layer per disperse set of K+M
// bricks, each brick holding a fragment of every file of the set:
//
//	distribute ─┬─ disperse ─┬─ protocol client ── brick 1
//	            │            ├─ ...
//	            │            └─ protocol client ── brick K+M
//	            └─ disperse ── ...
//
// With the option encryption on, the crypt layer goes on top of
// distribute: it sees whole files, and everything below it is ciphertext.
// Otherwise, on a distribute or replicated volume, the quick-read layer
// goes there (unless the option performance.quick-read is off): it serves
// small files from their lookups, and must not keep ciphertext. Above
// them write-behind acknowledges small sequential writes at once and sends
// them aggregated (with performance.write-behind off it is still there,
// keeping no windows of its own, to send those a mount's earlier graph
// may hold), and on top of all the negative-lookup cache (unless
// performance.nl-cache is off) answers lookups of names a directory it
// knows lacks, and over it the directory attribute cache (unless
// performance.stat-prefetch is off) answers lookups of directories, and
// over it readdir-ahead (unless performance.readdir-ahead is off) lists
// the directories of a tree being walked before they are asked for:
//
//	readdirahead ── mdcache ── nlcache ── writebehind ── quickread | crypt ── distribute ── ...
//
// With features.cache-invalidation on, every brick client watches its
// brick and hands the changes other clients make to the graph's caches
// (quick-read, nl-cache), then to BuildOptions.OnChange.
//
// Connections are made in the background; Build does not fail because a
// brick is down (its operations fail with ENOTCONN until it is back).
func Build(spec Spec, opts BuildOptions) (*Graph, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	crypted := spec.Encrypted() && !opts.Ciphertext
	if crypted && len(opts.Key) != crypt.KeySize {
		if len(opts.Key) == 0 {
			return nil, fmt.Errorf("volume %s is encrypted: give its key with -o key-file=PATH or %s", spec.Name, crypt.EnvKey)
		}
		return nil, fmt.Errorf("volume %s: its key must be %d bytes (got %d)", spec.Name, crypt.KeySize, len(opts.Key))
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Graph{Spec: spec, onChange: opts.OnChange, windows: opts.windows}
	if g.windows == nil {
		g.windows = writebehind.NewWindows(0)
	}
	createBehind := createsBehind(spec, opts)
	client := func(b Brick, connectWait time.Duration) *protocol.Client {
		cfg := BrickClientConfig(spec, b)
		cfg.ConnectWait, cfg.Dial = connectWait, opts.Dial
		cfg.Layout = spec.Version // the graph places names by its layout
		if watches(spec, opts) {
			cfg.OnChange = g.changed
		}
		if createBehind {
			cfg.DirLeases, cfg.OnRecall = true, g.windows.Recall
		}
		cfg.Logger = opts.Logger.With("volume", spec.Name, "brick", b.Name())
		c := protocol.New(cfg)
		g.closers = append(g.closers, c.Close)
		g.clients = append(g.clients, c)
		return c
	}
	var children []distribute.Child
	for _, set := range spec.Sets() {
		if spec.Type != Replicate && spec.Type != Disperse {
			children = append(children, distribute.Child{ID: set[0].ID, Layer: client(set[0], 0)})
			continue
		}
		var members []replicate.Child
		for _, b := range set {
			// Replicate and disperse do not wait for a brick that is
			// down, so neither should the brick's client.
			c := client(b, 100*time.Millisecond)
			members = append(members, replicate.Child{Name: b.Name(), Layer: c, Arbiter: b.Arbiter, Up: c.Up})
		}
		setLog := opts.Logger.With("volume", spec.Name, "set", set[0].Name())
		var l layer.Layer
		var err error
		if spec.Type == Disperse {
			var d *disperse.Disperse
			d, err = disperse.New(members, spec.Redundancy, disperseOptions(spec, setLog))
			if err == nil {
				l = d
				g.idle = append(g.idle, d.Idle)
			}
		} else {
			q, count := spec.quorum()
			l, err = replicate.New(members, replicate.Options{Quorum: q, QuorumCount: count, Logger: setLog})
		}
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("volume %s: %w", spec.Name, err)
		}
		children = append(children, distribute.Child{ID: set[0].ID, Layer: l})
	}
	top, err := distribute.New(children, distribute.Options{
		Logger:   opts.Logger,
		Layout:   toRanges(spec.Layout),
		Previous: toRanges(spec.Previous),
	})
	if err != nil {
		g.Close()
		return nil, err
	}
	g.Top = top
	var caches []layer.Forgetter // the layers that forget changes
	if crypted {
		c, err := crypt.New(top, opts.Key, crypt.Options{Logger: opts.Logger.With("volume", spec.Name)})
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("volume %s: %w", spec.Name, err)
		}
		g.Top, g.crypt = c, c
	} else if quickRead(spec, opts) {
		qr := quickread.New(top, quickReadOptions(spec))
		g.Top, caches = qr, append(caches, qr)
	}
	if !opts.Ciphertext {
		// Even off, the layer sends the windows files opened on an earlier
		// graph of the mount may still hold.
		size, _ := strconv.Atoi(spec.Value(options.OptWriteBehindWindowSize))
		age := spec.DurationOption(options.OptWriteBehindMaxAge, writebehind.DefaultMaxAge)
		g.Top = writebehind.New(g.Top, writebehind.Options{WindowSize: size, MaxAge: age,
			Off: !writesBehind(spec), Windows: g.windows, CreateBehind: createBehind,
			UnlinkBehind: createBehind && spec.Value(options.OptUnlinkBehind) == "on", Changed: g.changed})
	}
	if spec.Value(options.OptNlCache) == "on" && spec.ClientCache() && !opts.Ciphertext {
		nl := nlcache.New(g.Top, nlcache.Options{Timeout: spec.DurationOption(options.OptNlCacheTimeout, nlcache.DefaultTimeout)})
		g.Top, caches = nl, append(caches, nl)
	}
	if spec.Value(options.OptStatPrefetch) == "on" && spec.ClientCache() && !opts.Ciphertext {
		md := mdcache.New(g.Top, mdcache.Options{Timeout: spec.DurationOption(options.OptMdCacheTimeout, mdcache.DefaultTimeout)})
		g.Top, caches = md, append(caches, md)
	}
	if spec.Value(options.OptReaddirAhead) == "on" && spec.ClientCache() && !opts.Ciphertext {
		ra := readdirahead.New(g.Top, readdirahead.Options{Timeout: spec.DurationOption(options.OptMdCacheTimeout, readdirahead.DefaultTimeout)})
		g.Top, caches = ra, append(caches, ra)
		g.idle = append([]func(){ra.Close}, g.idle...) // before the layers it lists through
	}
	g.caches.Store(&caches)
	return g, nil
}

// writesBehind reports whether the graph's write-behind keeps windows.
func writesBehind(spec Spec) bool {
	return spec.Value(options.OptWriteBehind) == "on" && spec.ClientCache()
}

// createsBehind reports whether the graph holds creates back: the option
// is on, write-behind keeps windows, and the layers below write-behind
// make a file in one go as the client sees it (not ciphertext; disperse
// encodes the fragments itself).
func createsBehind(spec Spec, opts BuildOptions) bool {
	return spec.Value(options.OptCreateBehind) == "on" && writesBehind(spec) &&
		!spec.Encrypted() && !opts.Ciphertext
}

// quickRead reports whether the graph gets the quick-read layer: if the
// option is on and the graph is not one that moves files (Ciphertext).
func quickRead(spec Spec, opts BuildOptions) bool {
	return spec.Value(options.OptQuickRead) == "on" && spec.ClientCache() && !opts.Ciphertext
}

// disperseOptions are the options of spec's disperse sets, logging to
// log.
func disperseOptions(spec Spec, log *slog.Logger) disperse.Options {
	return disperse.Options{Logger: log, NoUndo: spec.Value(options.OptKeepUndo) == "off"}
}

// quickReadOptions reads the quick-read options of spec; what is unset or
// malformed takes the layer's default.
func quickReadOptions(spec Spec) quickread.Options {
	size, err := strconv.Atoi(spec.Value(options.OptQuickReadMaxFileSize))
	if err != nil {
		size = quickread.DefaultMaxFileSize
	}
	return quickread.Options{
		MaxFileSize: size,
		Timeout:     spec.DurationOption(options.OptQuickReadCacheTimeout, quickread.DefaultTimeout),
	}
}

// toRanges converts a spec layout for distribute (nil stays nil).
func toRanges(l *Layout) []distribute.Range {
	if l == nil {
		return nil
	}
	out := make([]distribute.Range, len(l.Ranges))
	for i, r := range l.Ranges {
		out[i] = distribute.Range{Start: r.Start, Child: r.Child}
	}
	return out
}

// Close releases every connection of the graph.
func (g *Graph) Close() error {
	g.windows.AwaitRemovals() // sent through this graph's clients, maybe
	for _, wait := range g.idle {
		wait() // disperse clears the dirty marks of files just released
	}
	var first error
	for _, c := range g.closers {
		if err := c(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// BrickClientConfig is how a client reaches brick b of spec: its address,
// the ids its handshake names, the volume's secret, the volume's ping
// timeout and whether it asks for lock leases. Callers add the dialer, the connect wait and the logger.
func BrickClientConfig(spec Spec, b Brick) protocol.Config {
	return protocol.Config{
		Addr: b.Addr, BrickID: b.ID, VolumeID: spec.ID, Secret: spec.Secret,
		PingTimeout: spec.DurationOption(options.OptPingTimeout, 0),
		NoLeases:    spec.Value(options.OptLockLeases) != "on" || !spec.ClientCache(),
	}
}

// quorum is the quorum rule of the volume's sets: a replicated volume's
// cluster.quorum-type and -count, K bricks of a dispersed one's.
func (s *Spec) quorum() (q string, count int) {
	if s.Type == Disperse {
		return replicate.QuorumFixed, s.Disperse - s.Redundancy
	}
	count, _ = strconv.Atoi(s.Value(options.OptQuorumCount))
	return s.Value(options.OptQuorumType), count
}

// Quorate reports whether the bricks of m (bit i: a set's i-th brick)
// make a quorum of one of the volume's sets: whether its clients let them
// take a change (for heal.Options.Quorate).
func (s *Spec) Quorate(m replicate.Mask) bool {
	q, count := s.quorum()
	return replicate.Quorate(q, count, s.SetSize(), m)
}
