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

	"github.com/mortarfs/mortar/internal/proof"
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
	// served counts the registered connections until each has shut
	// down (its requests done, its files released): Close waits for them,
	// so that the storage can be closed after it.
	served sync.WaitGroup
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
	watchers *watchers   // connections told of changes (notify.go)
	// dirLeases are directories leased to clients (dirlease.go).
	dirLeases *dirLeases
	opts      BrickOptions
	fence     fence // the lowest layout generation that may make names (fence.go)
}

// BrickOptions say how a brick serves its clients.
type BrickOptions struct {
	// MarkAbandoned: the brick is one of a replicated set. A client
	// whose connection ends with a file it wrote still open may have
	// died between the bricks of the set (one has a write, another not,
	// and nothing blames either), so the brick marks the file
	// layer.Dirty for the healer as it releases it (see abandoned.go).
	MarkAbandoned bool
	// MarkAbandonedNames: the brick is one of a dispersed set. It marks
	// the directories whose names a client that went away without a
	// goodbye changed last (abandoned.go), as a replicated brick does;
	// files are the disperse writers' own to mark.
	MarkAbandonedNames bool
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
func (s *Server) Add(id, volumeID string, l layer.Layer) { s.AddWith(id, volumeID, l, BrickOptions{}) }

// AddWith is Add with options.
func (s *Server) AddWith(id, volumeID string, l layer.Layer, o BrickOptions) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bricks[id] = &brick{volumeID: volumeID, l: l, entries: &entryLocks{}, watchers: &watchers{}, dirLeases: newDirLeases(), opts: o}
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

// Close closes every connection, and returns once each has shut down
// (no request of theirs runs any more, their files are released): the
// layers below may then be closed. Later connections are refused.
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
	s.served.Wait()
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
	c.log.Debug("client gone")
}

func (s *Server) register(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	s.served.Add(1)
	return true
}

// unregister follows the connection's shutdown.
func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.served.Done()
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

// handshake reads the magic and the two handshake requests (wire/msgs.go)
// and answers them: a challenge to the first, if the brick it names is
// here; admission to the second, if it proves the volume's secret and the
// volume's rules permit the client. On success, release gives back the
// connection's place in its client's connection limit.
func (s *Server) handshake(nc net.Conn, p *peer) (c *conn, release func(), err error) {
	if err := readMagic(nc, p); err != nil {
		return nil, nil, err
	}
	w := wire.NewWriter(nc, writeTimeout)
	hello, id, err := readHandshake(nc)
	if err != nil {
		return nil, nil, err
	}
	b, src, err := s.introduce(hello, p)
	if err != nil {
		return nil, nil, refuse(w, id, err)
	}
	a := &admission{volumeID: hello.VolumeID, brickID: hello.BrickID, peer: p, challenge: proof.Nonce(wire.ChallengeSize)}
	if err := w.Send(handshakeAnswer(id, 0), a.challenge); err != nil {
		return nil, nil, err
	}
	if a.proof, id, err = readProof(nc, hello); err != nil {
		return nil, nil, refuse(w, id, err)
	}
	if release, err = s.admit(src, a); err != nil {
		return nil, nil, refuse(w, id, err)
	}
	if err := w.Send(handshakeAnswer(id, 0)); err != nil {
		release()
		return nil, nil, err
	}
	c = newConn(nc, w, a.brickID, b.l)
	c.entries = b.entries
	c.watchers = b.watchers
	c.dirLeases = b.dirLeases
	c.markAbandoned = b.opts.MarkAbandoned
	c.touched.on = (b.opts.MarkAbandoned || b.opts.MarkAbandonedNames) && hello.Version >= goodbyeVersion
	c.touched.meta = b.opts.MarkAbandoned
	c.admitted = a
	c.fence, c.layoutGen = &b.fence, hello.Cookie
	return c, release, nil
}

// readMagic reads wire.Magic.
func readMagic(nc net.Conn, p *peer) error {
	var magic [len(wire.Magic)]byte
	if _, err := io.ReadFull(nc, magic[:]); err != nil {
		return fmt.Errorf("reading magic: %w", err)
	}
	if string(magic[:]) == wire.Magic {
		return nil
	}
	if p.needTLS {
		return fmt.Errorf("TLS handshake failed: not TLS (and not mortar: %q)", magic[:])
	}
	return fmt.Errorf("bad magic %q", magic[:])
}

// readHandshake reads a handshake request and returns it with its id.
func readHandshake(nc net.Conn) (*wire.Request, uint64, error) {
	var hb [wire.HeaderSize]byte
	h, err := wire.ReadHeader(nc, &hb)
	if err != nil {
		return nil, 0, fmt.Errorf("reading handshake: %w", err)
	}
	if h.Kind != wire.KindRequest || h.Op != wire.OpHandshake || h.Len > 4096 {
		return nil, 0, fmt.Errorf("expected a handshake, got kind %d op %s", h.Kind, wire.OpName(h.Op))
	}
	payload := make([]byte, h.Len)
	if _, err := io.ReadFull(nc, payload); err != nil {
		return nil, 0, fmt.Errorf("reading handshake: %w", err)
	}
	req, err := wire.DecodeRequest(wire.OpHandshake, payload)
	return req, h.ID, err
}

// readProof reads the second handshake, which must name what the first
// did, and returns its proof.
func readProof(nc net.Conn, hello *wire.Request) ([]byte, uint64, error) {
	req, id, err := readHandshake(nc)
	if err != nil {
		return nil, id, err
	}
	if req.VolumeID != hello.VolumeID || req.BrickID != hello.BrickID || len(req.Proof) == 0 {
		return nil, id, fmt.Errorf("the second handshake does not answer the challenge for volume %s, brick %s", hello.VolumeID, hello.BrickID)
	}
	return req.Proof, id, nil
}

// handshakeAnswer is the header of an answer to handshake id.
func handshakeAnswer(id uint64, errno syscall.Errno) wire.Header {
	return wire.Header{Kind: wire.KindResponse, Op: wire.OpHandshake, ID: id, Errno: uint32(errno)}
}

// refuse answers handshake id with EACCES and err's message, and returns
// err.
func refuse(w *wire.Writer, id uint64, err error) error {
	w.Send(handshakeAnswer(id, syscall.EACCES), []byte(err.Error()))
	return err
}

// errNeedTLS answers a plain client of a TLS server.
var errNeedTLS = errors.New("TLS handshake failed: not TLS: this brick accepts only TLS connections with a certificate of the cluster's CA (give the client --tls-dir and --tls-name)")

// introduce decides whether a first handshake may go on to the challenge:
// the brick it names must be served here for the volume the client
// expects. It returns the brick and its volume's rules.
func (s *Server) introduce(req *wire.Request, p *peer) (*brick, AuthSource, error) {
	if p.needTLS {
		return nil, nil, errNeedTLS
	}
	if req.Version < wire.MinVersion || req.Version > wire.Version {
		return nil, nil, fmt.Errorf("protocol version %d not supported (server speaks %d to %d)", req.Version, wire.MinVersion, wire.Version)
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
	return b, src, nil
}

// admit decides whether a client that answered the challenge may use the
// brick: the volume's rules must permit it, and it must be under its
// connection limit, where admit takes a place (release gives it back).
func (s *Server) admit(src AuthSource, a *admission) (release func(), err error) {
	if err := permit(src, a); err != nil {
		return nil, err
	}
	return s.takeConnSlot(a.peer)
}

// permit applies the volume's access rules from src (nil: none) to a:
// the client's address or certificate must be admitted and its proof must
// be of the volume's secret. Node certificates always pass.
func permit(src AuthSource, a *admission) error {
	if src == nil || a.peer.kind == tlsconf.KindNode {
		return nil
	}
	rules, err := src.Rules()
	if err != nil {
		return fmt.Errorf("volume %s: access rules unreadable, so every client is refused: %w", a.volumeID, err)
	}
	if err := rules.Permit(a.peer.name, a.peer.kind, a.peer.addr); err != nil {
		return fmt.Errorf("volume %s: %w", a.volumeID, err)
	}
	if err := rules.CheckSecret(a.proves); err != nil {
		return fmt.Errorf("volume %s: %w", a.volumeID, err)
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
		if err := permit(s.auth[c.admitted.volumeID], c.admitted); err != nil {
			c.log.Warn("closing a connection the access rules now refuse", "err", err)
			refused = append(refused, c)
		}
	}
	s.mu.Unlock()
	for _, c := range refused {
		c.nc.Close()
	}
}

// admission is what a connection was admitted with, for Recheck: its
// proof is checked again against the volume's secret of the moment.
type admission struct {
	volumeID, brickID string
	peer              *peer
	challenge, proof  []byte
}

// proves reports whether the client's proof is of secret.
func (a *admission) proves(secret string) bool {
	return wire.ValidProof(a.proof, secret, a.volumeID, a.brickID, a.challenge)
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
