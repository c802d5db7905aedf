package mgmt

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// hostResolveTimeout bounds the name lookup made for a brick host that is
// not obviously local.
const hostResolveTimeout = 2 * time.Second

// localAddrs returns the addresses of this machine's interfaces.
func localAddrs() []netip.Addr {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range ifaddrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

func isUnspecified(host string) bool {
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.IsUnspecified()
}

// isLocalAddr reports whether a is a loopback address or one of this
// machine's interface addresses.
func isLocalAddr(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() {
		return true
	}
	for _, l := range localAddrs() {
		if l == a.WithZone("") || l == a {
			return true
		}
	}
	return false
}

// isLocalHost reports whether host names this node: "localhost", a
// loopback address, the machine's host name, the node's advertised host,
// one of its interface addresses, or a name that resolves to one of those.
func isLocalHost(ctx context.Context, host, advertiseHost string) bool {
	h := strings.ToLower(strings.Trim(host, "[]"))
	if h == "" {
		return false
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return !a.IsUnspecified() && isLocalAddr(a)
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || h == strings.ToLower(advertiseHost) {
		return true
	}
	if name, err := os.Hostname(); err == nil && strings.EqualFold(h, name) {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, hostResolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if !isLocalAddr(a) {
			return false
		}
	}
	return true
}

// deriveAdvertise picks the address others should use to reach a node
// listening on listenAddr (the address actually bound, so with its real
// port).
func deriveAdvertise(listenAddr string) string {
	host, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return listenAddr
	}
	if host != "" && !isUnspecified(host) {
		return net.JoinHostPort(host, port)
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		ctx, cancel := context.WithTimeout(context.Background(), hostResolveTimeout)
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
		cancel()
		if err == nil && len(addrs) > 0 && !addrs[0].Unmap().IsLoopback() && isLocalAddr(addrs[0]) {
			return net.JoinHostPort(name, port)
		}
	}
	for _, a := range localAddrs() {
		if a.IsGlobalUnicast() {
			return net.JoinHostPort(a.String(), port)
		}
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// splitHostPortDefault splits addr into host and port, adding DefaultPort
// when addr has none. It accepts "host", "host:port", "[v6]" and
// "[v6]:port".
func splitHostPortDefault(addr string) (string, string) {
	if host, port, err := net.SplitHostPort(addr); err == nil {
		return host, port
	}
	return strings.Trim(addr, "[]"), strconv.Itoa(DefaultPort)
}
