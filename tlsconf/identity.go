package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Environment variables that name the identity a process uses, as the
// flags --tls-dir and --tls-name do.
const (
	EnvDir  = "MORTAR_TLS_DIR"
	EnvName = "MORTAR_TLS_NAME"
)

// Identity is a loaded certificate of the cluster: the CA to verify peers
// with, and this process's own certificate and key.
type Identity struct {
	dir     string
	name    string
	kind    Kind
	ca      *x509.Certificate
	pool    *x509.CertPool
	cert    tls.Certificate // with Leaf set
	revoked *revocations    // dir's revocation list (revoke.go)
}

// Load reads dir's ca.pem, NAME.pem and NAME.key and checks that they fit:
// the certificate is signed by the CA, valid now, and matches the key.
func Load(dir, name string) (*Identity, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	ca, err := ReadCert(dir, "ca")
	if err != nil {
		return nil, err
	}
	leaf, err := ReadCert(dir, name)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(KeyPath(dir, name))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyPath(dir, name), err)
	}
	certPEM, err := os.ReadFile(CertPath(dir, name))
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s and %s do not fit together: %w", CertPath(dir, name), KeyPath(dir, name), err)
	}
	cert.Leaf = leaf
	now := time.Now()
	if now.After(ca.NotAfter) {
		return nil, fmt.Errorf("%s: the CA expired on %s", CertPath(dir, "ca"), ca.NotAfter.Format(time.DateOnly))
	}
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("%s expired on %s; issue a new certificate (mortar tls issue)", CertPath(dir, name), leaf.NotAfter.Format(time.DateOnly))
	}
	if now.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("%s is not valid before %s (is this machine's clock right?)", CertPath(dir, name), leaf.NotBefore.Format(time.RFC3339))
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("%s is not signed by the CA in %s: %w", CertPath(dir, name), CertPath(dir, "ca"), err)
	}
	if leaf.Subject.CommonName != name {
		return nil, fmt.Errorf("%s names %q, not %q", CertPath(dir, name), leaf.Subject.CommonName, name)
	}
	return &Identity{dir: dir, name: name, kind: kindOf(leaf), ca: ca, pool: pool, cert: cert,
		revoked: &revocations{path: RevokedPath(dir)}}, nil
}

// FromEnv loads the identity named by MORTAR_TLS_DIR and MORTAR_TLS_NAME,
// or returns nil, nil when neither is set (TLS off).
func FromEnv() (*Identity, error) { return FromFlags("", "") }

// FromFlags loads the identity named by --tls-dir and --tls-name, each
// defaulting to its environment variable; nil, nil when both are unset.
func FromFlags(dir, name string) (*Identity, error) {
	if dir == "" {
		dir = os.Getenv(EnvDir)
	}
	if name == "" {
		name = os.Getenv(EnvName)
	}
	switch {
	case dir == "" && name == "":
		return nil, nil
	case dir == "":
		return nil, fmt.Errorf("TLS name %q given without a TLS directory (--tls-dir or %s)", name, EnvDir)
	case name == "":
		return nil, fmt.Errorf("TLS directory %s given without the name of this identity (--tls-name or %s)", dir, EnvName)
	}
	return Load(dir, name)
}

// Name is the identity's name, its certificate's common name.
func (id *Identity) Name() string { return id.name }

// Kind says whether the identity is a node or a client.
func (id *Identity) Kind() Kind { return id.kind }

// Dir is the TLS directory the identity was loaded from.
func (id *Identity) Dir() string { return id.dir }

// Certificate is the identity's own certificate.
func (id *Identity) Certificate() *x509.Certificate { return id.cert.Leaf }

// ServerConfig is the configuration a server accepts connections with:
// TLS 1.3, and a client certificate signed by the cluster's CA, and not
// revoked, required.
func (id *Identity) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    id.pool,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tlsconf: the client sent no certificate")
			}
			return id.revoked.check(cs.PeerCertificates[0])
		},
	}
}

// ClientConfig is the configuration to dial a node with: TLS 1.3, this
// identity's certificate presented, and the server's certificate verified
// against the cluster's CA and required to be a node certificate.
//
// The server's name is not checked against the address dialled (so
// ServerName need not be set): the standard verification is turned off
// (InsecureSkipVerify) and VerifyConnection does it instead, with the CA
// as the only root, without a host name, and with the node check.
func (id *Identity) ClientConfig() *tls.Config {
	pool := id.pool
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{id.cert},
		RootCAs:            pool,
		InsecureSkipVerify: true, // VerifyConnection verifies the chain
		VerifyConnection: func(cs tls.ConnectionState) error {
			if err := verifyServer(pool, cs); err != nil {
				return err
			}
			return id.revoked.check(cs.PeerCertificates[0])
		},
	}
}

// verifyServer checks that a server's certificate is a node certificate
// signed by the CA in pool.
func verifyServer(pool *x509.CertPool, cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tlsconf: the server sent no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("tlsconf: server certificate %q: %w", leaf.Subject.CommonName, err)
	}
	if kindOf(leaf) != KindNode {
		return fmt.Errorf("tlsconf: server certificate %q is not a node certificate (OU %q)", leaf.Subject.CommonName, leaf.Subject.OrganizationalUnit)
	}
	return nil
}

// kindOf reads a certificate's kind from its OU; anything but "node"
// is a client.
func kindOf(c *x509.Certificate) Kind {
	if slices.Contains(c.Subject.OrganizationalUnit, string(KindNode)) {
		return KindNode
	}
	return KindClient
}

// PeerIdentity names the other side of a TLS connection from its
// certificate: its common name and kind. ok is false when the handshake is
// not complete or the peer sent no certificate. The certificate is taken
// as verified: ServerConfig and ClientConfig verify it during the
// handshake.
func PeerIdentity(cs tls.ConnectionState) (name string, kind Kind, ok bool) {
	if !cs.HandshakeComplete || len(cs.PeerCertificates) == 0 {
		return "", "", false
	}
	leaf := cs.PeerCertificates[0]
	return leaf.Subject.CommonName, kindOf(leaf), true
}

// Dialer returns a function that dials addr and completes a TLS handshake
// with ClientConfig, for protocol.Config.Dial and volume.BuildOptions.Dial.
// timeout (if > 0) bounds the dial and the handshake together.
//
// In TLS 1.3 a client learns that the server refused its certificate only
// when it next reads; the connections returned here say so then: such
// errors read "TLS handshake failed: ...".
func (id *Identity) Dialer(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	cfg := id.ClientConfig()
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake failed with %s: %w", addr, err)
		}
		return &clientConn{Conn: tc}, nil
	}
}

// clientConn is a client's TLS connection that explains a late refusal.
type clientConn struct{ *tls.Conn }

func (c *clientConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	return n, explainRemote(err)
}

func (c *clientConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	return n, explainRemote(err)
}

// explainRemote marks an alert from the server as the handshake failure
// it is.
func explainRemote(err error) error {
	var oe *net.OpError
	if err != nil && errors.As(err, &oe) && oe.Op == "remote error" {
		return fmt.Errorf("TLS handshake failed: the server refused this client's certificate: %w", err)
	}
	return err
}

// String describes the identity for logs.
func (id *Identity) String() string {
	return fmt.Sprintf("%s (%s, %s)", id.name, id.kind, filepath.Join(id.dir, id.name+".pem"))
}
