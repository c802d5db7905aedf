package mgmt

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// A node without TLS authenticates callers with the cluster secret: 32
// random bytes made at the node's first start and kept in DATA/secret
// (0600), which a node takes over from the cluster it joins (peer probe
// hands it over). Every request between nodes carries it (secretHeader),
// and so does every Raft connection (raftPreamble); an operator's CLI on
// another machine presents it with --secret-file or MORTAR_SECRET_FILE.
//
// Without the secret, a plain node serves only:
//   - root on its own machine: callers from its loopback interface or from
//     one of its own addresses (a TCP connection cannot complete from a
//     forged address) whose socket root owns (peeruid.go) — local
//     administration, as with GlusterFS's root-only local socket;
//   - the spec of a volume whose auth.allow admits the caller's address
//     explicitly, which is what a mount from another machine needs.
//
// Spec fetches by anyone but another node (or an operator holding the
// secret) meet the volume's auth.allow and auth.reject, by address.

// secretHeader carries the cluster secret: "Authorization: Mortar HEX".
const (
	secretHeader = "Authorization"
	secretScheme = "Mortar "
)

// SecretFileEnv names the environment variable that points the CLI at a
// cluster secret file.
const SecretFileEnv = "MORTAR_SECRET_FILE"

// secretFile is where a node keeps its cluster secret.
func secretFile(dataDir string) string { return filepath.Join(dataDir, "secret") }

// loadSecret reads the node's cluster secret, making one on first start.
func loadSecret(dataDir string) (string, error) {
	path := secretFile(dataDir)
	s, err := ReadSecretFile(path)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	s = newSecret()
	return s, writeSecret(path, s)
}

// newSecret returns 32 random bytes in hex.
func newSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// writeSecret replaces the secret file at path (0600).
func writeSecret(path, s string) error {
	if err := checkSecret(s); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s+"\n"), 0o600); err != nil {
		return fmt.Errorf("cluster secret: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("cluster secret: %w", err)
	}
	return nil
}

// ReadSecretFile reads a cluster secret from path (a node's DATA/secret,
// or a copy of it).
func ReadSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cluster secret: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if err := checkSecret(s); err != nil {
		return "", fmt.Errorf("cluster secret %s: %w", path, err)
	}
	return s, nil
}

// checkSecret refuses what is not 32 bytes in hex.
func checkSecret(s string) error {
	if b, err := hex.DecodeString(s); err != nil || len(b) != 32 {
		return errorf(ErrInvalid, "a cluster secret is 64 hexadecimal digits")
	}
	return nil
}

// sameSecret compares two secrets in constant time.
func sameSecret(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// secret returns the node's current cluster secret.
func (n *Node) secret() string { return *n.secretV.Load() }

// adoptSecret makes s the node's cluster secret (on joining a cluster, or
// on leaving one: a fresh one).
func (n *Node) adoptSecret(s string) error {
	if err := writeSecret(secretFile(n.dir), s); err != nil {
		return err
	}
	n.secretV.Store(&s)
	return nil
}

// hasSecret reports whether r carries the cluster secret.
func (n *Node) hasSecret(r *http.Request) bool {
	v, ok := strings.CutPrefix(r.Header.Get(secretHeader), secretScheme)
	return ok && sameSecret(v, n.secret())
}

// authorizePlain decides what a caller of a node without TLS may do.
func (n *Node) authorizePlain(r *http.Request) error {
	if n.hasSecret(r) {
		return nil
	}
	local := isLocalIP(remoteIP(r))
	if local {
		if err := rootCaller(r); err != nil {
			return err
		}
	}
	v, isSpec := n.specVolume(r)
	switch {
	case isSpec && v != nil:
		return n.permitSpec(r, v, "", "", local)
	case local:
		return nil
	}
	return errorf(ErrUnauthenticated, "this node answers requests from other machines only with the cluster secret "+
		"(give the CLI --secret-file, or set %s, to a copy of DATA/secret of a node of the cluster; "+
		"better: run the cluster with TLS); a mount from another machine needs the volume's auth.allow to name its address", SecretFileEnv)
}

// rootCaller refuses a caller on this machine that is not root.
func rootCaller(r *http.Request) error {
	uid, err := localCallerUID(r)
	if err != nil {
		return errorf(ErrForbidden, "cannot tell which user is calling from this machine (%v): refused", err)
	}
	if uid != 0 {
		return errorf(ErrForbidden, "only root may use this node's API from this machine without the cluster secret (the caller is uid %d)", uid)
	}
	return nil
}

// remoteIP returns the caller's IP address (nil if unparsable).
func remoteIP(r *http.Request) net.IP {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return nil
	}
	return net.ParseIP(host)
}

// isLocalIP reports whether ip is this machine's: loopback, or an
// address of one of its interfaces.
func isLocalIP(ip net.IP) bool {
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// secretTransport adds the node's cluster secret to every request it
// sends to other nodes.
type secretTransport struct {
	next   http.RoundTripper
	secret func() string
}

func (t secretTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if r.Header.Get(secretHeader) == "" {
		r.Header.Set(secretHeader, secretScheme+t.secret())
	}
	return t.next.RoundTrip(r)
}

// raftMagic opens every Raft connection of a node without TLS, before
// the cluster secret's 32 bytes.
const raftMagic = "mortar-raft1"

// raftPreamble is what a node sends first on a Raft connection.
func raftPreamble(secret string) []byte {
	b, _ := hex.DecodeString(secret)
	return append([]byte(raftMagic), b...)
}

// secretListener accepts Raft connections that open with the cluster
// secret: the check runs at the connection's first read, so that a slow
// caller does not hold up Accept.
type secretListener struct {
	net.Listener
	secret func() string
	log    *slog.Logger
}

func (l secretListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &secretConn{Conn: c, l: l}, nil
}

// secretConn is a Raft connection whose preamble is checked before
// anything else is read from it.
type secretConn struct {
	net.Conn
	l    secretListener
	once sync.Once
	err  error
}

func (c *secretConn) Read(p []byte) (int, error) {
	c.once.Do(c.check)
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(p)
}

// check reads the preamble and closes the connection if it is wrong.
func (c *secretConn) check() {
	c.Conn.SetReadDeadline(time.Now().Add(handshakeWait))
	want := raftPreamble(c.l.secret())
	got := make([]byte, len(want))
	_, err := io.ReadFull(c.Conn, got)
	c.Conn.SetReadDeadline(time.Time{})
	if err == nil && subtle.ConstantTimeCompare(got, want) != 1 {
		err = errors.New("it did not present this cluster's secret")
	}
	if err != nil {
		c.l.log.Warn("raft connection refused", "remote", c.RemoteAddr().String(), "err", err)
		c.err = fmt.Errorf("raft connection from %s refused: %w", c.RemoteAddr(), err)
		c.Conn.Close()
	}
}

// handshakeWait bounds how long a new Raft connection may take to present
// the secret.
const handshakeWait = 10 * time.Second
