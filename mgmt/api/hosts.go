package api

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// HostResolveTimeout bounds the name lookup made for a brick host that is
// not obviously local.
const HostResolveTimeout = 2 * time.Second

// LocalAddrs returns the addresses of this machine's interfaces.
func LocalAddrs() []netip.Addr {
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

// IsLocalAddr reports whether a is a loopback address or one of this
// machine's interface addresses.
func IsLocalAddr(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() {
		return true
	}
	for _, l := range LocalAddrs() {
		if l == a.WithZone("") || l == a {
			return true
		}
	}
	return false
}

// IsLocalHost reports whether host names this node: "localhost", a
// loopback address, the machine's host name, the node's advertised host,
// one of its interface addresses, or a name that resolves to one of those.
func IsLocalHost(ctx context.Context, host, advertiseHost string) bool {
	h := strings.ToLower(strings.Trim(host, "[]"))
	if h == "" {
		return false
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return !a.IsUnspecified() && IsLocalAddr(a)
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || h == strings.ToLower(advertiseHost) {
		return true
	}
	if name, err := os.Hostname(); err == nil && strings.EqualFold(h, name) {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, HostResolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if !IsLocalAddr(a) {
			return false
		}
	}
	return true
}

// SplitHostPortDefault splits addr into host and port, adding DefaultPort
// when addr has none. It accepts "host", "host:port", "[v6]" and
// "[v6]:port".
func SplitHostPortDefault(addr string) (string, string) {
	if host, port, err := net.SplitHostPort(addr); err == nil {
		return host, port
	}
	return strings.Trim(addr, "[]"), strconv.Itoa(DefaultPort)
}
