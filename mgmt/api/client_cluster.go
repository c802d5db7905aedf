package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/mortarfs/mortar/internal/proof"
)

// Probe adds the node at host ("host" or "host:port") to the cluster.
func (c *Client) Probe(ctx context.Context, host string) (PeerInfo, error) {
	return c.ProbeNode(ctx, ProbeRequest{Host: host})
}

// ProbeNode adds the node req names to the cluster, proving with
// req.Secret (that node's own secret) that the caller controls it. Without
// TLS, the secret is sent sealed under the client's cluster secret, or, to
// a node on this machine only, in clear.
func (c *Client) ProbeNode(ctx context.Context, req ProbeRequest) (PeerInfo, error) {
	var out PeerInfo
	req, err := c.sealProbe(ctx, req)
	if err != nil {
		return out, err
	}
	err = c.Do(ctx, http.MethodPost, "/v1/peers", req, &out)
	return out, err
}

// Detach removes the node at host, which must serve no brick, from the
// cluster; it becomes a cluster of its own.
func (c *Client) Detach(ctx context.Context, host string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/peers/"+url.PathEscape(host), nil, nil)
}

// Peers lists the nodes of the cluster, the answering one included, with
// whether each answers it now and which one leads.
func (c *Client) Peers(ctx context.Context) ([]PeerInfo, error) {
	var out []PeerInfo
	err := c.Do(ctx, http.MethodGet, "/v1/peers", nil, &out)
	return out, err
}

// ReplaceBrick replaces brick req.Source ("host:/path") of a replicated
// or dispersed volume by the new, empty directory req.Destination, which
// a full heal then fills.
func (c *Client) ReplaceBrick(ctx context.Context, name string, req ReplaceBrickRequest) (VolumeInfo, error) {
	var out VolumeInfo
	err := c.Do(ctx, http.MethodPost, VolPath(name, "replace-brick"), req, &out)
	return out, err
}

// AddBrick appends bricks (whole sets) to a volume. They get files once a
// rebalance has run (Rebalance).
func (c *Client) AddBrick(ctx context.Context, name string, req AddBrickRequest) (VolumeInfo, error) {
	var out VolumeInfo
	err := c.Do(ctx, http.MethodPost, VolPath(name, "add-brick"), req, &out)
	return out, err
}

// Rebalance starts or stops a volume's rebalance.
func (c *Client) Rebalance(ctx context.Context, name string, req RebalanceRequest) (RebalanceStatus, error) {
	var out RebalanceStatus
	err := c.Do(ctx, http.MethodPost, VolPath(name, "rebalance"), req, &out)
	return out, err
}

// RebalanceStatus reports a volume's rebalance (or remove-brick drain)
// and each node's progress.
func (c *Client) RebalanceStatus(ctx context.Context, name string) (RebalanceStatus, error) {
	var out RebalanceStatus
	err := c.Do(ctx, http.MethodGet, VolPath(name, "rebalance"), nil, &out)
	return out, err
}

// RemoveBrick starts draining bricks (whole sets), stops that, or
// commits their removal.
func (c *Client) RemoveBrick(ctx context.Context, name string, req RemoveBrickRequest) (RebalanceStatus, error) {
	var out RebalanceStatus
	err := c.Do(ctx, http.MethodPost, VolPath(name, "remove-brick"), req, &out)
	return out, err
}

// Revoke has the cluster refuse the certificate of serial number serial
// (tlsconf's form) on every node; note says which it is.
func (c *Client) Revoke(ctx context.Context, serial, note string) error {
	return c.Do(ctx, http.MethodPost, "/v1/tls/revoked", RevokeRequest{Serial: serial, Note: note}, nil)
}

// Revoked lists the serial numbers the cluster revoked, with their notes.
func (c *Client) Revoked(ctx context.Context) (map[string]string, error) {
	var out map[string]string
	err := c.Do(ctx, http.MethodGet, "/v1/tls/revoked", nil, &out)
	return out, err
}

// A probe without TLS moves two secrets, neither of them in clear across
// the network:
//
//   - the probed node's own secret (--peer-secret-file), from the CLI to
//     the leader, sealed under the cluster secret (ProbeLabel): by the CLI
//     when it holds the cluster secret, else by the node that forwards a
//     local CLI's request to the leader (mgmt's sealForward). A CLI holding
//     neither a cluster secret nor TLS sends it only to a node on its own
//     machine;
//   - the cluster secret, from the leader to the joining node, sealed under
//     the probed node's secret (JoinLabel), which the joining node holds.
//     Without a probed node's secret, the probed node either is on the
//     leader's machine (the leader's requests pass as local root), and gets
//     the cluster secret in clear over loopback, or accepted the leader's
//     signed request, so it holds the cluster secret already and gets
//     nothing.
const (
	ProbeLabel = "mortar-probe"
	JoinLabel  = "mortar-join"
)

// sealProbe seals req.Secret under the client's cluster secret, or
// refuses to send it in clear to another machine.
func (c *Client) sealProbe(ctx context.Context, req ProbeRequest) (ProbeRequest, error) {
	switch {
	case req.Secret == "" || c.scheme == "https":
		return req, nil
	case c.secret != "":
		req.SealedSecret, req.Secret = proof.Seal(c.secret, ProbeLabel, []byte(req.Secret)), ""
		return req, nil
	}
	host, _ := SplitHostPortDefault(c.addr)
	if !IsLocalHost(ctx, host, "") {
		return req, fmt.Errorf("%s is another machine, and the probed node's secret must not cross the network in clear: "+
			"give the cluster's secret too (--secret-file, or %s), which seals it, or run the probe on a node of the cluster", c.addr, SecretFileEnv)
	}
	return req, nil
}
