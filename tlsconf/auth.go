package tlsconf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ErrNotPermitted marks a refusal by a volume's access rules.
var ErrNotPermitted = errors.New("not permitted")

// AuthRules are a volume's access rules, its auth.allow and auth.reject
// options. Each entry is one of:
//
//   - a certificate name, with * and ? globs: "backup", "web-*";
//   - an IP address or a CIDR: "10.0.0.5", "10.0.0.0/8", "fd00::/8";
//   - an IPv4 glob: "10.0.*.*";
//   - "*": everyone;
//   - "name:PATTERN" or "addr:PATTERN" to say which of the two PATTERN is.
//
// A peer matching any Reject entry is refused; otherwise, when Allow is
// not empty, a peer must match one of its entries. Node certificates are
// always allowed: heal daemons and rebalancers run on nodes.
type AuthRules struct {
	Allow, Reject []string
	// Secret is the volume's secret, which every client but a node
	// certificate must prove it holds (CheckSecret); "" checks none.
	Secret string
}

// CheckSecret says whether a client may use the volume by what it proved:
// proves reports, in constant time, whether the client's proof is of the
// secret it is given (the client never sends the secret itself). A
// refusal wraps ErrNotPermitted.
func (r AuthRules) CheckSecret(proves func(secret string) bool) error {
	if r.Secret == "" {
		return nil
	}
	if !proves(r.Secret) {
		return fmt.Errorf("the client did not prove it holds the volume's secret, which comes with the volume's spec from the cluster: %w", ErrNotPermitted)
	}
	return nil
}

// ParseAuth parses the comma-separated values of auth.allow and
// auth.reject (blanks around entries are ignored; empty means none).
func ParseAuth(allow, reject string) (AuthRules, error) {
	var r AuthRules
	var err error
	if r.Allow, err = parseList("auth.allow", allow); err != nil {
		return AuthRules{}, err
	}
	if r.Reject, err = parseList("auth.reject", reject); err != nil {
		return AuthRules{}, err
	}
	return r, nil
}

func parseList(option, s string) ([]string, error) {
	var out []string
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if err := checkEntry(e); err != nil {
			return nil, fmt.Errorf("%s entry %q: %w", option, e, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// checkEntry validates one rule entry.
func checkEntry(e string) error {
	switch kind, pat := classify(e); kind {
	case entryCIDR:
		if _, _, err := net.ParseCIDR(pat); err != nil {
			return err
		}
	case entryName, entryAddrGlob:
		if _, err := path.Match(pat, ""); err != nil {
			return err
		}
	}
	return nil
}

type entryKind int

const (
	entryAny entryKind = iota
	entryName
	entryIP
	entryCIDR
	entryAddrGlob
)

// classify says what an entry names, and the pattern without its prefix.
func classify(e string) (entryKind, string) {
	if e == "*" {
		return entryAny, e
	}
	if pat, ok := strings.CutPrefix(e, "name:"); ok {
		return entryName, pat
	}
	addr, forced := strings.CutPrefix(e, "addr:")
	switch {
	case strings.Contains(addr, "/"):
		return entryCIDR, addr
	case net.ParseIP(addr) != nil:
		return entryIP, addr
	case forced || looksLikeAddrGlob(addr):
		return entryAddrGlob, addr
	}
	return entryName, e
}

// looksLikeAddrGlob reports whether e is an IPv4 glob such as 10.0.*.*.
func looksLikeAddrGlob(e string) bool {
	if strings.Count(e, ".") != 3 {
		return false
	}
	for _, r := range e {
		if !(r >= '0' && r <= '9' || r == '.' || r == '*' || r == '?') {
			return false
		}
	}
	return true
}

// match reports whether entry e covers the peer named name at ip (either
// may be empty).
func match(e, name string, ip net.IP) bool {
	kind, pat := classify(e)
	switch kind {
	case entryAny:
		return true
	case entryName:
		ok, _ := path.Match(pat, name)
		return name != "" && ok
	case entryIP:
		return ip != nil && net.ParseIP(pat).Equal(ip)
	case entryCIDR:
		_, n, err := net.ParseCIDR(pat)
		return err == nil && ip != nil && n.Contains(ip)
	case entryAddrGlob:
		ok, _ := path.Match(pat, ip.String())
		return ip != nil && ok
	}
	return false
}

// Empty reports whether the rules allow everyone.
func (r AuthRules) Empty() bool { return len(r.Allow) == 0 && len(r.Reject) == 0 && r.Secret == "" }

// Permit says whether the peer named name (its certificate's common name;
// "" without TLS), of kind kind, connecting from addr, may use the
// volume. A refusal wraps ErrNotPermitted and names the rule.
func (r AuthRules) Permit(name string, kind Kind, addr net.Addr) error {
	if kind == KindNode {
		return nil
	}
	ip := addrIP(addr)
	for _, e := range r.Reject {
		if match(e, name, ip) {
			return fmt.Errorf("%s matches auth.reject entry %q: %w", describePeer(name, ip), e, ErrNotPermitted)
		}
	}
	if len(r.Allow) == 0 {
		return nil
	}
	for _, e := range r.Allow {
		if match(e, name, ip) {
			return nil
		}
	}
	return fmt.Errorf("%s is not in auth.allow %q: %w", describePeer(name, ip), strings.Join(r.Allow, ","), ErrNotPermitted)
}

func describePeer(name string, ip net.IP) string {
	at := "an unknown address"
	if ip != nil {
		at = ip.String()
	}
	if name == "" {
		return "client at " + at + " (no certificate)"
	}
	return fmt.Sprintf("client certificate %q at %s", name, at)
}

func addrIP(a net.Addr) net.IP {
	switch a := a.(type) {
	case nil:
		return nil
	case *net.TCPAddr:
		return a.IP
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		host = a.String()
	}
	return net.ParseIP(host)
}

// The auth file format: lines "auth.allow = LIST", "auth.reject = LIST"
// and "volume.secret = HEX"; blank lines and lines starting with # are
// ignored. The file is 0600: it holds the volume's secret.
const (
	authAllowKey  = "auth.allow"
	authRejectKey = "auth.reject"
	authSecretKey = "volume.secret"
)

// WriteAuthFile writes r to path, replacing the file atomically (a brick
// reading it sees the old rules or the new ones).
func WriteAuthFile(path string, r AuthRules) error {
	var b bytes.Buffer
	b.WriteString("# mortar access rules, read by the brick at each new connection\n")
	fmt.Fprintf(&b, "%s = %s\n%s = %s\n", authAllowKey, strings.Join(r.Allow, ","), authRejectKey, strings.Join(r.Reject, ","))
	if r.Secret != "" {
		fmt.Fprintf(&b, "%s = %s\n", authSecretKey, r.Secret)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadAuthFile reads rules written by WriteAuthFile. A missing file holds
// no rules (everyone allowed).
func ReadAuthFile(path string) (AuthRules, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return AuthRules{}, nil
	}
	if err != nil {
		return AuthRules{}, err
	}
	var allow, reject, secret string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		switch k = strings.TrimSpace(k); {
		case !ok:
			return AuthRules{}, fmt.Errorf("%s:%d: want \"auth.allow = ...\" or \"auth.reject = ...\"", path, n)
		case k == authAllowKey:
			allow = v
		case k == authRejectKey:
			reject = v
		case k == authSecretKey:
			secret = strings.TrimSpace(v)
		default:
			return AuthRules{}, fmt.Errorf("%s:%d: unknown key %q", path, n, k)
		}
	}
	r, err := ParseAuth(allow, reject)
	if err != nil {
		return AuthRules{}, fmt.Errorf("%s: %w", path, err)
	}
	r.Secret = secret
	return r, nil
}

// AuthFile is a file of rules that may change at any time: Rules reads it
// afresh on every call (one small read per new connection; a stat-and-
// compare would miss two changes within the file system's timestamp
// granularity).
type AuthFile string

// Rules reads the file's current rules.
func (f AuthFile) Rules() (AuthRules, error) { return ReadAuthFile(string(f)) }
