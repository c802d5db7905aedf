package protocol

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// session is one live connection to the brick. When it fails, every call
// in flight fails with ENOTCONN and the client starts a new session.
type session struct {
	nc     net.Conn
	w      *wire.Writer
	gen    uint64
	nextID atomic.Uint64
	// lastRecv is when the last frame arrived (unix nanoseconds).
	lastRecv atomic.Int64

	mu      sync.Mutex
	pending map[uint64]*call
	err     error
	dead    chan struct{}
	// onDead runs once when the session fails.
	onDead func(*session)
	// onChange takes the changes the brick reports (nil: not watching).
	onChange func(layer.Change)
	// leases are the lock leases held, by id (lease.go); recalled are
	// leases recalled before they were known here, by when.
	leases   map[uint64]*file
	recalled map[uint64]time.Time
	// dirs are the directory leases held, by path and by id; dirRecalled
	// are those recalled before they were known (dirlease.go). onRecall
	// sends what the client held back in a directory whose lease is
	// recalled.
	dirs        map[string]*dirLease
	dirByID     map[uint64]*dirLease
	dirRecalled map[uint64]time.Time
	onRecall    func(dir string)
}

// call is one request waiting for its response.
type call struct {
	dest    []byte // a read's buffer: the response data lands here
	done    chan struct{}
	errno   syscall.Errno
	payload []byte
	n       int
	err     error
}

func newSession(nc net.Conn, gen uint64, onDead func(*session)) *session {
	s := &session{
		nc: nc, gen: gen, onDead: onDead,
		w:           wire.NewWriter(nc, 0),
		pending:     map[uint64]*call{},
		dead:        make(chan struct{}),
		leases:      map[uint64]*file{},
		recalled:    map[uint64]time.Time{},
		dirs:        map[string]*dirLease{},
		dirByID:     map[uint64]*dirLease{},
		dirRecalled: map[uint64]time.Time{},
	}
	s.lastRecv.Store(time.Now().UnixNano())
	return s
}

// handshake introduces the client to the brick, and answers the brick's
// challenge with the volume's secret (wire/msgs.go), giving its layout
// generation.
func (s *session) handshake(volumeID, brickID, secret string, layout uint64) error {
	req := wire.Request{Op: wire.OpHandshake, Version: wire.Version, VolumeID: volumeID, BrickID: brickID, Cookie: layout}
	challenge, err := s.exchange([]byte(wire.Magic), &req)
	if err != nil {
		return err
	}
	if len(challenge) != wire.ChallengeSize {
		return fmt.Errorf("the brick's challenge is %d bytes, not %d", len(challenge), wire.ChallengeSize)
	}
	req.Proof = wire.HandshakeProof(secret, volumeID, brickID, challenge)
	_, err = s.exchange(nil, &req)
	return err
}

// exchange sends a request on a connection not served yet (the
// handshake, the watch), after prefix, and returns the payload of the
// brick's answer.
func (s *session) exchange(prefix []byte, req *wire.Request) ([]byte, error) {
	var body wire.Enc
	req.Encode(&body)
	h := wire.Header{Kind: wire.KindRequest, Op: req.Op, ID: 0, Len: uint32(len(body.B))}
	var hb [wire.HeaderSize]byte
	h.Put(hb[:])
	if _, err := s.nc.Write(append(append(prefix, hb[:]...), body.B...)); err != nil {
		return nil, err
	}
	resp, err := wire.ReadHeader(s.nc, &hb)
	if err != nil {
		return nil, fmt.Errorf("reading %s answer: %w", wire.OpName(req.Op), err)
	}
	if resp.Kind != wire.KindResponse || resp.Op != req.Op || resp.Len > 4096 {
		return nil, fmt.Errorf("unexpected %s answer (kind %d op %d)", wire.OpName(req.Op), resp.Kind, resp.Op)
	}
	msg := make([]byte, resp.Len)
	if _, err := io.ReadFull(s.nc, msg); err != nil {
		return nil, err
	}
	if resp.Errno != 0 {
		if len(msg) == 0 {
			return nil, fmt.Errorf("%s refused: %w", wire.OpName(req.Op), syscall.Errno(resp.Errno))
		}
		return nil, fmt.Errorf("refused: %s", msg)
	}
	return msg, nil
}

// watch asks the brick to tell this connection what others change.
func (s *session) watch() error {
	_, err := s.exchange(nil, &wire.Request{Op: wire.OpWatch, Flags: wire.WatchOn})
	return err
}

// fail ends the session and every call in it. The session is unpublished
// first (onDead): a caller that gets ENOTCONN from it, and at once asks
// for a session again, must wait for a new one, not be handed this one.
func (s *session) fail(err error) {
	s.onDead(s)
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	pending := s.pending
	s.pending = nil
	close(s.dead)
	s.mu.Unlock()
	s.nc.Close()
	for _, c := range pending {
		c.err = syscall.ENOTCONN
		close(c.done)
	}
}

// idle reports whether the session is live with no request waiting for
// its answer.
func (s *session) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil && len(s.pending) == 0
}

// send registers c and sends its request frame.
func (s *session) send(c *call, req *wire.Request, body []byte, data []byte) (uint64, error) {
	id := s.nextID.Add(1)
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return 0, syscall.ENOTCONN
	}
	s.pending[id] = c
	s.mu.Unlock()
	h := wire.Header{Kind: wire.KindRequest, Op: req.Op, ID: id}
	if req.KeepUndo {
		h.Flags |= wire.FlagKeepUndo
	}
	if err := s.w.Send(h, body, data); err != nil {
		s.fail(err)
		return 0, syscall.ENOTCONN
	}
	return id, nil
}

// sendLater sends a request that gets no answer (wire.FlagNoReply), with
// the next frame or within a millisecond (wire.Writer.SendLater).
func (s *session) sendLater(op uint8, body []byte) {
	h := wire.Header{Kind: wire.KindRequest, Op: op, ID: s.nextID.Add(1), Flags: wire.FlagNoReply}
	if err := s.w.SendLater(h, body); err != nil {
		s.fail(err)
	}
}

// readLoop receives responses until the connection fails.
func (s *session) readLoop() {
	var hb [wire.HeaderSize]byte
	for {
		h, err := wire.ReadHeader(s.nc, &hb)
		if err != nil {
			s.fail(err)
			return
		}
		s.lastRecv.Store(time.Now().UnixNano())
		if err := s.receive(h); err != nil {
			s.fail(err)
			return
		}
	}
}

func (s *session) receive(h wire.Header) error {
	switch h.Kind {
	case wire.KindPong:
		if h.Len != 0 {
			return errors.New("pong with payload")
		}
		return nil
	case wire.KindNotify:
		return s.notice(h)
	case wire.KindRecall:
		return s.recall(h)
	case wire.KindRecallDir:
		return s.recallDir(h)
	case wire.KindResponse:
	default:
		return fmt.Errorf("unexpected frame kind %d from brick", h.Kind)
	}
	s.mu.Lock()
	c := s.pending[h.ID]
	delete(s.pending, h.ID)
	s.mu.Unlock()
	if c == nil { // a forgotten call: discard its answer
		_, err := io.CopyN(io.Discard, s.nc, int64(h.Len))
		return err
	}
	c.errno = syscall.Errno(h.Errno)
	var err error
	if c.dest != nil && h.Errno == 0 {
		if int(h.Len) > len(c.dest) {
			err = fmt.Errorf("read answer of %d bytes for a %d-byte buffer", h.Len, len(c.dest))
		} else {
			c.n, err = io.ReadFull(s.nc, c.dest[:h.Len])
		}
	} else {
		c.payload = make([]byte, h.Len)
		_, err = io.ReadFull(s.nc, c.payload)
	}
	if err != nil {
		c.err = syscall.ENOTCONN
	}
	close(c.done)
	return err
}

// pingLoop declares the brick dead when nothing arrives within timeout.
func (s *session) pingLoop(interval, timeout time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.dead:
			return nil
		case <-t.C:
		}
		idle := time.Since(time.Unix(0, s.lastRecv.Load()))
		if idle > timeout {
			err := fmt.Errorf("brick did not answer for %s", idle.Round(time.Millisecond))
			s.fail(err)
			return err
		}
		if idle >= interval/2 {
			if err := s.w.Send(wire.Header{Kind: wire.KindPing}); err != nil {
				s.fail(err)
				return err
			}
		}
	}
}

// notice reads a KindNotify frame and hands its changes on.
func (s *session) notice(h wire.Header) error {
	if s.onChange == nil {
		return errors.New("change notice on a connection that did not watch")
	}
	if h.Len > wire.MaxPayload {
		return wire.ErrFrameTooLarge
	}
	b := make([]byte, h.Len)
	if _, err := io.ReadFull(s.nc, b); err != nil {
		return err
	}
	cs, err := wire.DecodeChanges(b)
	if err != nil {
		return err
	}
	for _, c := range cs {
		s.onChange(c)
	}
	return nil
}
