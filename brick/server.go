// Package brick serves layers — a brick's storage stack — to remote clients
// over mortar's wire protocol. One Server serves every brick of a node; a
// client names the brick, and the volume it expects the brick to belong to,
// in its handshake.
package brick

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// Limits a server applies to every connection.
const (
	// MaxInFlight bounds the requests one connection may have running.
	MaxInFlight = 256
	// handshakeTimeout bounds how long a new connection may take to say
	// who it is.
	handshakeTimeout = 10 * time.Second
	// writeTimeout bounds how long a response may wait on a stuck peer.
	writeTimeout = 60 * time.Second
)

// Server serves any number of bricks.
type Server struct {
	log *slog.Logger

	mu     sync.Mutex
	bricks map[string]*brick
	conns  map[*conn]struct{}
	closed bool
}

type brick struct {
	volumeID string
	l        layer.Layer
}

// NewServer returns a server with no bricks. log may be nil.
func NewServer(log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{log: log, bricks: map[string]*brick{}, conns: map[*conn]struct{}{}}
}

// Add starts serving l as brick id of volume volumeID.
func (s *Server) Add(id, volumeID string, l layer.Layer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bricks[id] = &brick{volumeID: volumeID, l: l}
}

// Remove stops serving brick id and closes its connections.
func (s *Server) Remove(id string) {
	s.mu.Lock()
	delete(s.bricks, id)
	var doomed []*conn
	for c := range s.conns {
		if c.brickID == id {
			doomed = append(doomed, c)
		}
	}
	s.mu.Unlock()
	for _, c := range doomed {
		c.nc.Close()
	}
}

// Serve accepts connections on l until it is closed.
func (s *Server) Serve(l net.Listener) error {
	for {
		nc, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go s.ServeConn(nc)
	}
}

// Close closes every connection; later connections are refused.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.nc.Close()
	}
	return nil
}

// ServeConn serves one connection until it closes. The connection must
// start with wire.Magic followed by a handshake request.
func (s *Server) ServeConn(nc net.Conn) {
	defer nc.Close()
	log := s.log.With("remote", nc.RemoteAddr().String())
	nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	c, err := s.handshake(nc)
	if err != nil {
		log.Warn("brick connection refused", "err", err)
		return
	}
	nc.SetReadDeadline(time.Time{})
	if !s.register(c) {
		return
	}
	defer s.unregister(c)
	c.log = log.With("brick", c.brickID)
	c.log.Debug("client connected")
	if err := c.serve(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.log.Warn("closing brick connection", "reason", err)
	}
	c.shutdown()
}

func (s *Server) register(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// handshake reads the magic and the handshake request and answers it.
func (s *Server) handshake(nc net.Conn) (*conn, error) {
	var magic [len(wire.Magic)]byte
	if _, err := io.ReadFull(nc, magic[:]); err != nil {
		return nil, fmt.Errorf("reading magic: %w", err)
	}
	if string(magic[:]) != wire.Magic {
		return nil, fmt.Errorf("bad magic %q", magic[:])
	}
	var hb [wire.HeaderSize]byte
	h, err := wire.ReadHeader(nc, &hb)
	if err != nil {
		return nil, fmt.Errorf("reading handshake: %w", err)
	}
	if h.Kind != wire.KindRequest || h.Op != wire.OpHandshake || h.Len > 4096 {
		return nil, fmt.Errorf("expected a handshake, got kind %d op %s", h.Kind, wire.OpName(h.Op))
	}
	payload := make([]byte, h.Len)
	if _, err := io.ReadFull(nc, payload); err != nil {
		return nil, fmt.Errorf("reading handshake: %w", err)
	}
	req, err := wire.DecodeRequest(wire.OpHandshake, payload)
	if err != nil {
		return nil, err
	}
	w := wire.NewWriter(nc, writeTimeout)
	l, herr := s.admit(req)
	resp := wire.Header{Kind: wire.KindResponse, Op: wire.OpHandshake, ID: h.ID}
	if herr != nil {
		resp.Errno = uint32(syscall.EACCES)
		w.Send(resp, []byte(herr.Error()))
		return nil, herr
	}
	if err := w.Send(resp); err != nil {
		return nil, err
	}
	return newConn(nc, w, req.BrickID, l), nil
}

// admit decides whether a handshake may use the brick it names.
func (s *Server) admit(req *wire.Request) (layer.Layer, error) {
	if req.Version != wire.Version {
		return nil, fmt.Errorf("protocol version %d not supported (server speaks %d)", req.Version, wire.Version)
	}
	s.mu.Lock()
	b, ok := s.bricks[req.BrickID]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("brick %s is not served here (volume stopped?)", req.BrickID)
	}
	if b.volumeID != req.VolumeID {
		return nil, fmt.Errorf("brick %s belongs to volume %s, not %s", req.BrickID, b.volumeID, req.VolumeID)
	}
	return b.l, nil
}
