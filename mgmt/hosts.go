package mgmt

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/mortarfs/mortar/mgmt/api"
)

func isUnspecified(host string) bool {
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.IsUnspecified()
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
		ctx, cancel := context.WithTimeout(context.Background(), api.HostResolveTimeout)
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
		cancel()
		if err == nil && len(addrs) > 0 && !addrs[0].Unmap().IsLoopback() && api.IsLocalAddr(addrs[0]) {
			return net.JoinHostPort(name, port)
		}
	}
	for _, a := range api.LocalAddrs() {
		if a.IsGlobalUnicast() {
			return net.JoinHostPort(a.String(), port)
		}
	}
	return net.JoinHostPort("127.0.0.1", port)
}
