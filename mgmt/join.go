package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/mortarfs/mortar/internal/proof"
)

// A probe without TLS moves two secrets, neither of them in clear across
// the network:
//
//   - the probed node's own secret (--peer-secret-file), from the CLI to
//     the leader, sealed under the cluster secret (probeLabel): by the CLI
//     when it holds the cluster secret, else by the node that forwards a
//     local CLI's request to the leader (sealForward). A CLI holding
//     neither a cluster secret nor TLS sends it only to a node on its own
//     machine;
//   - the cluster secret, from the leader to the joining node, sealed under
//     the probed node's secret (joinLabel), which the joining node holds.
//     Without a probed node's secret, the probed node either is on the
//     leader's machine (the leader's requests pass as local root), and gets
//     the cluster secret in clear over loopback, or accepted the leader's
//     signed request, so it holds the cluster secret already and gets
//     nothing.
const (
	probeLabel = "mortar-probe"
	joinLabel  = "mortar-join"
)

// sealProbe seals req.Secret under the client's cluster secret, or
// refuses to send it in clear to another machine.
func (c *Client) sealProbe(ctx context.Context, req ProbeRequest) (ProbeRequest, error) {
	switch {
	case req.Secret == "" || c.scheme == "https":
		return req, nil
	case c.secret != "":
		req.SealedSecret, req.Secret = proof.Seal(c.secret, probeLabel, []byte(req.Secret)), ""
		return req, nil
	}
	host, _ := splitHostPortDefault(c.addr)
	if !isLocalHost(ctx, host, "") {
		return req, fmt.Errorf("%s is another machine, and the probed node's secret must not cross the network in clear: "+
			"give the cluster's secret too (--secret-file, or %s), which seals it, or run the probe on a node of the cluster", c.addr, SecretFileEnv)
	}
	return req, nil
}

// sealForward seals the probed node's secret in the body of a probe
// request that this node forwards to the leader: a CLI on this machine
// sent it in clear, over loopback.
func (n *Node) sealForward(r *http.Request, body []byte) []byte {
	if n.tls != nil || r.Method != http.MethodPost || r.URL.Path != "/v1/peers" {
		return body
	}
	var req ProbeRequest
	if json.Unmarshal(body, &req) != nil || req.Secret == "" {
		return body
	}
	req.SealedSecret, req.Secret = proof.Seal(n.secret(), probeLabel, []byte(req.Secret)), ""
	out, err := json.Marshal(req)
	if err != nil {
		return body
	}
	return out
}

// provingSecret returns the probed node's secret that req carries, in
// clear or sealed ("": none).
func (n *Node) provingSecret(req ProbeRequest) (string, error) {
	s := req.Secret
	if len(req.SealedSecret) > 0 {
		b, err := proof.Open(n.secret(), probeLabel, req.SealedSecret)
		if err != nil {
			return "", errorf(ErrInvalid, "peer probe %s: the probed node's secret was sealed with another secret than this cluster's (the CLI's --secret-file is not this cluster's)", req.Host)
		}
		s = string(b)
	}
	if s == "" {
		return "", nil
	}
	if err := checkSecret(s); err != nil {
		return "", errorf(ErrInvalid, "peer probe %s: --peer-secret-file: %v", req.Host, err)
	}
	return s, nil
}

// joinRequest asks the node at host, which proved (or not) with
// proving, to join this node's cluster, handing it the cluster secret
// (see above).
func (n *Node) joinRequest(ctx context.Context, host, proving string) JoinRequest {
	join := JoinRequest{Leader: n.id}
	switch {
	case n.tls != nil:
	case proving != "":
		join.SealedSecret = proof.Seal(proving, joinLabel, []byte(n.secret()))
	case isLocalHost(ctx, host, ""):
		join.Secret = n.secret()
	}
	return join
}

// joinSecret returns the cluster secret a join request hands this node
// ("": none).
func (n *Node) joinSecret(req JoinRequest) (string, error) {
	if len(req.SealedSecret) == 0 {
		return req.Secret, nil
	}
	b, err := proof.Open(n.secret(), joinLabel, req.SealedSecret)
	if err != nil {
		return "", errorf(ErrUnauthenticated, "join: the cluster secret was not sealed with this node's secret")
	}
	return string(b), nil
}
