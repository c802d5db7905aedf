package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Kind is what an identity is: a node of the cluster or a client of it.
// It is kept in the certificate's organisational unit.
type Kind string

// The kinds of identity.
const (
	KindNode   Kind = "node"
	KindClient Kind = "client"
)

// Files of a TLS directory.
const (
	caCertFile = "ca.pem"
	caKeyFile  = "ca.key"
)

// caValidity is how long a CA made by InitCA is valid.
const caValidity = 10 * 365 * 24 * time.Hour

// DefaultDays is how long an issued certificate is valid when Issue is
// given no duration.
const DefaultDays = 365

// clockSkew backdates certificates so that a machine whose clock is a
// little behind accepts them at once.
const clockSkew = 5 * time.Minute

// CertPath and KeyPath are where a TLS directory keeps name's certificate
// and key ("ca" names the CA).
func CertPath(dir, name string) string { return filepath.Join(dir, name+".pem") }

// KeyPath: see CertPath.
func KeyPath(dir, name string) string { return filepath.Join(dir, name+".key") }

// InitCA creates a certificate authority in dir (created if needed): an
// ECDSA P-256 key in ca.key (mode 0600) and a self-signed certificate,
// valid ten years, in ca.pem. org names the cluster in the CA's subject.
// It refuses to replace an existing CA: every certificate it signed would
// stop working.
func InitCA(dir, org string) error {
	if org == "" {
		org = "mortar"
	}
	for _, f := range []string{caKeyFile, caCertFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return fmt.Errorf("%s already exists: this directory has a CA (replacing it would invalidate every certificate it signed; remove ca.pem and ca.key first to start over)", filepath.Join(dir, f))
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key, serial, err := newKeyAndSerial()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{org}, CommonName: org + " mortar CA"},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, caKeyFile), key); err != nil {
		return err
	}
	return writeCert(filepath.Join(dir, caCertFile), der)
}

// Issue makes name's certificate and key, NAME.pem and NAME.key (mode
// 0600), in dir, signed by the CA of dir (ca.pem and ca.key). The subject
// is CN=name, OU=kind, O=the CA's organisation. A node certificate serves
// and dials (ExtKeyUsage serverAuth and clientAuth) and names hosts, DNS
// names or IP addresses, in its SANs; a client certificate only dials.
// days <= 0 means DefaultDays. It refuses to replace an existing NAME.key.
func Issue(dir, name string, kind Kind, hosts []string, days int) error {
	if err := checkName(name); err != nil {
		return err
	}
	if kind != KindNode && kind != KindClient {
		return fmt.Errorf("certificate kind %q: want %q or %q", kind, KindNode, KindClient)
	}
	if days <= 0 {
		days = DefaultDays
	}
	for _, p := range []string{KeyPath(dir, name), CertPath(dir, name)} {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s already exists (remove %s.pem and %s.key first to issue a new certificate)", p, name, name)
		}
	}
	ca, caKey, err := loadCA(dir)
	if err != nil {
		return err
	}
	key, serial, err := newKeyAndSerial()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization:       ca.Subject.Organization,
			OrganizationalUnit: []string{string(kind)},
			CommonName:         name,
		},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(time.Duration(days) * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	if kind == KindNode {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		for _, h := range hosts {
			if h == "" {
				continue
			}
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writeKey(KeyPath(dir, name), key); err != nil {
		return err
	}
	return writeCert(CertPath(dir, name), der)
}

// checkName accepts names that are safe as file names and in rules:
// letters, digits, '.', '-' and '_'.
func checkName(name string) error {
	if name == "" || name == "ca" || name[0] == '.' {
		return fmt.Errorf("bad certificate name %q", name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_'
		if !ok {
			return fmt.Errorf("bad certificate name %q: use letters, digits, '.', '-' and '_'", name)
		}
	}
	return nil
}

// newKeyAndSerial makes the key and the serial number of a new
// certificate.
func newKeyAndSerial() (*ecdsa.PrivateKey, *big.Int, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	return key, serial, err
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	ca, err := ReadCert(dir, "ca")
	if err != nil {
		return nil, nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, caKeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("%s: no CA key here; issue certificates on the machine where \"mortar tls ca init\" ran", filepath.Join(dir, caKeyFile))
	}
	if err != nil {
		return nil, nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, nil, fmt.Errorf("%s: no PEM block", filepath.Join(dir, caKeyFile))
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, caKeyFile), err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, fmt.Errorf("%s does not match %s", filepath.Join(dir, caKeyFile), filepath.Join(dir, caCertFile))
	}
	return ca, key, nil
}

// ReadCert reads and parses the certificate NAME.pem of dir ("ca" for the
// CA's).
func ReadCert(dir, name string) (*x509.Certificate, error) {
	p := CertPath(dir, name)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		if name == "ca" {
			return nil, fmt.Errorf("%s: no such file (copy the cluster's ca.pem here, or create a CA with \"mortar tls ca init --dir %s\")", p, dir)
		}
		return nil, fmt.Errorf("%s: no such file (issue it with \"mortar tls issue --dir DIR --node|--client %s\" and copy %s.pem and %s.key here)", p, name, name, name)
	}
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", p)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return c, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writeNew(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func writeCert(path string, der []byte) error {
	return writeNew(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}
