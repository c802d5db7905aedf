package mgmt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mortarfs/mortar/internal/proof"
)

// Without TLS, a request that proves the cluster secret (from another
// node, or from the CLI or a mount holding a copy) is signed with it, and
// never carries it:
//
//	Authorization: Mortar-HMAC ts=UNIX,nonce=HEX,sig=HEX
//
// sig is proof.MAC(secret, "mortar-http", method, host, path?query, ts,
// nonce, hex SHA-256 of the body): it binds the request to the node it was
// sent to (its Host) and to its body. A node accepts it only if the
// signature holds, the Host names this node (its advertised address, or
// its API port at one of this machine's addresses), ts is within
// signWindow of the node's clock, and the nonce was not accepted before
// (proof.Replays): a recorded request cannot be sent again, to this node
// or another. The answers are not signed: an attacker in the middle can
// still alter them, or the unsigned headers of a request, and read both.
const (
	authHeader  = "Authorization"
	signScheme  = "Mortar-HMAC "
	plainScheme = "Mortar " // the secret itself, as nodes before signatures sent it
	signLabel   = "mortar-http"
	// signWindow is how far a request's time may be from the node's clock.
	signWindow = 5 * time.Minute
	// maxSigned bounds the nonces a node remembers, per 2 × signWindow.
	maxSigned = 1 << 17
)

// SignRequest signs r, whose body is body, with the cluster secret, for
// the node that r.Host names. Mortar's own clients do this; it is exported
// for programs that build their own requests.
func SignRequest(r *http.Request, body []byte, secret string) {
	signAt(r, body, secret, time.Now())
}

// signAt signs r as made at t.
func signAt(r *http.Request, body []byte, secret string, t time.Time) {
	ts := strconv.FormatInt(t.Unix(), 10)
	nonce := hex.EncodeToString(proof.Nonce(16))
	sig := proof.MAC(secret, signLabel, signedParts(r, ts, nonce, body)...)
	r.Header.Set(authHeader, fmt.Sprintf("%sts=%s,nonce=%s,sig=%x", signScheme, ts, nonce, sig))
}

// signedParts lists what a signature covers.
func signedParts(r *http.Request, ts, nonce string, body []byte) []string {
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	sum := sha256.Sum256(body)
	return []string{r.Method, host, r.URL.RequestURI(), ts, nonce, hex.EncodeToString(sum[:])}
}

// signature is a parsed Mortar-HMAC header.
type signature struct {
	ts, nonce string
	raw, sig  []byte // the nonce's bytes, the signature's
}

// parseSignature parses the value of a Mortar-HMAC header.
func parseSignature(v string) (signature, error) {
	var s signature
	for _, kv := range strings.Split(strings.TrimPrefix(v, signScheme), ",") {
		k, val, _ := strings.Cut(kv, "=")
		switch k {
		case "ts":
			s.ts = val
		case "nonce":
			s.nonce = val
			s.raw, _ = hex.DecodeString(val)
		case "sig":
			s.sig, _ = hex.DecodeString(val)
		}
	}
	if s.ts == "" || len(s.raw) < 16 || len(s.raw) > 64 || len(s.sig) != proof.Size {
		return s, errors.New("malformed Mortar-HMAC signature (want ts=UNIX,nonce=HEX,sig=HEX)")
	}
	return s, nil
}

// checkSignature reports whether r claims the cluster secret (carries
// Authorization: Mortar…), and if so why the claim fails, if it does. It
// reads r's body and puts it back.
func (n *Node) checkSignature(r *http.Request) (claimed bool, err error) {
	v := r.Header.Get(authHeader)
	switch {
	case strings.HasPrefix(v, plainScheme):
		return true, errors.New("the request carries the cluster secret itself, as mortar did before it signed requests: " +
			"this node takes only signed requests (Mortar-HMAC); upgrade the caller (the secret just crossed the network in clear)")
	case !strings.HasPrefix(v, signScheme):
		return false, nil
	}
	s, err := parseSignature(v)
	if err != nil {
		return true, err
	}
	return true, n.verify(r, s)
}

// verify checks signature s of r.
func (n *Node) verify(r *http.Request, s signature) error {
	unix, err := strconv.ParseInt(s.ts, 10, 64)
	if err != nil {
		return fmt.Errorf("malformed Mortar-HMAC time %q", s.ts)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		return fmt.Errorf("reading the body: %w", err)
	}
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	if len(body) > maxRequestBody {
		return fmt.Errorf("the body is over %d bytes", maxRequestBody)
	}
	if !proof.Valid(s.sig, n.secret(), signLabel, signedParts(r, s.ts, s.nonce, body)...) {
		return errors.New("the request's signature is not of this cluster's secret (or the request was altered)")
	}
	if !n.ownHost(r.Context(), r.Host) {
		return fmt.Errorf("the request was signed for %s, which is not this node (%s)", r.Host, n.addr)
	}
	if err := n.signed.Check(time.Unix(unix, 0), string(s.raw)); err != nil {
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
	return isLocalHost(ctx, host, advHost)
}
