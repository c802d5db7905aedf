package sim

import (
	"context"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/brick"
)

// network connects the clients of a run to its bricks in memory: every
// connection is a net.Pipe whose brick end a brick.Server serves. Each
// (client, brick) link can be cut (a partition: its connections closed,
// new ones refused), slowed (a delay before every write), or armed to die
// after a number of writes (a client dying in the middle of sending an
// operation to its bricks).
type network struct {
	mu      sync.Mutex
	servers map[string]*brick.Server // by brick address; absent: down
	cut     map[link]bool
	slow    map[link]time.Duration
	budget  map[link]int // writes left before the link dies (armed links)
	conns   map[link][]*pipeEnd
	dead    map[int]bool // clients crashed: cut off for good
}

// link is one client's way to one brick.
type link struct {
	client int
	addr   string
}

func newNetwork() *network {
	return &network{servers: map[string]*brick.Server{}, cut: map[link]bool{},
		slow: map[link]time.Duration{}, budget: map[link]int{}, conns: map[link][]*pipeEnd{}, dead: map[int]bool{}}
}

// dialer is client's Dial function (protocol.Config.Dial).
func (n *network) dialer(client int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		l := link{client, addr}
		srv := n.servers[addr]
		if srv == nil || n.cut[l] || n.dead[client] {
			return nil, syscall.ECONNREFUSED
		}
		c, s := net.Pipe()
		ce, se := &pipeEnd{Conn: c, n: n, l: l, client: true}, &pipeEnd{Conn: s, n: n, l: l}
		n.conns[l] = append(n.conns[l], ce, se)
		go srv.ServeConn(se)
		return ce, nil
	}
}

// serve makes the brick at addr reachable through srv (nil: down, every
// connection to it closed).
func (n *network) serve(addr string, srv *brick.Server) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if srv == nil {
		delete(n.servers, addr)
		for l := range n.conns {
			if l.addr == addr {
				n.closeLocked(l)
			}
		}
		return
	}
	n.servers[addr] = srv
}

// partition cuts (or, with on false, mends) the link.
func (n *network) partition(l link, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !on {
		delete(n.cut, l)
		return
	}
	n.cut[l] = true
	n.closeLocked(l)
}

// isCut reports whether the link is partitioned.
func (n *network) isCut(l link) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut[l]
}

// isolate cuts every link of client, for good: a crashed client.
func (n *network) isolate(client int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dead[client] = true
	for l := range n.conns {
		if l.client == client {
			n.closeLocked(l)
		}
	}
}

// setSlow delays every write on the link by d (0: none).
func (n *network) setSlow(l link, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if d == 0 {
		delete(n.slow, l)
	} else {
		n.slow[l] = d
	}
}

// arm makes the link die (as a cut) after writes more frames from the
// client.
func (n *network) arm(l link, writes int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.budget[l] = writes
}

// mendAll lifts every partition, delay and armed budget.
func (n *network) mendAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.slow)
	clear(n.budget)
	clear(n.cut)
}

func (n *network) closeLocked(l link) {
	for _, c := range n.conns[l] {
		c.Conn.Close()
	}
	delete(n.conns, l)
}

// beforeWrite is what the client end of a link does before each write:
// wait out its delay, and die if its budget is spent.
func (n *network) beforeWrite(l link) error {
	n.mu.Lock()
	d := n.slow[l]
	left, armed := n.budget[l]
	if armed {
		if left == 0 {
			n.cut[l] = true
			n.closeLocked(l)
			n.mu.Unlock()
			return net.ErrClosed
		}
		n.budget[l] = left - 1
	}
	n.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
	return nil
}

// pipeEnd is one end of an in-memory connection.
type pipeEnd struct {
	net.Conn
	n      *network
	l      link
	client bool
}

func (p *pipeEnd) Write(b []byte) (int, error) {
	if p.client {
		if err := p.n.beforeWrite(p.l); err != nil {
			return 0, err
		}
	}
	return p.Conn.Write(b)
}

// RemoteAddr names the client as a TCP peer on loopback, as the brick
// server's admission expects.
func (p *pipeEnd) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000 + p.l.client}
}
