package mgmt

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/mortarfs/mortar/mgmt/api"
)

// A node without TLS authenticates callers with the cluster secret: 32
// random bytes made at the node's first start and kept in DATA/secret
// (0600), which a node takes over from the cluster it joins (peer probe
// hands it over, sealed: join.go). The secret itself never crosses the
// network: every request between nodes is signed with it (sign.go), and
// every Raft connection answers a challenge with it (raftauth.go); an
// operator's CLI on another machine signs with it too, given --secret-file
// or MORTAR_SECRET_FILE, and so does a mount given -o secret-file.
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

// secretFile is where a node keeps its cluster secret.
func secretFile(dataDir string) string { return filepath.Join(dataDir, "secret") }

// loadSecret reads the node's cluster secret, making one on first start.
func loadSecret(dataDir string) (string, error) {
	path := secretFile(dataDir)
	s, err := api.ReadSecretFile(path)
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
	if err := api.CheckSecret(s); err != nil {
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

// authorizePlain decides what a caller of a node without TLS may do.
func (n *Node) authorizePlain(r *http.Request) error {
	claimed, bad := n.checkSignature(r)
	if claimed && bad == nil {
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
	case claimed:
		return api.Errorf(api.ErrUnauthenticated, "%v", bad)
	}
	return api.Errorf(api.ErrUnauthenticated, "this node answers requests from other machines only with the cluster secret "+
		"(give the CLI --secret-file, or set %s, to a copy of DATA/secret of a node of the cluster; "+
		"better: run the cluster with TLS); a mount from another machine needs the volume's auth.allow to name its address", api.SecretFileEnv)
}

// rootCaller refuses a caller on this machine that is not root.
func rootCaller(r *http.Request) error {
	uid, err := localCallerUID(r)
	if err != nil {
		return api.Errorf(api.ErrForbidden, "cannot tell which user is calling from this machine (%v): refused", err)
	}
	if uid != 0 {
		return api.Errorf(api.ErrForbidden, "only root may use this node's API from this machine without the cluster secret (the caller is uid %d)", uid)
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
