// Package brick serves layers — a brick's storage stack — to remote clients
// over mortar's wire protocol. One Server serves every brick of a node; a
// client names the brick, and the volume it expects the brick to belong to,
// in its handshake.
//
// With UseTLS, every connection must open with a TLS 1.3 handshake and a
// client certificate of the cluster's CA. The brick then admits a client
// to a volume's brick only if the volume's rules (SetAuth) permit the
// client's certificate name and address, and while the client holds fewer
// than MaxConnsPerClient connections. Every refusal is answered, where the
// client can still hear it, with EACCES and a message saying why, and
// logged here as one "brick connection refused" line.
//
// A healer may hold a directory's names still (wire op entrylk,
// entrylock.go): other connections' operations on names in it then wait,
// boundedly, until the healer lets go or its connection ends.
package brick

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/tlsconf"
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
	// DefaultMaxConnsPerClient is a new server's MaxConnsPerClient.
	DefaultMaxConnsPerClient = 64
)

// Server serves any number of bricks.
type Server struct {
	log *slog.Logger

	// MaxConnsPerClient bounds the connections one client may hold at
	// once (default DefaultMaxConnsPerClient; 0 or less: no bound). A
	// client is a certificate name at one IP address with TLS, an IP
	// address without; node certificates are not bound. Set it before
	// Serve.
	MaxConnsPerClient int

	mu     sync.Mutex
	bricks map[string]*brick
	conns  map[*conn]struct{}
	closed bool
	// TLS and access control (see UseTLS, SetAuth).
	tls       *tlsconf.Identity
	auth      map[string]AuthSource // by volume ID
	perClient map[string]int        // connections admitted, by peer.key
	limits    Limits                // see SetLimits (limits.go)
}

// AuthSource gives a volume's current access rules. It is asked at every
// handshake, so rules can change while the server runs; an error refuses
// every client but nodes.
type AuthSource interface {
	Rules() (tlsconf.AuthRules, error)
}

type staticRules tlsconf.AuthRules

func (r staticRules) Rules() (tlsconf.AuthRules, error) { return tlsconf.AuthRules(r), nil }

type brick struct {
	volumeID string
	l        layer.Layer
	entries  *entryLocks // directories healers hold still
}

// NewServer returns a server with no bricks. log may be nil.
func NewServer(log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		log: log, MaxConnsPerClient: DefaultMaxConnsPerClient,
		bricks: map[string]*brick{}, conns: map[*conn]struct{}{},
		auth: map[string]AuthSource{}, perClient: map[string]int{},
	}
}

// UseTLS makes the server accept only TLS connections with a client
// certificate of id's CA, presenting id's certificate. Call it before
// Serve.
func (s *Server) UseTLS(id *tlsconf.Identity) {
	s.mu.Lock()
	s.tls = id
	s.mu.Unlock()
}

// SetAuth sets the access rules of volume volumeID's bricks; new
// connections are checked against them (established ones stay).
func (s *Server) SetAuth(volumeID string, r tlsconf.AuthRules) {
	s.SetAuthSource(volumeID, staticRules(r))
}

// SetAuthSource makes src the source of volume volumeID's access rules
// (nil: no rules).
func (s *Server) SetAuthSource(volumeID string, src AuthSource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if src == nil {
		delete(s.auth, volumeID)
		return
	}
	s.auth[volumeID] = src
}

// Add starts serving l as brick id of volume volumeID.
func (s *Server) Add(id, volumeID string, l layer.Layer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bricks[id] = &brick{volumeID: volumeID, l: l, entries: &entryLocks{}}
}

// entriesOf returns the held directories of brick id (nil if not served).
func (s *Server) entriesOf(id string) *entryLocks {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.bricks[id]; b != nil {
		return b.entries
	}
	return nil
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
// start with wire.Magic followed by a handshake request, or, with UseTLS,
// with a TLS handshake and then those.
func (s *Server) ServeConn(nc net.Conn) {
	defer nc.Close()
	log := s.log.With("remote", nc.RemoteAddr().String())
	nc.SetDeadline(time.Now().Add(handshakeTimeout))
	p, sc, err := s.secure(nc)
	if err != nil {
		log.Warn("brick connection refused", "err", err)
		return
	}
	if sc != nc {
		defer sc.Close()
	}
	if p.name != "" {
		log = log.With("client", p.name)
	}
	c, release, err := s.handshake(sc, p)
	if err != nil {
		log.Warn("brick connection refused", "err", err)
		return
	}
	defer release()
	nc.SetDeadline(time.Time{})
	if !s.register(c) {
		return
	}
	defer s.unregister(c)
	c.log = log.With("brick", c.brickID)
	c.limits = s.Limits()
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

// peer is who is at the other end of a connection.
type peer struct {
	addr      net.Addr
	name      string       // certificate name ("" without TLS)
	kind      tlsconf.Kind // "" without TLS
	needTLS   bool         // a plain client of a TLS server
	connLimit int
}

// key names the client for the connection limit: its IP address, and its
// certificate's name with TLS.
func (p *peer) key() string {
	host := p.addr.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if p.name == "" {
		return host
	}
	return p.name + "@" + host
}

func (p *peer) String() string {
	if p.name == "" {
		return p.key()
	}
	return fmt.Sprintf("%q (%s certificate) at %s", p.name, p.kind, p.addr)
}

// secure runs the TLS handshake, if the server uses TLS, and says who the
// peer is. A plain mortar client of a TLS server gets through, marked
// needTLS, so that its handshake can be answered with a refusal it
// understands.
func (s *Server) secure(nc net.Conn) (*peer, net.Conn, error) {
	s.mu.Lock()
	id := s.tls
	s.mu.Unlock()
	p := &peer{addr: nc.RemoteAddr(), connLimit: s.MaxConnsPerClient}
	if id == nil {
		return p, nc, nil
	}
	sniffed, isTLS, err := tlsconf.Sniff(nc)
	if err != nil {
		return nil, nil, tlsconf.DescribeHandshakeError(err)
	}
	if !isTLS {
		p.needTLS = true
		return p, sniffed, nil
	}
	tc := tls.Server(sniffed, id.ServerConfig())
	if err := tc.Handshake(); err != nil {
		return nil, nil, tlsconf.DescribeHandshakeError(err)
	}
	var ok bool
	if p.name, p.kind, ok = tlsconf.PeerIdentity(tc.ConnectionState()); !ok {
		tc.Close()
		return nil, nil, errors.New("TLS handshake failed: no client certificate")
	}
	return p, tc, nil
}

// handshake reads the magic and the handshake request and answers it. On
// success, release gives back the connection's place in its client's
// connection limit.
func (s *Server) handshake(nc net.Conn, p *peer) (c *conn, release func(), err error) {
	var magic [len(wire.Magic)]byte
	if _, err := io.ReadFull(nc, magic[:]); err != nil {
		return nil, nil, fmt.Errorf("reading magic: %w", err)
	}
	if string(magic[:]) != wire.Magic {
		if p.needTLS {
			return nil, nil, fmt.Errorf("TLS handshake failed: not TLS (and not mortar: %q)", magic[:])
		}
		return nil, nil, fmt.Errorf("bad magic %q", magic[:])
	}
	var hb [wire.HeaderSize]byte
	h, err := wire.ReadHeader(nc, &hb)
	if err != nil {
		return nil, nil, fmt.Errorf("reading handshake: %w", err)
	}
	if h.Kind != wire.KindRequest || h.Op != wire.OpHandshake || h.Len > 4096 {
		return nil, nil, fmt.Errorf("expected a handshake, got kind %d op %s", h.Kind, wire.OpName(h.Op))
	}
	payload := make([]byte, h.Len)
	if _, err := io.ReadFull(nc, payload); err != nil {
		return nil, nil, fmt.Errorf("reading handshake: %w", err)
	}
	req, err := wire.DecodeRequest(wire.OpHandshake, payload)
	if err != nil {
		return nil, nil, err
	}
	w := wire.NewWriter(nc, writeTimeout)
	l, release, herr := s.admit(req, p)
	resp := wire.Header{Kind: wire.KindResponse, Op: wire.OpHandshake, ID: h.ID}
	if herr != nil {
		resp.Errno = uint32(syscall.EACCES)
		w.Send(resp, []byte(herr.Error()))
		return nil, nil, herr
	}
	if err := w.Send(resp); err != nil {
		release()
		return nil, nil, err
	}
	c = newConn(nc, w, req.BrickID, l)
	c.entries = s.entriesOf(req.BrickID)
	c.admitted = &admission{volumeID: req.VolumeID, peer: p, secret: req.Secret}
	return c, release, nil
}

// errNeedTLS answers a plain client of a TLS server.
var errNeedTLS = errors.New("TLS handshake failed: not TLS: this brick accepts only TLS connections with a certificate of the cluster's CA (give the client --tls-dir and --tls-name)")

// admit decides whether a handshake may use the brick it names: the
// brick must be served here for the volume the client expects, the
// volume's rules must permit the client, and the client must be under its
// connection limit, where admit takes a place (release gives it back).
func (s *Server) admit(req *wire.Request, p *peer) (l layer.Layer, release func(), err error) {
	if p.needTLS {
		return nil, nil, errNeedTLS
	}
	if req.Version != wire.Version {
		return nil, nil, fmt.Errorf("protocol version %d not supported (server speaks %d)", req.Version, wire.Version)
	}
	s.mu.Lock()
	b, ok := s.bricks[req.BrickID]
	src := s.auth[req.VolumeID]
	s.mu.Unlock()
	if !ok {
		return nil, nil, fmt.Errorf("brick %s is not served here (volume stopped?)", req.BrickID)
	}
	if b.volumeID != req.VolumeID {
		return nil, nil, fmt.Errorf("brick %s belongs to volume %s, not %s", req.BrickID, b.volumeID, req.VolumeID)
	}
	if err := permit(src, b.volumeID, p, req.Secret); err != nil {
		return nil, nil, err
	}
	if release, err = s.takeConnSlot(p); err != nil {
		return nil, nil, err
	}
	return b.l, release, nil
}

// permit applies the volume's access rules from src (nil: none) to p,
// which presented secret: its address or certificate must be admitted and
// the secret must be the volume's. Node certificates always pass.
func permit(src AuthSource, volumeID string, p *peer, secret string) error {
	if src == nil || p.kind == tlsconf.KindNode {
		return nil
	}
	rules, err := src.Rules()
	if err != nil {
		return fmt.Errorf("volume %s: access rules unreadable, so every client is refused: %w", volumeID, err)
	}
	if err := rules.Permit(p.name, p.kind, p.addr); err != nil {
		return fmt.Errorf("volume %s: %w", volumeID, err)
	}
	if err := rules.CheckSecret(secret); err != nil {
		return fmt.Errorf("volume %s: %w", volumeID, err)
	}
	return nil
}

// Recheck applies the volumes' current access rules to the connections
// already admitted, and closes those the rules now refuse: a change of
// auth.allow or auth.reject reaches mounts already connected, not only new
// ones. The node calls it (SIGHUP to a brick process) when it rewrites the
// rules.
func (s *Server) Recheck() {
	s.mu.Lock()
	var refused []*conn
	for c := range s.conns {
		if c.admitted == nil {
			continue
		}
		if err := permit(s.auth[c.admitted.volumeID], c.admitted.volumeID, c.admitted.peer, c.admitted.secret); err != nil {
			c.log.Warn("closing a connection the access rules now refuse", "err", err)
			refused = append(refused, c)
		}
	}
	s.mu.Unlock()
	for _, c := range refused {
		c.nc.Close()
	}
}

// admission is what a connection was admitted with, for Recheck.
type admission struct {
	volumeID string
	peer     *peer
	secret   string
}

// takeConnSlot counts a new connection of p's client against its limit.
func (s *Server) takeConnSlot(p *peer) (release func(), err error) {
	if p.connLimit <= 0 || p.kind == tlsconf.KindNode {
		return func() {}, nil
	}
	key := p.key()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.perClient[key]; n >= p.connLimit {
		return nil, fmt.Errorf("too many connections from client %s: it has %d, the limit per client", p, n)
	}
	s.perClient[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.perClient[key]--; s.perClient[key] <= 0 {
				delete(s.perClient, key)
			}
		})
	}, nil
}
