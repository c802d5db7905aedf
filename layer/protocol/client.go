// Package protocol is the client side of the wire protocol: a layer whose
// operations run on a remote brick (GlusterFS calls it protocol/client).
//
// A Client keeps one connection to its brick, reconnecting in the
// background. Liveness is checked with pings: a brick that says nothing for
// PingTimeout is declared dead, every operation in flight fails with
// ENOTCONN, and new operations wait at most ConnectWait for a new
// connection before failing the same way. Open files survive a reconnect:
// they are reopened by path on first use (locks held through them are
// lost, as the brick dropped them when the old connection closed). A file
// the brick leased its inode's POSIX locks to serves them itself until
// the brick recalls the lease (lease.go).
package protocol

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// Config says which brick to talk to and how.
type Config struct {
	Addr     string // host:port of the node serving the brick
	BrickID  string
	VolumeID string
	// Secret is the volume's secret, which the client proves it holds in
	// the handshake (never sending it).
	Secret string
	// PingInterval and PingTimeout bound how long a dead brick goes
	// unnoticed (defaults 1s and 5s).
	PingInterval, PingTimeout time.Duration
	// ConnectWait is how long an operation waits for a connection before
	// failing with ENOTCONN (default 2s).
	ConnectWait time.Duration
	// Dial connects to Addr (default net.Dialer with a 5s timeout); TLS
	// plugs in here.
	Dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	Logger *slog.Logger
	// NoLeases never asks the brick for a lease of POSIX locks: every
	// lock request is a round trip (lease.go).
	NoLeases bool
	// OnChange, if set, is told what other clients change on the brick
	// (wire.OpWatch), and layer.ChangedAll after a reconnect (notices
	// were missed meanwhile). It runs on the connection's reader: it must
	// not wait for the network.
	OnChange func(layer.Change)
	// DirLeases asks the brick, at every mkdir, to lease the new
	// directory's names to the client (dirlease.go, layer.NameLeaser).
	DirLeases bool
	// Layout is the layout generation the client gives the brick in its
	// handshake: the version of the spec whose layout places the names it
	// makes (0: none, as a healer; wire.ChallengeSize). A brick whose
	// fence is higher refuses it the operations that make names
	// (layer.ErrFenced).
	Layout uint64
	// OnRecall is handed a leased directory the brick recalls: it must
	// return once the client has sent every create it held back in that
	// directory (the lease is returned then). It runs on a goroutine of
	// its own.
	OnRecall func(dir string)
}

func (cfg *Config) setDefaults() {
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = time.Second
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = 5 * time.Second
	}
	if cfg.ConnectWait <= 0 {
		cfg.ConnectWait = 2 * time.Second
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: 5 * time.Second}
		cfg.Dial = d.DialContext
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
}

// Client is a layer.Layer whose operations run on a remote brick.
type Client struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// usedLocks is set once any lock went through this client; until then
	// Flush needs no round trip.
	usedLocks atomic.Bool

	mu        sync.Mutex
	cur       *session
	connected chan struct{} // closed while cur != nil
	gen       uint64
	served    bool // a session was published before

	redial chan struct{} // wakes run's backoff wait (see Redial)
	demand chan struct{} // wakes it no sooner than demandFloor (see Up)
}

// demandFloor is the least time between two dials that operations asked
// for (Up) while the brick was down.
const demandFloor = 100 * time.Millisecond

// New returns a client for the brick in cfg and starts connecting.
func New(cfg Config) *Client {
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		cfg: cfg, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		log:       cfg.Logger.With("brick", cfg.BrickID, "addr", cfg.Addr),
		connected: make(chan struct{}),
		redial:    make(chan struct{}, 1),
		demand:    make(chan struct{}, 1),
	}
	go c.run()
	return c
}

// Close closes the connection and fails outstanding operations.
func (c *Client) Close() error {
	c.goodbye()
	c.cancel()
	<-c.done
	return nil
}

// goodbyeWait bounds the wait for the brick's answer to a goodbye.
const goodbyeWait = time.Second

// goodbye tells the brick that the connection ends cleanly
// (wire.OpGoodbye), if it is up with nothing under way on it: a brick of
// a replicated set marks the directories a connection changed last for
// heal when it ends without one (brick/abandoned.go).
func (c *Client) goodbye() {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	if s == nil || !s.idle() || time.Since(time.Unix(0, s.lastRecv.Load())) > 2*c.cfg.PingInterval {
		return // nothing to say it to, or a brick that answers nothing lately
	}
	ctx, cancel := context.WithTimeout(c.ctx, goodbyeWait)
	defer cancel()
	if _, err := c.roundTrip(ctx, s, &wire.Request{Op: wire.OpGoodbye}, nil, nil); err != nil {
		c.log.Debug("goodbye not answered", "err", err)
	}
}

// Connected reports whether the client has a live session.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil
}

// Up reports whether the client has a live session, like Connected; when
// it has none it asks for a dial sooner than the backoff, no sooner than
// demandFloor after the last one. Layers above ask it before every
// operation (replicate's Child.Up), so a client in use reconnects to a
// restarted brick within demandFloor, while an idle one keeps the backoff.
func (c *Client) Up() bool {
	if c.Connected() {
		return true
	}
	select {
	case c.demand <- struct{}{}:
	default:
	}
	return false
}

// WaitConnected waits until the client has a live session, ctx is done or
// the client is closed; it reports whether it is connected.
func (c *Client) WaitConnected(ctx context.Context) bool {
	c.mu.Lock()
	ch := c.connected
	c.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	case <-c.ctx.Done():
	}
	return false
}

// Redial makes a client that is not connected dial its brick now, rather
// than at the end of its backoff (up to 2 s): the brick is known to be
// back (restarted by `volume start force`). A connected client ignores it.
func (c *Client) Redial() {
	select {
	case c.redial <- struct{}{}:
	default:
	}
}

// run keeps a session up until the client is closed. A brick that stays
// down is dialled again after a backoff that doubles from 100 ms to 2 s;
// Redial cuts the wait short.

func (c *Client) run() {
	defer close(c.done)
	backoff := 100 * time.Millisecond
	failures := 0
	for c.ctx.Err() == nil {
		dialed := time.Now()
		s, err := c.connect()
		if err != nil {
			failures++
			if failures == 1 {
				c.log.Warn("cannot reach brick", "err", err)
			} else {
				c.log.Debug("cannot reach brick", "err", err, "attempt", failures)
			}
			c.wait(backoff, dialed)
			select {
			case <-c.redial:
				c.log.Debug("redialling at once", "attempt", failures)
				backoff = 50 * time.Millisecond // doubled below
			default:
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		if failures > 0 {
			c.log.Info("brick connected")
		}
		failures, backoff = 0, 100*time.Millisecond
		for _, ch := range []chan struct{}{c.redial, c.demand} {
			select { // a wake-up while connected is stale
			case <-ch:
			default:
			}
		}
		c.serve(s)
	}
}

// wait waits out a backoff after the dial at dialed: until it ends, or a
// Redial, or an operation's demand (see Up) demandFloor after dialed. A
// Redial is left in its channel for run to see.
func (c *Client) wait(backoff time.Duration, dialed time.Time) {
	t := time.NewTimer(backoff)
	defer t.Stop()
	demand := c.demand
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			return
		case <-c.redial:
			c.Redial()
			return
		case <-demand:
			if d := time.Until(dialed.Add(demandFloor)); d > 0 {
				t.Reset(min(d, time.Until(dialed.Add(backoff))))
				demand = nil
				continue
			}
			return
		}
	}
}

func (c *Client) connect() (*session, error) {
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	nc, err := c.cfg.Dial(ctx, "tcp", c.cfg.Addr)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	c.mu.Lock()
	c.gen++
	gen := c.gen
	c.mu.Unlock()
	s := newSession(nc, gen, c.drop)
	s.onRecall = c.cfg.OnRecall
	if err := s.handshake(c.cfg.VolumeID, c.cfg.BrickID, c.cfg.Secret, c.cfg.Layout); err != nil {
		nc.Close()
		return nil, err
	}
	if c.cfg.OnChange != nil {
		if err := s.watch(); err != nil {
			nc.Close()
			return nil, err
		}
		s.onChange = c.cfg.OnChange
	}
	nc.SetDeadline(time.Time{})
	return s, nil
}

// serve publishes s and waits for it to end.
func (c *Client) serve(s *session) {
	c.mu.Lock()
	c.cur = s
	close(c.connected)
	again := c.served
	c.served = true
	c.mu.Unlock()
	if again && s.onChange != nil {
		s.onChange(layer.ChangedAll) // changes made while away were not told
	}
	go s.readLoop()
	pingErr := make(chan error, 1)
	go func() { pingErr <- s.pingLoop(c.cfg.PingInterval, c.cfg.PingTimeout) }()
	select {
	case <-s.dead:
	case <-c.ctx.Done():
		s.fail(context.Canceled)
	}
	// The session may have died before it was published, when drop
	// could not unpublish it yet.
	c.drop(s)
	if err := <-pingErr; err != nil {
		c.log.Warn("brick connection lost", "err", err)
	} else if c.ctx.Err() == nil {
		c.log.Warn("brick connection lost", "err", s.err)
	}
}

// drop unpublishes a failed session, so that no new call uses it.
func (c *Client) drop(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == s {
		c.cur = nil
		c.connected = make(chan struct{})
	}
}

// session returns the live session, waiting up to ConnectWait for one.
func (c *Client) session(ctx context.Context) (*session, error) {
	c.mu.Lock()
	s, wait := c.cur, c.connected
	c.mu.Unlock()
	if s != nil {
		return s, nil
	}
	t := time.NewTimer(c.cfg.ConnectWait)
	defer t.Stop()
	select {
	case <-wait:
	case <-t.C:
		return nil, syscall.ENOTCONN
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.ctx.Done():
		return nil, syscall.ENOTCONN
	}
	c.mu.Lock()
	s = c.cur
	c.mu.Unlock()
	if s == nil {
		return nil, syscall.ENOTCONN
	}
	return s, nil
}

// roundTrip sends req on s and waits for the answer. data is appended raw
// (writes); dest receives a read's data.
func (c *Client) roundTrip(ctx context.Context, s *session, req *wire.Request, data, dest []byte) (*call, error) {
	txn := layer.TxnFrom(ctx)
	if req.Pending == 0 {
		req.Pending = txn.Pending
	}
	if txn.SetSize {
		req.Size = txn.Size + 1
	}
	req.KeepUndo = req.KeepUndo || txn.KeepUndo && (req.Op == wire.OpWrite || req.Op == wire.OpWriteGap)
	var e wire.Enc
	req.Encode(&e)
	cl := &call{dest: dest, done: make(chan struct{})}
	id, err := s.send(cl, req, e.B, data)
	if err != nil {
		return nil, err
	}
	select {
	case <-cl.done:
	case <-ctx.Done():
		// Ask the brick to stop, but wait for the answer: it may be
		// writing into dest.
		s.w.Send(wire.Header{Kind: wire.KindCancel, ID: id})
		<-cl.done
	}
	if cl.err != nil {
		return nil, cl.err
	}
	if cl.errno != 0 {
		return cl, cl.errno
	}
	return cl, nil
}

// call runs a path operation on the current session (keeping its
// directory leases true to it).
func (c *Client) call(ctx context.Context, req *wire.Request) (*wire.Dec, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	if c.cfg.DirLeases {
		s.givesUp(req)
	}
	cl, err := c.roundTrip(ctx, s, req, nil, nil)
	if c.cfg.DirLeases {
		s.named(req, err)
	}
	if err != nil {
		return nil, err
	}
	return &wire.Dec{B: cl.payload}, nil
}

// post sends req for no answer, with the session's next frame or
// within a millisecond.
func (c *Client) post(s *session, req *wire.Request) {
	var e wire.Enc
	req.Encode(&e)
	s.sendLater(req.Op, e.B)
}
