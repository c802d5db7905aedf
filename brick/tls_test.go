package brick_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/tlsconf"
	"github.com/mortarfs/mortar/wire"
)

const (
	tlsVolume = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	tlsBrick  = "brick-1"
)

// pki is a cluster's TLS directory: nodes n1 (the brick's) and n2,
// clients c1 and c2, and, in otherDir, a client c1 of another CA.
type pki struct {
	dir, otherDir  string
	n1, n2, c1, c2 *tlsconf.Identity
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	issue := func(dir, name string, kind tlsconf.Kind) *tlsconf.Identity {
		if err := tlsconf.Issue(dir, name, kind, []string{"127.0.0.1"}, 1); err != nil {
			t.Fatal(err)
		}
		id, err := tlsconf.Load(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	p := &pki{dir: filepath.Join(t.TempDir(), "tls")}
	p.otherDir = filepath.Join(t.TempDir(), "other")
	other := p.otherDir
	for _, d := range []string{p.dir, other} {
		if err := tlsconf.InitCA(d, "test"); err != nil {
			t.Fatal(err)
		}
	}
	p.n1, p.n2 = issue(p.dir, "n1", tlsconf.KindNode), issue(p.dir, "n2", tlsconf.KindNode)
	p.c1, p.c2 = issue(p.dir, "c1", tlsconf.KindClient), issue(p.dir, "c2", tlsconf.KindClient)
	issue(other, "c1", tlsconf.KindClient)
	return p
}

// logCh is a slog handler that passes warnings to a channel, so that a
// test waits for a log line instead of sleeping.
type logCh chan string

func (h logCh) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h logCh) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	select {
	case h <- b.String():
	default: // nobody listening: drop
	}
	return nil
}
func (h logCh) WithAttrs(as []slog.Attr) slog.Handler { return attrHandler{h, as} }
func (h logCh) WithGroup(string) slog.Handler         { return h }

type attrHandler struct {
	logCh
	attrs []slog.Attr
}

func (h attrHandler) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(h.attrs...)
	return h.logCh.Handle(ctx, r)
}
func (h attrHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return attrHandler{h.logCh, append(append([]slog.Attr{}, h.attrs...), as...)}
}

// expect waits for a log line containing every one of want.
func (h logCh) expect(t *testing.T, want ...string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line := <-h:
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(line, w)
			}
			if ok {
				return line
			}
		case <-timeout:
			t.Fatalf("no log line with %q", want)
		}
	}
}

// tlsBrickServer serves a posix brick over TLS as node n1 on 127.0.0.1.
type tlsBrickServer struct {
	srv  *brick.Server
	addr string
	log  logCh
}

func startTLSBrick(t *testing.T, id *tlsconf.Identity, setup func(*brick.Server)) *tlsBrickServer {
	t.Helper()
	root := t.TempDir()
	if err := posix.Mark(root, tlsVolume, true); err != nil {
		t.Fatal(err)
	}
	st, err := posix.New(root, posix.Options{VolumeID: tlsVolume})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &tlsBrickServer{addr: ln.Addr().String(), log: make(logCh, 64)}
	b.srv = brick.NewServer(slog.New(b.log))
	if id != nil {
		b.srv.UseTLS(id)
	}
	b.srv.Add(tlsBrick, tlsVolume, st)
	if setup != nil {
		setup(b.srv)
	}
	go b.srv.Serve(ln)
	t.Cleanup(func() {
		ln.Close()
		b.srv.Close()
		st.Close()
	})
	return b
}

// answer is a brick's answer to a handshake.
type answer struct {
	nc    net.Conn // open when admitted
	errno syscall.Errno
	msg   string
	err   error // the connection failed
}

func (a answer) admitted() bool { return a.err == nil && a.errno == 0 }

func (a answer) String() string {
	if a.err != nil {
		return "error: " + a.err.Error()
	}
	return fmt.Sprintf("errno %v: %s", a.errno, a.msg)
}

// handshake dials the brick with dial (nil: plain TCP) and says hello as
// protocol.Client does. An admitted connection is closed at the end of
// the test.
func (b *tlsBrickServer) handshake(t *testing.T, dial func(context.Context, string, string) (net.Conn, error)) answer {
	t.Helper()
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := dial(ctx, "tcp", b.addr)
	if err != nil {
		return answer{err: err}
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	h, text, err := brick.ShakeHands(nc, tlsVolume, tlsBrick, "")
	if err != nil {
		nc.Close()
		return answer{err: err}
	}
	if h.Errno != 0 {
		nc.Close()
		return answer{errno: syscall.Errno(h.Errno), msg: string(text)}
	}
	nc.SetDeadline(time.Time{})
	t.Cleanup(func() { nc.Close() })
	return answer{nc: nc}
}

func dialer(id *tlsconf.Identity) func(context.Context, string, string) (net.Conn, error) {
	return id.Dialer(10 * time.Second)
}

// dialConfig dials with a TLS configuration of the test's making.
func dialConfig(cfg *tls.Config) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := tls.Dialer{Config: cfg}
		return d.DialContext(ctx, network, addr)
	}
}

func TestTLSClientWithoutCertificateRefused(t *testing.T) {
	p := newPKI(t)
	b := startTLSBrick(t, p.n1, nil)
	cfg := p.c1.ClientConfig()
	cfg.Certificates = nil
	a := b.handshake(t, dialConfig(cfg))
	if a.err == nil || !strings.Contains(a.err.Error(), "certificate required") {
		t.Errorf("client without a certificate: %v, want the brick's alert", a)
	}
	b.log.expect(t, "brick connection refused", "remote=127.0.0.1:", "TLS handshake failed: no client certificate")

	// A certificate of another CA.
	alien, err := tls.LoadX509KeyPair(tlsconf.CertPath(p.otherDir, "c1"), tlsconf.KeyPath(p.otherDir, "c1"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Certificates = []tls.Certificate{alien}
	a = b.handshake(t, dialConfig(cfg))
	if a.err == nil || !strings.Contains(a.err.Error(), "remote error: tls:") {
		t.Errorf("client of another CA: %v, want the brick's alert", a)
	}
	b.log.expect(t, "brick connection refused", "TLS handshake failed: certificate not signed by this cluster's CA")
}

func TestTLSPlainClientRefused(t *testing.T) {
	p := newPKI(t)
	b := startTLSBrick(t, p.n1, nil)
	a := b.handshake(t, nil)
	if a.errno != syscall.EACCES || !strings.Contains(a.msg, "not TLS") {
		t.Errorf("plain client: %v, want EACCES saying TLS is required", a)
	}
	b.log.expect(t, "brick connection refused", "TLS handshake failed: not TLS")

	// What a plain protocol.Client logs.
	clog := make(logCh, 16)
	c := protocol.New(protocol.Config{Addr: b.addr, BrickID: tlsBrick, VolumeID: tlsVolume, Logger: slog.New(clog)})
	defer c.Close()
	line := clog.expect(t, "cannot reach brick")
	if !strings.Contains(line, "refused: TLS handshake failed: not TLS") {
		t.Errorf("plain protocol client logged %q", line)
	}
}

func TestAuthAllowReject(t *testing.T) {
	p := newPKI(t)
	b := startTLSBrick(t, p.n1, nil)
	set := func(allow, reject string) {
		r, err := tlsconf.ParseAuth(allow, reject)
		if err != nil {
			t.Fatal(err)
		}
		b.srv.SetAuth(tlsVolume, r)
	}
	refused := func(who string, id *tlsconf.Identity, want string) {
		t.Helper()
		a := b.handshake(t, dialer(id))
		if a.errno != syscall.EACCES || !strings.Contains(a.msg, want) {
			t.Errorf("%s: %v, want EACCES with %q", who, a, want)
		}
		b.log.expect(t, "brick connection refused", "client="+id.Name(), want)
	}
	admitted := func(who string, id *tlsconf.Identity) {
		t.Helper()
		if a := b.handshake(t, dialer(id)); !a.admitted() {
			t.Errorf("%s: %v, want admitted", who, a)
		}
	}

	set("c1", "")
	admitted("c1 in auth.allow", p.c1)
	refused("c2 not in auth.allow", p.c2, `client certificate "c2" at 127.0.0.1 is not in auth.allow "c1"`)
	admitted("node n2", p.n2)

	set("c*", "c1")
	refused("c1 in auth.reject", p.c1, `matches auth.reject entry "c1"`)
	admitted("c2 by glob", p.c2)

	set("", "*")
	admitted("node n2 despite reject *", p.n2)
	refused("c2 with reject *", p.c2, `auth.reject entry "*"`)

	set("127.0.0.0/8", "")
	admitted("c2 by address", p.c2)
	set("10.0.0.0/8", "")
	refused("c2 from the wrong network", p.c2, `not in auth.allow "10.0.0.0/8"`)
	set("c1", "127.0.0.1")
	refused("c1 from a rejected address", p.c1, `auth.reject entry "127.0.0.1"`)
}

func TestAuthRulesChangeAtRunTime(t *testing.T) {
	p := newPKI(t)
	file := filepath.Join(t.TempDir(), tlsBrick+".auth")
	b := startTLSBrick(t, p.n1, func(s *brick.Server) { s.SetAuthSource(tlsVolume, tlsconf.AuthFile(file)) })

	// No file yet: everyone.
	kept := b.handshake(t, dialer(p.c2))
	if !kept.admitted() {
		t.Fatalf("c2 without rules: %v", kept)
	}
	if err := tlsconf.WriteAuthFile(file, tlsconf.AuthRules{Allow: []string{"c1"}}); err != nil {
		t.Fatal(err)
	}
	if a := b.handshake(t, dialer(p.c2)); a.errno != syscall.EACCES {
		t.Errorf("c2 after auth.allow=c1: %v, want EACCES", a)
	}
	if a := b.handshake(t, dialer(p.c1)); !a.admitted() {
		t.Errorf("c1 after auth.allow=c1: %v", a)
	}
	if err := tlsconf.WriteAuthFile(file, tlsconf.AuthRules{Allow: []string{"c2"}}); err != nil {
		t.Fatal(err)
	}
	if a := b.handshake(t, dialer(p.c2)); !a.admitted() {
		t.Errorf("c2 after auth.allow=c2: %v", a)
	}
	if a := b.handshake(t, dialer(p.c1)); a.errno != syscall.EACCES {
		t.Errorf("c1 after auth.allow=c2: %v, want EACCES", a)
	}

	// The connection admitted before the rules changed still works: the
	// rules apply to new connections.
	var hb [wire.HeaderSize]byte
	ping := wire.Header{Kind: wire.KindPing, ID: 7}
	ping.Put(hb[:])
	if _, err := kept.nc.Write(hb[:]); err != nil {
		t.Fatal(err)
	}
	if h, err := wire.ReadHeader(kept.nc, &hb); err != nil || h.Kind != wire.KindPong {
		t.Errorf("ping on the older connection: %v %v", h, err)
	}

	// An unreadable rule file refuses clients, not nodes.
	if err := writeFile(file, "auth.allow c1\n"); err != nil {
		t.Fatal(err)
	}
	if a := b.handshake(t, dialer(p.c1)); a.errno != syscall.EACCES || !strings.Contains(a.msg, "access rules unreadable") {
		t.Errorf("c1 with a broken rule file: %v", a)
	}
	if a := b.handshake(t, dialer(p.n2)); !a.admitted() {
		t.Errorf("node with a broken rule file: %v", a)
	}
}

func TestConnectionsPerClient(t *testing.T) {
	p := newPKI(t)
	if brick.NewServer(nil).MaxConnsPerClient != brick.DefaultMaxConnsPerClient {
		t.Error("a new server has no default connection limit")
	}
	b := startTLSBrick(t, p.n1, func(s *brick.Server) { s.MaxConnsPerClient = 2 })
	first := b.handshake(t, dialer(p.c1))
	if !first.admitted() || !b.handshake(t, dialer(p.c1)).admitted() {
		t.Fatal("c1's first two connections refused")
	}
	a := b.handshake(t, dialer(p.c1))
	if a.errno != syscall.EACCES || !strings.Contains(a.msg, "too many connections from client \"c1\"") {
		t.Errorf("c1's third connection: %v, want EACCES: too many connections", a)
	}
	b.log.expect(t, "brick connection refused", "too many connections")
	if !b.handshake(t, dialer(p.c2)).admitted() {
		t.Error("c2 refused while c1 is at its limit")
	}
	for i := range 3 {
		if !b.handshake(t, dialer(p.n2)).admitted() {
			t.Errorf("node connection %d refused: nodes are not limited", i)
		}
	}
	// A closed connection gives its place back once the brick has seen it
	// close; nothing tells the client when, so it retries.
	first.nc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := b.handshake(t, dialer(p.c1))
		if a.admitted() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("c1 still refused after closing a connection: %v", a)
		}
		time.Sleep(10 * time.Millisecond) // polling a state with no event to wait on
	}
}

func TestConnectionsPerClientWithoutTLS(t *testing.T) {
	b := startTLSBrick(t, nil, func(s *brick.Server) { s.MaxConnsPerClient = 1 })
	if !b.handshake(t, nil).admitted() {
		t.Fatal("first plain connection refused")
	}
	if a := b.handshake(t, nil); a.errno != syscall.EACCES || !strings.Contains(a.msg, "too many connections from client 127.0.0.1") {
		t.Errorf("second plain connection: %v", a)
	}
}

func TestProtocolClientOverTLS(t *testing.T) {
	p := newPKI(t)
	b := startTLSBrick(t, p.n1, func(s *brick.Server) { s.SetAuth(tlsVolume, tlsconf.AuthRules{Allow: []string{"c1"}}) })
	c := protocol.New(protocol.Config{Addr: b.addr, BrickID: tlsBrick, VolumeID: tlsVolume, Dial: dialer(p.c1), ConnectWait: 10 * time.Second})
	defer c.Close()
	ctx := context.Background()
	f, _, err := c.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(ctx, []byte("over tls"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := f.Read(ctx, buf, 0)
	if err != nil || string(buf[:n]) != "over tls" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	f.Release(ctx)
	if a, err := c.Lookup(ctx, "/f"); err != nil || a.Size != 8 {
		t.Fatalf("lookup: %+v, %v", a, err)
	}

	// A refused client logs why.
	clog := make(logCh, 16)
	c2 := protocol.New(protocol.Config{Addr: b.addr, BrickID: tlsBrick, VolumeID: tlsVolume, Dial: dialer(p.c2), Logger: slog.New(clog), ConnectWait: 100 * time.Millisecond})
	defer c2.Close()
	line := clog.expect(t, "cannot reach brick")
	if !strings.Contains(line, `refused: volume `+tlsVolume+`: client certificate "c2" at 127.0.0.1 is not in auth.allow "c1"`) {
		t.Errorf("refused protocol client logged %q", line)
	}
	if _, err := c2.Lookup(ctx, "/f"); !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("lookup by a refused client: %v, want ENOTCONN", err)
	}
}

func writeFile(path, s string) error {
	return os.WriteFile(path, []byte(s), 0o644)
}
