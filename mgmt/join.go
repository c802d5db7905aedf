package mgmt

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/mortarfs/mortar/internal/proof"
	"github.com/mortarfs/mortar/mgmt/api"
)

// sealForward seals the probed node's secret in the body of a probe
// request that this node forwards to the leader: a CLI on this machine
// sent it in clear, over loopback.
func (n *Node) sealForward(r *http.Request, body []byte) []byte {
	if n.tls != nil || r.Method != http.MethodPost || r.URL.Path != "/v1/peers" {
		return body
	}
	var req api.ProbeRequest
	if json.Unmarshal(body, &req) != nil || req.Secret == "" {
		return body
	}
	req.SealedSecret, req.Secret = proof.Seal(n.secret(), api.ProbeLabel, []byte(req.Secret)), ""
	out, err := json.Marshal(req)
	if err != nil {
		return body
	}
	return out
}

// provingSecret returns the probed node's secret that req carries, in
// clear or sealed ("": none).
func (n *Node) provingSecret(req api.ProbeRequest) (string, error) {
	s := req.Secret
	if len(req.SealedSecret) > 0 {
		b, err := proof.Open(n.secret(), api.ProbeLabel, req.SealedSecret)
		if err != nil {
			return "", api.Errorf(api.ErrInvalid, "peer probe %s: the probed node's secret was sealed with another secret than this cluster's (the CLI's --secret-file is not this cluster's)", req.Host)
		}
		s = string(b)
	}
	if s == "" {
		return "", nil
	}
	if err := api.CheckSecret(s); err != nil {
		return "", api.Errorf(api.ErrInvalid, "peer probe %s: --peer-secret-file: %v", req.Host, err)
	}
	return s, nil
}

// joinRequest asks the node at host, which proved (or not) with
// proving, to join this node's cluster, handing it the cluster secret
// (see above).
func (n *Node) joinRequest(ctx context.Context, host, proving string) api.JoinRequest {
	join := api.JoinRequest{Leader: n.id}
	switch {
	case n.tls != nil:
	case proving != "":
		join.SealedSecret = proof.Seal(proving, api.JoinLabel, []byte(n.secret()))
	case api.IsLocalHost(ctx, host, ""):
		join.Secret = n.secret()
	}
	return join
}

// joinSecret returns the cluster secret a join request hands this node
// ("": none).
func (n *Node) joinSecret(req api.JoinRequest) (string, error) {
	if len(req.SealedSecret) == 0 {
		return req.Secret, nil
	}
	b, err := proof.Open(n.secret(), api.JoinLabel, req.SealedSecret)
	if err != nil {
		return "", api.Errorf(api.ErrUnauthenticated, "join: the cluster secret was not sealed with this node's secret")
	}
	return string(b), nil
}
