package tlsconf

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newCA makes a TLS directory with a CA, a node "n1" and a client "c1".
func newCA(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	if err := InitCA(dir, "test"); err != nil {
		t.Fatal(err)
	}
	if err := Issue(dir, "n1", KindNode, []string{"127.0.0.1", "n1.example"}, 0); err != nil {
		t.Fatal(err)
	}
	if err := Issue(dir, "c1", KindClient, nil, 30); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustLoad(t *testing.T, dir, name string) *Identity {
	t.Helper()
	id, err := Load(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestIssueLoadRoundTrip(t *testing.T) {
	dir := newCA(t)
	n1, c1 := mustLoad(t, dir, "n1"), mustLoad(t, dir, "c1")
	if n1.Name() != "n1" || n1.Kind() != KindNode || c1.Name() != "c1" || c1.Kind() != KindClient {
		t.Fatalf("identities: %v, %v", n1, c1)
	}
	nc := n1.Certificate()
	if len(nc.IPAddresses) != 1 || !nc.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) || len(nc.DNSNames) != 1 || nc.DNSNames[0] != "n1.example" {
		t.Errorf("node SANs: %v %v", nc.IPAddresses, nc.DNSNames)
	}
	if !hasUsage(nc, x509.ExtKeyUsageServerAuth) || !hasUsage(nc, x509.ExtKeyUsageClientAuth) {
		t.Errorf("node usages %v", nc.ExtKeyUsage)
	}
	cc := c1.Certificate()
	if hasUsage(cc, x509.ExtKeyUsageServerAuth) || !hasUsage(cc, x509.ExtKeyUsageClientAuth) {
		t.Errorf("client usages %v", cc.ExtKeyUsage)
	}
	if d := time.Until(cc.NotAfter); d < 29*24*time.Hour || d > 31*24*time.Hour {
		t.Errorf("client certificate valid for %v, want 30 days", d)
	}
	for _, f := range []string{"ca.key", "n1.key", "c1.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v mode %v, want 0600", f, err, st.Mode())
		}
	}
	if err := InitCA(dir, "again"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second InitCA: %v", err)
	}
	if err := Issue(dir, "n1", KindNode, nil, 0); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second Issue: %v", err)
	}
	if err := Issue(dir, "../x", KindClient, nil, 0); err == nil {
		t.Error("Issue accepted the name ../x")
	}
}

func hasUsage(c *x509.Certificate, u x509.ExtKeyUsage) bool {
	for _, v := range c.ExtKeyUsage {
		if v == u {
			return true
		}
	}
	return false
}

// issueRaw writes name's certificate signed by dir's CA, valid from nb to
// na, bypassing Issue's checks.
func issueRaw(t *testing.T, dir, name string, kind Kind, nb, na time.Time) {
	t.Helper()
	ca, caKey, err := loadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := newSerial()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name, OrganizationalUnit: []string{string(kind)}},
		NotBefore: nb, NotAfter: na, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeKey(KeyPath(dir, name), key); err != nil {
		t.Fatal(err)
	}
	if err := writeCert(CertPath(dir, name), der); err != nil {
		t.Fatal(err)
	}
}

// copyIdentity copies name's certificate and key from one directory to
// another.
func copyIdentity(t *testing.T, from, to, name string) {
	t.Helper()
	for _, p := range []string{name + ".pem", name + ".key"} {
		b, err := os.ReadFile(filepath.Join(from, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, p), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := newCA(t)
	other := newCA(t)
	if err := Issue(other, "alien", KindClient, nil, 0); err != nil {
		t.Fatal(err)
	}
	copyIdentity(t, other, dir, "alien")
	issueRaw(t, dir, "old", KindClient, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	// A key that belongs to another certificate.
	if err := Issue(dir, "mixed", KindClient, nil, 0); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(KeyPath(dir, "c1"))
	os.WriteFile(KeyPath(dir, "mixed"), b, 0o600)

	for _, tc := range []struct{ name, want string }{
		{"missing", "no such file"},
		{"alien", "not signed by the CA"},
		{"old", "expired"},
		{"mixed", "do not fit together"},
	} {
		_, err := Load(dir, tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load %s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := Load(t.TempDir(), "n1"); err == nil || !strings.Contains(err.Error(), "ca.pem: no such file") {
		t.Errorf("Load without ca.pem: %v", err)
	}
}

func TestFromFlags(t *testing.T) {
	dir := newCA(t)
	t.Setenv(EnvDir, "")
	t.Setenv(EnvName, "")
	if id, err := FromEnv(); id != nil || err != nil {
		t.Fatalf("FromEnv unset: %v, %v", id, err)
	}
	t.Setenv(EnvDir, dir)
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), EnvName) {
		t.Fatalf("FromEnv without a name: %v", err)
	}
	t.Setenv(EnvName, "n1")
	if id, err := FromEnv(); err != nil || id.Name() != "n1" {
		t.Fatalf("FromEnv: %v, %v", id, err)
	}
	if id, err := FromFlags("", "c1"); err != nil || id.Name() != "c1" || id.Dir() != dir {
		t.Fatalf("FromFlags with the name given: %v, %v", id, err)
	}
}

// recordLog is a slog handler that passes records to a channel, so that a
// test waits for a log line rather than sleeping.
type recordLog chan slog.Record

func (h recordLog) Enabled(context.Context, slog.Level) bool      { return true }
func (h recordLog) Handle(_ context.Context, r slog.Record) error { h <- r; return nil }
func (h recordLog) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h recordLog) WithGroup(string) slog.Handler                 { return h }

func recordText(r slog.Record) string {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	return b.String()
}

// echoServer accepts TLS connections on 127.0.0.1 with id, echoes one
// line per connection preceded by the client's name, and logs refusals
// to the returned channel.
func echoServer(t *testing.T, id *Identity) (string, recordLog) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := make(recordLog, 16)
	tl := WrapListener(ln, id, slog.New(logs))
	t.Cleanup(func() { tl.Close() })
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				name, kind, _ := PeerIdentity(c.(*tls.Conn).ConnectionState())
				buf := make([]byte, 5)
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				io.WriteString(c, name+"/"+string(kind)+":"+string(buf))
			}()
		}
	}()
	return ln.Addr().String(), logs
}

func TestHandshakeAndIdentity(t *testing.T) {
	dir := newCA(t)
	addr, _ := echoServer(t, mustLoad(t, dir, "n1"))
	c1 := mustLoad(t, dir, "c1")
	nc, err := c1.Dialer(5*time.Second)(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cs := nc.(interface{ ConnectionState() tls.ConnectionState }).ConnectionState()
	if cs.Version != tls.VersionTLS13 {
		t.Errorf("version %x, want TLS 1.3", cs.Version)
	}
	if name, kind, ok := PeerIdentity(cs); name != "n1" || kind != KindNode || !ok {
		t.Errorf("client sees server %q %q %v", name, kind, ok)
	}
	io.WriteString(nc, "hello")
	got, _ := io.ReadAll(nc)
	if string(got) != "c1/client:hello" {
		t.Errorf("server saw %q", got)
	}
}

// dialWith runs a TLS handshake from cfg to addr and returns the error of
// the first read, where TLS 1.3 tells a client it was refused.
func dialWith(t *testing.T, cfg *tls.Config, addr string) error {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tc := &clientConn{tls.Client(nc, cfg)}
	defer tc.Close()
	if err := tc.Handshake(); err != nil {
		return err
	}
	io.WriteString(tc, "hello")
	_, err = io.ReadAll(tc)
	return err
}

func TestRefusals(t *testing.T) {
	dir := newCA(t)
	addr, logs := echoServer(t, mustLoad(t, dir, "n1"))
	c1 := mustLoad(t, dir, "c1")

	alien := c1.ClientConfig() // a certificate of another CA
	other := newCA(t)
	alienCert, err := tls.LoadX509KeyPair(CertPath(other, "c1"), KeyPath(other, "c1"))
	if err != nil {
		t.Fatal(err)
	}
	alien.Certificates = []tls.Certificate{alienCert}
	issueRaw(t, dir, "old", KindClient, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	old := c1.ClientConfig()
	oldCert, err := tls.LoadX509KeyPair(CertPath(dir, "old"), KeyPath(dir, "old"))
	if err != nil {
		t.Fatal(err)
	}
	old.Certificates = []tls.Certificate{oldCert}
	noCert := c1.ClientConfig()
	noCert.Certificates = nil

	for _, tc := range []struct {
		what      string
		cfg       *tls.Config
		serverLog string
	}{
		{"no certificate", noCert, "no client certificate"},
		{"foreign CA", alien, "certificate not signed by this cluster's CA"},
		{"expired", old, "certificate expired"},
	} {
		err := dialWith(t, tc.cfg, addr)
		if err == nil || !strings.Contains(err.Error(), "TLS handshake failed") {
			t.Errorf("%s: client error %v, want a TLS handshake failure", tc.what, err)
		}
		r := <-logs
		if line := recordText(r); !strings.Contains(line, "TLS connection refused") || !strings.Contains(line, "TLS handshake failed: "+tc.serverLog) {
			t.Errorf("%s: server logged %q, want %q", tc.what, line, tc.serverLog)
		}
	}

	// A plain client.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(nc, "MRT1 plain")
	io.ReadAll(nc)
	nc.Close()
	if line := recordText(<-logs); !strings.Contains(line, "not TLS") {
		t.Errorf("plain client: server logged %q", line)
	}
}

func TestClientRefusesServer(t *testing.T) {
	dir := newCA(t)
	c1 := mustLoad(t, dir, "c1")
	// A server of another cluster.
	other := newCA(t)
	addr, _ := echoServer(t, mustLoad(t, other, "n1"))
	_, err := c1.Dialer(5*time.Second)(context.Background(), "tcp", addr)
	var uae x509.UnknownAuthorityError
	if err == nil || !strings.Contains(err.Error(), "TLS handshake failed") || !errors.As(err, &uae) {
		t.Errorf("dialing a foreign server: %v", err)
	}
	// A server using a client certificate of our CA.
	issueRaw(t, dir, "fake", KindClient, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	addr, _ = echoServer(t, mustLoad(t, dir, "fake"))
	if _, err := c1.Dialer(5*time.Second)(context.Background(), "tcp", addr); err == nil || !strings.Contains(err.Error(), "not a node certificate") {
		t.Errorf("dialing a server with a client certificate: %v", err)
	}
}

func TestAuthRules(t *testing.T) {
	at := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 1234} }
	r, err := ParseAuth(" web-*, 10.1.0.0/16 ,192.168.*.*, name:10.9.9.9", "web-evil, 10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		kind Kind
		ip   string
		want string // "" allowed, else part of the error
	}{
		{"web-1", KindClient, "172.16.0.1", ""},
		{"backup", KindClient, "172.16.0.1", "not in auth.allow"},
		{"backup", KindClient, "10.1.9.9", ""},
		{"", "", "192.168.4.5", ""},
		{"", "", "172.16.0.1", "not in auth.allow"},
		{"web-evil", KindClient, "10.1.9.9", `auth.reject entry "web-evil"`},
		{"web-1", KindClient, "10.1.2.3", `auth.reject entry "10.1.2.3"`},
		{"10.9.9.9", KindClient, "172.16.0.1", ""},
		{"web-evil", KindNode, "10.1.2.3", ""}, // nodes always pass
	} {
		err := r.Permit(tc.name, tc.kind, at(tc.ip))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s at %s: %v, want allowed", tc.name, tc.ip, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrNotPermitted)):
			t.Errorf("%s at %s: %v, want %q", tc.name, tc.ip, err, tc.want)
		}
	}
	if err := (AuthRules{}).Permit("x", KindClient, at("1.2.3.4")); err != nil {
		t.Errorf("empty rules: %v", err)
	}
	star, _ := ParseAuth("*", "")
	if err := star.Permit("", "", at("1.2.3.4")); err != nil {
		t.Errorf("allow *: %v", err)
	}
	for _, bad := range []string{"10.0.0.0/99", "web-[", "addr:1.2.[.4"} {
		if _, err := ParseAuth(bad, ""); err == nil {
			t.Errorf("ParseAuth accepted %q", bad)
		}
	}
}

func TestAuthFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "b1.auth")
	f := AuthFile(p)
	if r, err := f.Rules(); err != nil || !r.Empty() {
		t.Fatalf("missing file: %v, %v", r, err)
	}
	want, _ := ParseAuth("web-*,10.0.0.0/8", "web-evil")
	if err := WriteAuthFile(p, want); err != nil {
		t.Fatal(err)
	}
	got, err := f.Rules()
	if err != nil || strings.Join(got.Allow, ",") != "web-*,10.0.0.0/8" || strings.Join(got.Reject, ",") != "web-evil" {
		t.Fatalf("read back %v, %v", got, err)
	}
	os.WriteFile(p, []byte("auth.allow = ok\nauth.deny = x\n"), 0o644)
	if _, err := f.Rules(); err == nil || !strings.Contains(err.Error(), "unknown key") {
		t.Errorf("bad file: %v", err)
	}
}

func TestDescribeHandshakeError(t *testing.T) {
	err := DescribeHandshakeError(io.EOF)
	if !errors.Is(err, io.EOF) || !strings.HasPrefix(err.Error(), "TLS handshake failed: ") {
		t.Errorf("%v", err)
	}
}

// A certificate on the revocation list is refused at the handshake, by
// servers (a client's) and by clients (a node's), as soon as the list
// says so: no restart.
func TestRevoked(t *testing.T) {
	dir := newCA(t)
	if err := Issue(dir, "c2", KindClient, nil, 30); err != nil {
		t.Fatal(err)
	}
	server := mustLoad(t, dir, "n1")
	addr, logs := echoServer(t, server)
	c1, c2 := mustLoad(t, dir, "c1"), mustLoad(t, dir, "c2")
	if err := dialWith(t, c1.ClientConfig(), addr); err != nil {
		t.Fatalf("before the revocation: %v", err)
	}
	serial, err := Revoke(dir, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := dialWith(t, c1.ClientConfig(), addr); err == nil || !strings.Contains(err.Error(), "TLS handshake failed") {
		t.Fatalf("a revoked client: %v, want a TLS handshake failure", err)
	}
	if line := recordText(<-logs); !strings.Contains(line, "revoked") || !strings.Contains(line, serial) {
		t.Errorf("server logged %q, want the revocation", line)
	}
	if err := dialWith(t, c2.ClientConfig(), addr); err != nil {
		t.Fatalf("another client after the revocation: %v", err)
	}
	// A revoked node certificate is refused by clients.
	if _, err := Revoke(dir, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Dialer(5*time.Second)(context.Background(), "tcp", addr); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("dialing a server whose certificate is revoked: %v", err)
	}
	if _, err := Revoke(dir, "ca"); err == nil {
		t.Fatal("the CA revoked")
	}
}
