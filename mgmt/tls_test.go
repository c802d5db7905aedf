package mgmt

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// testCA makes certificates for TLS tests: a CA and leaves signed by it,
// with the name as CN and the kind as OU, as `mortar tls issue` does.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// leaf returns a certificate for name of kind, valid for ips.
func (ca *testCA) leaf(t *testing.T, name, kind string, ips ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name, OrganizationalUnit: []string{kind}},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// configs returns the node-side TLS configuration for cert.
func (ca *testCA) configs(cert tls.Certificate) *TLSConfig {
	return &TLSConfig{
		Server: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool},
		Client: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: ca.pool},
	}
}

func (ca *testCA) client(t *testing.T, addr, name, kind string) *Client {
	cert := ca.leaf(t, name, kind)
	return NewTLSClient(addr, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: ca.pool})
}

// A TLS cluster: nodes talk to each other (probe, forwarding, Raft) over
// TLS with node certificates; a client without a certificate, or with one
// of another CA, is refused at the handshake; a client certificate reads
// but does not change the cluster, and gets a volume's spec only if the
// volume's auth rules admit it.
func TestTLSCluster(t *testing.T) {
	ca := newTestCA(t)
	var nodes []*clusterNode
	for i := range 2 {
		host := []string{"127.0.0.2", "127.0.0.3"}[i]
		cn := &clusterNode{dir: t.TempDir(), host: host, api: freePort(t, host), raftA: freePort(t, host)}
		cfg := ca.configs(ca.leaf(t, "node"+host, kindNode, host))
		n, err := Start(Config{DataDir: cn.dir, Listen: cn.api, RaftListen: cn.raftA, TLS: cfg, Logger: testLogger(t).With("node", host)})
		if err != nil {
			t.Fatal(err)
		}
		cn.n = n
		cn.c = NewTLSClient(cn.api, cfg.Client)
		t.Cleanup(cn.stop)
		nodes = append(nodes, cn)
	}
	ctx := ctxT(t)
	if _, err := nodes[0].c.Probe(ctx, nodes[1].api); err != nil {
		t.Fatalf("probe over TLS: %v", err)
	}
	// A change through the follower is forwarded to the leader over TLS,
	// and committed by Raft over TLS.
	d := t.TempDir()
	if _, err := nodes[1].c.CreateVolume(ctx, CreateVolumeRequest{Name: "tv", Bricks: []string{nodes[0].host + ":" + d}}); err != nil {
		t.Fatalf("create through the follower: %v", err)
	}

	// No certificate: refused at the handshake.
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	if _, err := plain.Get("https://" + nodes[0].api + "/v1/volumes"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client without a certificate: %v", err)
	}
	// Plain HTTP: no answer a client could take for the API's.
	if resp, err := http.Get("http://" + nodes[0].api + "/v1/volumes"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered")
		}
	}
	// Another CA's certificate: refused.
	other := newTestCA(t)
	foreign := NewTLSClient(nodes[0].api, &tls.Config{Certificates: []tls.Certificate{other.leaf(t, "mallory", kindNode)}, RootCAs: ca.pool})
	if _, err := foreign.List(ctx); err == nil {
		t.Fatal("a certificate of another CA was accepted")
	}

	// A client certificate reads, but does not change.
	alice := ca.client(t, nodes[1].api, "alice", kindClient)
	if _, err := alice.List(ctx); err != nil {
		t.Fatalf("a client lists volumes: %v", err)
	}
	if _, err := alice.CreateVolume(ctx, CreateVolumeRequest{Name: "x", Bricks: []string{nodes[0].host + ":" + t.TempDir()}}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a client creates a volume: %v, want forbidden", err)
	}
	// The spec, only if the volume's rules admit the client.
	if _, err := nodes[0].c.Set(ctx, "tv", OptAuthAllow, "bob,carol-*"); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].c.Start(ctx, "tv", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the rule on the follower", func() error {
		_, err := alice.Spec(ctx, "tv")
		if !errors.Is(err, ErrForbidden) {
			return errors.New("alice still gets the spec")
		}
		return nil
	})
	carol := ca.client(t, nodes[1].api, "carol-laptop", kindClient)
	waitFor(t, 5*time.Second, "an allowed client's spec", func() error {
		_, err := carol.Spec(ctx, "tv")
		return err
	})
	if _, err := nodes[0].c.Set(ctx, "tv", OptAuthReject, "carol-laptop"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "reject to win", func() error {
		if _, err := carol.Spec(ctx, "tv"); !errors.Is(err, ErrForbidden) {
			return errors.New("carol still gets the spec")
		}
		return nil
	})
}

func TestPermit(t *testing.T) {
	cases := []struct {
		allow, reject, name, addr string
		ok                        bool
	}{
		{"", "", "a", "10.0.0.1", true},
		{"a", "", "a", "10.0.0.1", true},
		{"b", "", "a", "10.0.0.1", false},
		{"web-*", "", "web-3", "10.0.0.1", true},
		{"10.0.0.0/8", "", "x", "10.1.2.3", true},
		{"10.0.0.0/8", "", "x", "192.168.1.1", false},
		{"192.168.1.1", "", "x", "192.168.1.1", true},
		{"*", "web-3", "web-3", "10.0.0.1", false},
		{"", "10.0.0.0/8", "x", "10.9.9.9", false},
	}
	for _, c := range cases {
		err := permit(c.allow, c.reject, c.name, c.addr)
		if (err == nil) != c.ok {
			t.Errorf("permit(allow %q, reject %q, %s, %s) = %v, want ok %v", c.allow, c.reject, c.name, c.addr, err, c.ok)
		}
	}
}
