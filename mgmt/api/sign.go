package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
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
// five minutes of the node's clock (mgmt's signWindow), and the nonce was not accepted before
// (proof.Replays): a recorded request cannot be sent again, to this node
// or another. The answers are not signed: an attacker in the middle can
// still alter them, or the unsigned headers of a request, and read both.
const (
	authHeader  = "Authorization"
	signScheme  = "Mortar-HMAC "
	plainScheme = "Mortar " // the secret itself, as nodes before signatures sent it
	signLabel   = "mortar-http"
)

// SignRequest signs r, whose body is body, with the cluster secret, for
// the node that r.Host names. Mortar's own clients do this; it is exported
// for programs that build their own requests.
func SignRequest(r *http.Request, body []byte, secret string) {
	SignAt(r, body, secret, time.Now())
}

// SignAt signs r as made at t.
func SignAt(r *http.Request, body []byte, secret string, t time.Time) {
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

// Signature is a parsed Mortar-HMAC header.
type Signature struct {
	ts, nonce string
	raw, sig  []byte // the nonce's bytes, the signature's
}

// Signed reports whether r claims the cluster secret (carries
// Authorization: Mortar…), and if so its signature, or why the claim
// fails.
func Signed(r *http.Request) (claimed bool, s Signature, err error) {
	v := r.Header.Get(authHeader)
	switch {
	case strings.HasPrefix(v, plainScheme):
		return true, s, errors.New("the request carries the cluster secret itself, as mortar did before it signed requests: " +
			"this node takes only signed requests (Mortar-HMAC); upgrade the caller (the secret just crossed the network in clear)")
	case !strings.HasPrefix(v, signScheme):
		return false, s, nil
	}
	s, err = parseSignature(v)
	return true, s, err
}

// parseSignature parses the value of a Mortar-HMAC header.
func parseSignature(v string) (Signature, error) {
	var s Signature
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

// Time is when the request says it was signed.
func (s Signature) Time() (time.Time, error) {
	unix, err := strconv.ParseInt(s.ts, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("malformed Mortar-HMAC time %q", s.ts)
	}
	return time.Unix(unix, 0), nil
}

// Nonce is the signature's nonce, as bytes in a string.
func (s Signature) Nonce() string { return string(s.raw) }

// Valid reports whether s signs r, whose body is body, with secret.
func (s Signature) Valid(r *http.Request, body []byte, secret string) bool {
	return proof.Valid(s.sig, secret, signLabel, signedParts(r, s.ts, s.nonce, body)...)
}

// SecretFileEnv names the environment variable that points the CLI at a
// cluster secret file.
const SecretFileEnv = "MORTAR_SECRET_FILE"

// ReadSecretFile reads a cluster secret from path (a node's DATA/secret,
// or a copy of it).
func ReadSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cluster secret: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if err := CheckSecret(s); err != nil {
		return "", fmt.Errorf("cluster secret %s: %w", path, err)
	}
	return s, nil
}

// CheckSecret refuses what is not 32 bytes in hex.
func CheckSecret(s string) error {
	if b, err := hex.DecodeString(s); err != nil || len(b) != 32 {
		return Errorf(ErrInvalid, "a cluster secret is 64 hexadecimal digits")
	}
	return nil
}
