package mgmt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
)

const (
	// signWindow is how far a request's time may be from the node's clock.
	signWindow = 5 * time.Minute
	// maxSigned bounds the nonces a node remembers, per 2 × signWindow.
	maxSigned = 1 << 17
)

// checkSignature reports whether r claims the cluster secret (carries
// Authorization: Mortar…), and if so why the claim fails, if it does. It
// reads r's body and puts it back.
func (n *Node) checkSignature(r *http.Request) (claimed bool, err error) {
	claimed, s, err := api.Signed(r)
	if !claimed || err != nil {
		return claimed, err
	}
	return true, n.verify(r, s)
}

// verify checks signature s of r.
func (n *Node) verify(r *http.Request, s api.Signature) error {
	at, err := s.Time()
	if err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		return fmt.Errorf("reading the body: %w", err)
	}
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	if len(body) > maxRequestBody {
		return fmt.Errorf("the body is over %d bytes", maxRequestBody)
	}
	if !s.Valid(r, body, n.secret()) {
		return errors.New("the request's signature is not of this cluster's secret (or the request was altered)")
	}
	if !n.ownHost(r.Context(), r.Host) {
		return fmt.Errorf("the request was signed for %s, which is not this node (%s)", r.Host, n.addr)
	}
	if err := n.signed.Check(at, s.Nonce()); err != nil {
		return fmt.Errorf("signed request refused: %w", err)
	}
	return nil
}

// ownHost reports whether hostport names this node: its advertised
// address, or its API port at one of this machine's addresses.
func (n *Node) ownHost(ctx context.Context, hostport string) bool {
	if hostport == n.addr {
		return true
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port != strconv.Itoa(portOf(n.ln.Addr().String())) {
		return false
	}
	advHost, _, _ := net.SplitHostPort(n.addr)
	return api.IsLocalHost(ctx, host, advHost)
}
