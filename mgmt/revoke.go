package mgmt

import (
	"net/http"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/tlsconf"
)

// Revocation across the cluster. `mortar tls revoke --server` gives the
// serial number of a revoked certificate to the cluster, which keeps it in
// its replicated state (State.Revoked); every node of a TLS cluster adds
// what the state holds to its own TLS directory's list (tlsconf.RevokedPath),
// which its server and bricks read again whenever it changes: revoked
// once, the certificate is refused by every node within a moment, and by a
// node that was down once it is back. A node's own list may hold more (an
// operator's local revocations); nothing is ever taken off.
//
//	POST /v1/tls/revoked  RevokeRequest → {} (node certificates only)
//	GET  /v1/tls/revoked  map serial → note

// maxRevokeNote bounds a revocation's note.
const maxRevokeNote = 200

func (n *Node) revokeHandlers(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/tls/revoked", handle(n, func(r *http.Request, req api.RevokeRequest) (any, error) {
		if err := tlsconf.CheckSerial(req.Serial); err != nil {
			return nil, api.Errorf(api.ErrInvalid, "revoke: %v", err)
		}
		if len(req.Note) > maxRevokeNote {
			return nil, api.Errorf(api.ErrInvalid, "revoke: the note is longer than %d bytes", maxRevokeNote)
		}
		return struct{}{}, n.store.Apply(state.Command{Op: state.OpRevoke, Key: req.Serial, Value: req.Note})
	}))
	mux.HandleFunc("GET /v1/tls/revoked", handle(n, func(r *http.Request, _ struct{}) (any, error) {
		out := n.store.State().Revoked
		if out == nil {
			out = map[string]string{}
		}
		return out, nil
	}))
}

// writeRevoked adds the serials the cluster revoked to this node's TLS
// directory's list (a TLS node only).
func (n *Node) writeRevoked(st *state.State) {
	if n.tls == nil || len(st.Revoked) == 0 {
		return
	}
	notes := make(map[string]string, len(st.Revoked))
	for s, note := range st.Revoked {
		notes[s] = note + " (from the cluster)"
	}
	added, err := tlsconf.AddRevoked(n.tls.Dir(), notes)
	if err != nil {
		n.log.Error("the cluster's revocation list could not be copied to this node's", "dir", n.tls.Dir(), "err", err)
		return
	}
	for _, s := range added {
		n.log.Info("certificate revoked by the cluster", "serial", s, "note", st.Revoked[s])
	}
}
