package mgmt

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mortarfs/mortar/internal/atomicfile"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/tlsconf"
)

// A node with Config.TLS secures its every connection: its API and Raft
// listeners require a certificate of the cluster's CA (tlsconf), and it
// presents its own to other nodes and to bricks; its bricks accept only
// TLS clients, checked against their volume's auth.allow and auth.reject.
// A cluster is secured as a whole: every node runs with TLS or none does.
//
// Node certificates (tlsconf.KindNode) may do everything; client
// certificates may read the cluster and fetch the spec of the volumes
// whose rules admit them, which is what a mount needs.

// authorize refuses what the caller may not do: by its certificate on a
// TLS node, by the cluster secret or its address on a plain one
// (authorizePlain).
func (n *Node) authorize(r *http.Request) error {
	if n.tls == nil {
		return n.authorizePlain(r)
	}
	var name string
	var kind tlsconf.Kind
	ok := false
	if r.TLS != nil {
		name, kind, ok = tlsconf.PeerIdentity(*r.TLS)
	}
	if !ok {
		return api.Errorf(api.ErrForbidden, "a client certificate is required")
	}
	if kind == tlsconf.KindNode {
		return nil
	}
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v1/local/"), strings.HasPrefix(p, "/v1/cluster/"):
		return api.Errorf(api.ErrForbidden, "certificate %s (%s) is not a node certificate", name, kind)
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		return api.Errorf(api.ErrForbidden, "certificate %s (%s) may read the cluster but not change it: use a node certificate", name, kind)
	}
	if v, _ := n.specVolume(r); v != nil {
		return n.permitSpec(r, v, name, kind, true)
	}
	return nil
}

// specVolume says whether r fetches a volume's spec, and of which volume
// (nil: none of that name, which the handler answers).
func (n *Node) specVolume(r *http.Request) (*state.Volume, bool) {
	p := r.URL.Path
	parts := strings.Split(strings.TrimPrefix(p, "/v1/volumes/"), "/")
	if !strings.HasPrefix(p, "/v1/volumes/") || len(parts) != 2 || parts[1] != "spec" {
		return nil, false
	}
	return n.store.State().Volumes[parts[0]], true
}

// permitSpec applies v's auth.allow and auth.reject to the caller of r,
// named by its certificate with TLS. Without rules every caller passes if
// open is set; otherwise only one that auth.allow names explicitly.
func (n *Node) permitSpec(r *http.Request, v *state.Volume, name string, kind tlsconf.Kind, open bool) error {
	rules, err := volumeAuth(v)
	if err != nil {
		return err
	}
	if !open && len(rules.Allow) == 0 {
		return api.Errorf(api.ErrUnauthenticated, "volume %s: a mount from another machine needs the cluster secret, "+
			"or the volume's auth.allow naming its address (mortar volume set %s auth.allow ADDR)", v.Name, v.Name)
	}
	addr, _ := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if err := rules.Permit(name, kind, addr); err != nil {
		return api.Errorf(api.ErrForbidden, "volume %s: %v", v.Name, err)
	}
	return nil
}

// volumeAuth returns the access rules of v: auth.allow, auth.reject and
// the volume's secret.
func volumeAuth(v *state.Volume) (tlsconf.AuthRules, error) {
	r, err := tlsconf.ParseAuth(v.Options[options.OptAuthAllow], v.Options[options.OptAuthReject])
	if err != nil {
		return r, api.Errorf(api.ErrInvalid, "volume %s: %v", v.Name, err)
	}
	r.Secret = v.Secret
	return r, nil
}

// authFile is where this node keeps the access rules of its brick id,
// which the brick reads at every new connection.
func (n *Node) authFile(id string) string {
	return filepath.Join(n.dir, "auth", id+".auth")
}

// writeAuth writes the access rules of v for this node's bricks of it,
// where they differ from what is there, and has the running ones apply
// them to the connections they already have.
func (n *Node) writeAuth(v *state.Volume) {
	rules, err := volumeAuth(v)
	if err != nil {
		n.log.Error("access rules not applied", "err", err)
		return
	}
	for _, b := range v.Bricks {
		if b.Node != n.id {
			continue
		}
		path := n.authFile(b.ID)
		if old, err := tlsconf.ReadAuthFile(path); err == nil && sameRules(old, rules) {
			if _, err := os.Stat(path); err == nil || rules.Empty() {
				continue
			}
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
			err = tlsconf.WriteAuthFile(path, rules)
		}
		if err != nil {
			n.log.Error("writing a brick's access rules failed", "brick", b.Name(), "err", err)
			continue
		}
		n.recheckBrick(v.ID, b.ID)
	}
}

// reserveFile is where this node keeps the storage.reserve of its brick
// id, which the brick applies again when rechecked.
func (n *Node) reserveFile(id string) string {
	return filepath.Join(n.dir, "auth", id+".reserve")
}

// writeReserve writes v's storage.reserve for this node's bricks of it,
// where it differs from what is there, and has the running ones apply
// it.
func (n *Node) writeReserve(v *state.Volume) {
	n.writeBrickValue(v, options.OptStorageReserve, n.reserveFile, v.Options[options.OptStorageReserve])
}

// fenceFile is where this node keeps the layout fence of its brick id
// (state.Volume.Fence), which the brick applies again when rechecked.
func (n *Node) fenceFile(id string) string {
	return filepath.Join(n.dir, "auth", id+".fence")
}

// writeFence writes v's layout fence for this node's bricks of it, where
// it differs from what is there, and has the running ones apply it.
func (n *Node) writeFence(v *state.Volume) {
	if v.Fence != 0 {
		n.writeBrickValue(v, "layout fence", n.fenceFile, strconv.FormatUint(v.Fence, 10))
	}
}

// writeBrickValue writes want (what it is, for logs) to file(brick id)
// for this node's bricks of v, where it differs from what is there, and
// has the running ones read it again.
func (n *Node) writeBrickValue(v *state.Volume, what string, file func(id string) string, want string) {
	for _, b := range v.Bricks {
		if b.Node != n.id {
			continue
		}
		path := file(b.ID)
		if old, err := os.ReadFile(path); err == nil && string(old) == want {
			continue
		}
		err := os.MkdirAll(filepath.Dir(path), 0o700)
		if err == nil {
			err = atomicfile.Write(path, []byte(want))
		}
		if err != nil {
			n.log.Error("writing a brick's "+what+" failed", "brick", b.Name(), "err", err)
			continue
		}
		n.recheckBrick(v.ID, b.ID)
	}
}

// sameRules reports whether a and b are the same rules.
func sameRules(a, b tlsconf.AuthRules) bool {
	return slices.Equal(a.Allow, b.Allow) && slices.Equal(a.Reject, b.Reject) && a.Secret == b.Secret
}

// recheckBrick has brick id of volume volID, if it runs here, apply its
// rules to the connections it has.
func (n *Node) recheckBrick(volID, id string) {
	n.runMu.Lock()
	defer n.runMu.Unlock()
	vr := n.vols[volID]
	if vr == nil || vr.bricks[id] == nil || vr.bricks[id].proc == nil {
		return
	}
	vr.bricks[id].proc.Recheck()
}

// peerClient returns a client for another node's API at addr.
func (n *Node) peerClient(addr string) *api.Client {
	if n.tls != nil {
		return api.NodeClient(addr, n.peerHTTP, n.id, true, "")
	}
	return api.NodeClient(addr, n.peerHTTP, n.id, false, n.secret()) // signs the requests (sign.go)
}
