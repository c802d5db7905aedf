package mgmt

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"path"
	"strings"
	"time"
)

// TLSConfig secures every connection of a node: its API and Raft
// listeners require a certificate signed by the cluster's CA (Server), and
// it presents its own to other nodes and to bricks (Client). A cluster is
// secured as a whole: every node runs with TLS or none does. Dir and Name
// name the identity (tlsconf: DIR/NAME.pem, DIR/NAME.key, DIR/ca.pem) that
// brick processes load.
type TLSConfig struct {
	Server, Client *tls.Config
	Dir, Name      string
}

// Certificate kinds, the OrganizationalUnit of the certificates `mortar
// tls issue` makes: node certificates may change the cluster; client
// certificates may read it and mount the volumes their auth rules allow.
const (
	kindNode   = "node"
	kindClient = "client"
)

// peerKind returns the name (CN) and kind (OU) of the verified client
// certificate of r, or ok false on a plain connection.
func peerKind(r *http.Request) (name, kind string, ok bool) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", "", false
	}
	return certIdentity(r.TLS.PeerCertificates[0])
}

func certIdentity(c *x509.Certificate) (name, kind string, ok bool) {
	if len(c.Subject.OrganizationalUnit) > 0 {
		kind = c.Subject.OrganizationalUnit[0]
	}
	return c.Subject.CommonName, kind, true
}

// authorize refuses what a client certificate may not do on a TLS node:
// requests between nodes and every change need a node certificate; a
// volume's spec (what a mount needs) is given only to the clients its
// auth.allow and auth.reject admit. Plain nodes authorize everything.
func (n *Node) authorize(r *http.Request) error {
	if n.tlsCfg == nil {
		return nil
	}
	name, kind, ok := peerKind(r)
	if !ok {
		return errorf(ErrForbidden, "a client certificate is required")
	}
	if kind == kindNode {
		return nil
	}
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v1/local/"), strings.HasPrefix(p, "/v1/cluster/"):
		return errorf(ErrForbidden, "certificate %s (%s) is not a node certificate", name, kind)
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		return errorf(ErrForbidden, "certificate %s (%s) may read the cluster but not change it: use a node certificate", name, kind)
	}
	parts := strings.Split(strings.TrimPrefix(p, "/v1/volumes/"), "/")
	if strings.HasPrefix(p, "/v1/volumes/") && len(parts) == 2 && parts[1] == "spec" {
		v, ok := n.store.State().Volumes[parts[0]]
		if !ok {
			return nil // answered: not found
		}
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		return permit(v.Options[OptAuthAllow], v.Options[OptAuthReject], name, host)
	}
	return nil
}

// permit applies a volume's auth.allow and auth.reject to a client
// certificate name and address: reject wins; an empty allow list admits
// everyone not rejected.
func permit(allow, reject, name, addr string) error {
	if e, ok := matchAuth(reject, name, addr); ok {
		return errorf(ErrForbidden, "client %s (%s) is refused by auth.reject entry %q", name, addr, e)
	}
	if allow == "" {
		return nil
	}
	if _, ok := matchAuth(allow, name, addr); ok {
		return nil
	}
	return errorf(ErrForbidden, "client %s (%s) is not in auth.allow (%s)", name, addr, allow)
}

// matchAuth returns the entry of the comma list that name or addr
// matches: a certificate-name glob, an address or a CIDR.
func matchAuth(list, name, addr string) (string, bool) {
	if list == "" {
		return "", false
	}
	ip := net.ParseIP(addr)
	for _, e := range strings.Split(list, ",") {
		if _, cidr, err := net.ParseCIDR(e); err == nil {
			if ip != nil && cidr.Contains(ip) {
				return e, true
			}
			continue
		}
		if eip := net.ParseIP(e); eip != nil {
			if ip != nil && eip.Equal(ip) {
				return e, true
			}
			continue
		}
		if ok, _ := path.Match(e, name); ok {
			return e, true
		}
	}
	return "", false
}

// tlsTransport is an HTTP transport to other nodes, with TLS when c is
// set.
func tlsTransport(c *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy:               nil, // the API is never reached through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSClientConfig:     c,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
}

// peerClient returns a client for another node's API at addr.
func (n *Node) peerClient(addr string) *Client {
	c := &Client{addr: addr, http: n.peerHTTP, via: n.id, scheme: "http"}
	if n.tlsCfg != nil {
		c.scheme = "https"
	}
	return c
}

// NewTLSClient returns a client for the node at addr that speaks HTTPS
// with the certificate of c (tlsconf.Identity.ClientConfig).
func NewTLSClient(addr string, c *tls.Config) *Client {
	cl := NewClient(addr)
	cl.http = &http.Client{Transport: tlsTransport(c)}
	cl.scheme = "https"
	return cl
}
