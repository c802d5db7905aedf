package mgmt

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// Callers on the node's own machine administer it without the cluster
// secret only as root, as GlusterFS's CLI reaches glusterd through a
// root-only socket: the kernel says who owns the caller's end of a TCP
// connection on this machine (/proc/net/tcp and tcp6, the socket whose
// local address is the caller's and whose remote address is ours).

// localCallerUID returns the user id that owns the caller's socket of r,
// a connection from this machine.
func localCallerUID(r *http.Request) (int, error) {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return -1, fmt.Errorf("no local address for the request")
	}
	caller, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if err != nil {
		return -1, err
	}
	server, err := net.ResolveTCPAddr("tcp", local.String())
	if err != nil {
		return -1, err
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if uid, found, err := socketOwner(table, caller, server); err != nil || found {
			return uid, err
		}
	}
	return -1, fmt.Errorf("the caller's socket %s is not in this machine's TCP tables", caller)
}

// socketOwner finds, in the kernel TCP table at path, the socket local →
// remote and returns its owner's user id.
func socketOwner(path string, local, remote *net.TCPAddr) (uid int, found bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return -1, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the heading
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || !sameEndpoint(fields[1], local) || !sameEndpoint(fields[2], remote) {
			continue
		}
		uid, err := strconv.Atoi(fields[7])
		return uid, true, err
	}
	return -1, false, sc.Err()
}

// sameEndpoint reports whether a kernel table's "ADDR:PORT" (hex, the
// address in host byte order, 32-bit words) is a.
func sameEndpoint(field string, a *net.TCPAddr) bool {
	hexAddr, hexPort, ok := strings.Cut(field, ":")
	if !ok {
		return false
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil || int(port) != a.Port {
		return false
	}
	raw, err := hex.DecodeString(hexAddr)
	if err != nil || len(raw)%4 != 0 {
		return false
	}
	for i := 0; i < len(raw); i += 4 { // each 32-bit word is little-endian
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	return net.IP(raw).Equal(a.IP)
}
