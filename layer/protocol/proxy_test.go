package protocol

import (
	"io"
	"net"
	"sync"
	"testing"
)

// freezeProxy forwards TCP connections to a target until frozen, then
// swallows everything without closing: a hung peer.
type freezeProxy struct {
	l      net.Listener
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{l: l}
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go p.pipe(in, out)
			go p.pipe(out, in)
		}
	}()
	return p
}

func (p *freezeProxy) addr() string { return p.l.Addr().String() }

func (p *freezeProxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

func (p *freezeProxy) pipe(from, to net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if err != nil {
			return
		}
		p.mu.Lock()
		frozen := p.frozen
		p.mu.Unlock()
		if frozen {
			continue
		}
		if _, err := to.Write(buf[:n]); err != nil {
			return
		}
	}
}

var _ = io.EOF
