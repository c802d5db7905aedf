package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/tlsconf"
	"github.com/mortarfs/mortar/volume"
)

// Client talks to a node's management API.
type Client struct {
	addr string // host:port
	http *http.Client
	via  string // set on requests between nodes: the sender's id
	// scheme is "http", or "https" for a TLS cluster.
	scheme string
	// secret is the cluster secret every request is signed with, if set.
	secret string
}

// WithSecret returns a copy of c that signs every request with the
// cluster secret s (SignRequest; the secret itself is never sent), as a
// node without TLS requires of callers on other machines (see
// SecretFileEnv).
func (c *Client) WithSecret(s string) *Client {
	cc := *c
	cc.secret = s
	return &cc
}

// NewClient returns a client for the node at addr ("host" or "host:port";
// the port defaults to DefaultPort).
func NewClient(addr string) *Client {
	host, port := SplitHostPortDefault(addr)
	return &Client{addr: net.JoinHostPort(host, port), http: &http.Client{Transport: Transport(nil)}}
}

// NewTLSClient returns a client for the node at addr (of a TLS cluster)
// that speaks HTTPS with id's certificate.
func NewTLSClient(addr string, id *tlsconf.Identity) *Client {
	cl := NewClient(addr)
	cl.http = &http.Client{Transport: Transport(id.ClientConfig())}
	cl.scheme = "https"
	return cl
}

// NodeClient returns the client one node uses for another's API at addr:
// over h, naming the sender via (so the request is never forwarded
// again), with HTTPS when tls, otherwise signing with secret (which is
// not used with tls).
func NodeClient(addr string, h *http.Client, via string, tls bool, secret string) *Client {
	if tls {
		return &Client{addr: addr, http: h, via: via, scheme: "https"}
	}
	return &Client{addr: addr, http: h, via: via, scheme: "http", secret: secret}
}

// Transport is an HTTP transport to nodes' APIs, with TLS when c is set.
func Transport(c *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy:               nil, // the API is never reached through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSClientConfig:     c,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
}

// WithHTTP returns a copy of c that sends its requests over h.
func (c *Client) WithHTTP(h *http.Client) *Client {
	cc := *c
	cc.http = h
	return &cc
}

// Addr returns the host:port the client talks to.
func (c *Client) Addr() string { return c.addr }

// Node describes the node that answers.
func (c *Client) Node(ctx context.Context) (NodeInfo, error) {
	var out NodeInfo
	err := c.Do(ctx, http.MethodGet, "/v1/node", nil, &out)
	return out, err
}

// Spec returns the spec of a started volume, for mounting it.
func (c *Client) Spec(ctx context.Context, name string) (volume.Spec, error) {
	var out volume.Spec
	err := c.Do(ctx, http.MethodGet, VolPath(name, "spec"), nil, &out)
	return out, err
}

// CreateVolume creates a volume.
func (c *Client) CreateVolume(ctx context.Context, req CreateVolumeRequest) (VolumeInfo, error) {
	var out VolumeInfo
	err := c.Do(ctx, http.MethodPost, "/v1/volumes", req, &out)
	return out, err
}

// Start starts a volume; with force, it restarts the offline bricks of a
// volume that is already started.
func (c *Client) Start(ctx context.Context, name string, force bool) (VolumeInfo, error) {
	var out VolumeInfo
	err := c.Do(ctx, http.MethodPost, VolPath(name, "start"), StartRequest{Force: force}, &out)
	return out, err
}

// Stop stops a volume.
func (c *Client) Stop(ctx context.Context, name string) (VolumeInfo, error) {
	var out VolumeInfo
	err := c.Do(ctx, http.MethodPost, VolPath(name, "stop"), nil, &out)
	return out, err
}

// Delete deletes a stopped volume; the data on its bricks stays.
func (c *Client) Delete(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, VolPath(name, ""), nil, nil)
}

// Info describes a volume.
func (c *Client) Info(ctx context.Context, name string) (VolumeInfo, error) {
	var out VolumeInfo
	err := c.Do(ctx, http.MethodGet, VolPath(name, ""), nil, &out)
	return out, err
}

// Status reports the live state of a volume's bricks.
func (c *Client) Status(ctx context.Context, name string) (VolumeStatus, error) {
	var out VolumeStatus
	err := c.Do(ctx, http.MethodGet, VolPath(name, "status"), nil, &out)
	return out, err
}

// List describes every volume.
func (c *Client) List(ctx context.Context) ([]VolumeInfo, error) {
	var out []VolumeInfo
	err := c.Do(ctx, http.MethodGet, "/v1/volumes", nil, &out)
	return out, err
}

// Set sets volume option key to value.
func (c *Client) Set(ctx context.Context, name, key, value string) (VolumeInfo, error) {
	var out VolumeInfo
	p := VolPath(name, "options") + "/" + url.PathEscape(key)
	err := c.Do(ctx, http.MethodPut, p, SetOptionRequest{Value: value}, &out)
	return out, err
}

// Reset sets option key of volume name back to its default; every
// option, if key is empty.
func (c *Client) Reset(ctx context.Context, name, key string) (VolumeInfo, error) {
	var out VolumeInfo
	p := VolPath(name, "options")
	if key != "" {
		p += "/" + url.PathEscape(key)
	}
	err := c.Do(ctx, http.MethodDelete, p, nil, &out)
	return out, err
}

// Heal makes the heal daemon of a replicated or dispersed volume heal what the heal
// indexes list now, rather than at its next scan.
func (c *Client) Heal(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodPost, VolPath(name, "heal"), HealRequest{}, nil)
}

// HealFull starts a full heal of a replicated or dispersed volume in the
// background (a crawl of every set that repairs every difference) and returns
// its state; HealInfo shows its progress.
func (c *Client) HealFull(ctx context.Context, name string) (FullHeal, error) {
	var out FullHeal
	err := c.Do(ctx, http.MethodPost, VolPath(name, "heal"), HealRequest{Full: true}, &out)
	return out, err
}

// HealInfo lists what each brick of a replicated or dispersed volume has to heal, with
// the heal daemon's progress.
func (c *Client) HealInfo(ctx context.Context, name string) (HealInfo, error) {
	var out HealInfo
	err := c.Do(ctx, http.MethodGet, VolPath(name, "heal"), nil, &out)
	return out, err
}

// SplitBrain lists the files of a replicated or dispersed volume in
// split-brain.
func (c *Client) SplitBrain(ctx context.Context, name string) (SplitBrainInfo, error) {
	var out SplitBrainInfo
	err := c.Do(ctx, http.MethodGet, VolPath(name, "heal/split-brain"), nil, &out)
	return out, err
}

// ResolveSplitBrain resolves split-brains as req says and returns the
// paths it healed.
func (c *Client) ResolveSplitBrain(ctx context.Context, name string, req SplitBrainRequest) ([]string, error) {
	var out SplitBrainResolved
	err := c.Do(ctx, http.MethodPost, VolPath(name, "heal/split-brain"), req, &out)
	return out.Paths, err
}

// ResetBrick makes brick ("host:/path"), whose directory is new and
// empty, the volume's brick again and starts rebuilding it from the other
// bricks of its replica or disperse set.
func (c *Client) ResetBrick(ctx context.Context, name, brick string) (VolumeInfo, error) {
	var out VolumeInfo
	err := c.Do(ctx, http.MethodPost, VolPath(name, "reset-brick"), ResetBrickRequest{Brick: brick}, &out)
	return out, err
}

// VolPath is the API path of volume name's endpoint sub ("" for the
// volume itself): /v1/volumes/NAME/SUB.
func VolPath(name, sub string) string {
	p := "/v1/volumes/" + url.PathEscape(name)
	if sub != "" {
		p += "/" + sub
	}
	return p
}

// Do sends one request with body (if not nil) as JSON and decodes the
// answer into out (if not nil).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	scheme := c.scheme
	if scheme == "" {
		scheme = "http"
	}
	req, err := http.NewRequestWithContext(ctx, method, scheme+"://"+c.addr+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.via != "" {
		req.Header.Set(ViaHeader, c.via)
	}
	if c.secret != "" {
		SignRequest(req, data, c.secret)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(err)
	}
	defer resp.Body.Close()
	data, err = io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("mortar server %s: reading answer: %w", c.addr, err)
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("mortar server %s: bad answer to %s %s: %w", c.addr, method, path, err)
	}
	return nil
}

// transportError explains a failure to reach the server.
func (c *Client) transportError(err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("cannot reach mortar server at %s: %w (is `mortar server` running there?)", c.addr, syscall.ECONNREFUSED)
	}
	if c.scheme != "https" && (errors.Is(err, syscall.ECONNRESET) || strings.Contains(err.Error(), "malformed HTTP response")) {
		return fmt.Errorf("cannot reach mortar server at %s: %w (if its cluster is secured with TLS, give --tls-dir and --tls-name, or MORTAR_TLS_DIR and MORTAR_TLS_NAME)", c.addr, err)
	}
	return fmt.Errorf("cannot reach mortar server at %s: %w", c.addr, err)
}

// decodeError rebuilds the server's error, with its marker.
func decodeError(code int, data []byte) error {
	var eb ErrorBody
	if err := json.Unmarshal(data, &eb); err != nil || eb.Error == "" {
		return fmt.Errorf("mortar server answered %d %s: %s", code, http.StatusText(code), bytes.TrimSpace(data))
	}
	if m := markerByName(eb.Kind); m != nil {
		return &markedError{msg: eb.Error, marker: m}
	}
	return errors.New(eb.Error)
}
