package mgmt

import (
	"context"
	"net/http"
	"net/url"
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
	err = c.do(ctx, http.MethodPost, "/v1/peers", req, &out)
	return out, err
}

// Detach removes the node at host, which must serve no brick, from the
// cluster; it becomes a cluster of its own.
func (c *Client) Detach(ctx context.Context, host string) error {
	return c.do(ctx, http.MethodDelete, "/v1/peers/"+url.PathEscape(host), nil, nil)
}

// Peers lists the nodes of the cluster, the answering one included, with
// whether each answers it now and which one leads.
func (c *Client) Peers(ctx context.Context) ([]PeerInfo, error) {
	var out []PeerInfo
	err := c.do(ctx, http.MethodGet, "/v1/peers", nil, &out)
	return out, err
}

// ReplaceBrick replaces brick req.Source ("host:/path") of a replicated
// or dispersed volume by the new, empty directory req.Destination, which
// a full heal then fills.
func (c *Client) ReplaceBrick(ctx context.Context, name string, req ReplaceBrickRequest) (VolumeInfo, error) {
	var out VolumeInfo
	err := c.do(ctx, http.MethodPost, volPath(name, "replace-brick"), req, &out)
	return out, err
}

// AddBrick appends bricks (whole sets) to a volume. They get files once a
// rebalance has run (Rebalance).
func (c *Client) AddBrick(ctx context.Context, name string, req AddBrickRequest) (VolumeInfo, error) {
	var out VolumeInfo
	err := c.do(ctx, http.MethodPost, volPath(name, "add-brick"), req, &out)
	return out, err
}

// Rebalance starts or stops a volume's rebalance.
func (c *Client) Rebalance(ctx context.Context, name string, req RebalanceRequest) (RebalanceStatus, error) {
	var out RebalanceStatus
	err := c.do(ctx, http.MethodPost, volPath(name, "rebalance"), req, &out)
	return out, err
}

// RebalanceStatus reports a volume's rebalance (or remove-brick drain)
// and each node's progress.
func (c *Client) RebalanceStatus(ctx context.Context, name string) (RebalanceStatus, error) {
	var out RebalanceStatus
	err := c.do(ctx, http.MethodGet, volPath(name, "rebalance"), nil, &out)
	return out, err
}

// RemoveBrick starts draining bricks (whole sets), stops that, or
// commits their removal.
func (c *Client) RemoveBrick(ctx context.Context, name string, req RemoveBrickRequest) (RebalanceStatus, error) {
	var out RebalanceStatus
	err := c.do(ctx, http.MethodPost, volPath(name, "remove-brick"), req, &out)
	return out, err
}
