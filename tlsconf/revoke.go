package tlsconf

import (
	"bufio"
	"crypto/x509"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// RevokedName is the file, in a TLS directory beside ca.pem, that lists
// the serial numbers (hexadecimal, one per line, '#' starts a comment) of
// the certificates no longer accepted: every TLS endpoint that loaded an
// identity from the directory refuses a peer presenting one of them, at
// the handshake. It is read again whenever it changes, so that a new line
// takes effect without a restart; like the certificates, it must be
// copied to every machine of the cluster (mortar tls revoke).
const RevokedName = "revoked"

// RevokedPath is the revocation list of a TLS directory.
func RevokedPath(dir string) string { return filepath.Join(dir, RevokedName) }

// revocations is a TLS directory's revocation list, read again when the
// file changes.
type revocations struct {
	path string

	mu      sync.Mutex
	mod     time.Time
	size    int64
	serials map[string]bool
}

// revoked reports whether c is on the list. A list that cannot be read
// (other than missing) counts every certificate revoked: better no
// connection than one the operator meant to stop.
func (r *revocations) revoked(c *x509.Certificate) (bool, error) {
	st, err := os.Stat(r.path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.serials == nil || !st.ModTime().Equal(r.mod) || st.Size() != r.size {
		serials, err := readRevoked(r.path)
		if err != nil {
			return true, err
		}
		r.serials, r.mod, r.size = serials, st.ModTime(), st.Size()
	}
	return r.serials[serialOf(c)], nil
}

// check fails for a revoked certificate.
func (r *revocations) check(c *x509.Certificate) error {
	revoked, err := r.revoked(c)
	switch {
	case err != nil:
		return fmt.Errorf("tlsconf: revocation list %s: %w", r.path, err)
	case revoked:
		return fmt.Errorf("tlsconf: certificate %q (serial %s) is revoked (%s)", c.Subject.CommonName, serialOf(c), r.path)
	}
	return nil
}

// readRevoked reads a revocation list.
func readRevoked(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	serials := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.ToLower(strings.TrimSpace(line)); line != "" {
			serials[line] = true
		}
	}
	return serials, sc.Err()
}

// serialOf is a certificate's serial number as the list writes it.
func serialOf(c *x509.Certificate) string { return strings.ToLower(c.SerialNumber.Text(16)) }

// Revoke adds the certificate dir/NAME.pem to dir's revocation list. It
// returns the serial number it added.
func Revoke(dir, name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	if name == "ca" {
		return "", fmt.Errorf("the CA cannot be revoked: make a new one")
	}
	c, err := ReadCert(dir, name)
	if err != nil {
		return "", err
	}
	serial := serialOf(c)
	_, err = AddRevoked(dir, map[string]string{serial: fmt.Sprintf("%s, revoked %s", c.Subject.CommonName, time.Now().UTC().Format(time.RFC3339))})
	return serial, err
}

// CheckSerial reports whether s is a serial number as the list writes it
// (lower-case hexadecimal, at most 20 bytes as RFC 5280 allows).
func CheckSerial(s string) error {
	if s == "" || len(s) > 40 || strings.Trim(s, "0123456789abcdef") != "" {
		return fmt.Errorf("%q is not a certificate serial number (lower-case hexadecimal)", s)
	}
	return nil
}

// AddRevoked adds the serials (serial → note, its comment) that dir's
// revocation list lacks to it, in order, reading it once; it returns those
// it added. A bad serial adds nothing.
func AddRevoked(dir string, serials map[string]string) ([]string, error) {
	for s := range serials {
		if err := CheckSerial(s); err != nil {
			return nil, err
		}
	}
	have, err := readRevoked(RevokedPath(dir))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var lines strings.Builder
	var added []string
	for _, s := range slices.Sorted(maps.Keys(serials)) {
		if !have[s] {
			note := strings.NewReplacer("\n", " ", "\r", " ").Replace(serials[s])
			fmt.Fprintf(&lines, "%s # %s\n", s, note)
			added = append(added, s)
		}
	}
	if len(added) == 0 {
		return nil, nil
	}
	f, err := os.OpenFile(RevokedPath(dir), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(lines.String()); err != nil {
		f.Close()
		return nil, err
	}
	return added, f.Close()
}
