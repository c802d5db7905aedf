package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const testSecret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// A signed request verifies with its secret, its host and its body, and
// with nothing else: another secret, another host, another body, another
// method fail; its time is the one it was signed at.
func TestSignatureBindsSecretHostAndBody(t *testing.T) {
	body := []byte(`{"name":"v"}`)
	at := time.Unix(1_700_000_000, 0)
	req := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "http://node1:7420/v1/volumes", bytes.NewReader(body))
		SignAt(r, body, testSecret, at)
		return r
	}
	r := req()
	claimed, s, err := Signed(r)
	if !claimed || err != nil || !s.Valid(r, body, testSecret) {
		t.Fatalf("a signed request: claimed %v, %v, valid %v", claimed, err, s.Valid(r, body, testSecret))
	}
	if got, err := s.Time(); err != nil || !got.Equal(at) {
		t.Errorf("signature time %v, %v; want %v", got, err, at)
	}
	if len(s.Nonce()) != 16 {
		t.Errorf("nonce of %d bytes, want 16", len(s.Nonce()))
	}
	if s.Valid(r, body, strings.Repeat("ab", 32)) {
		t.Error("valid with another secret")
	}
	if s.Valid(r, []byte(`{"name":"w"}`), testSecret) {
		t.Error("valid with another body")
	}
	other := req()
	other.Host = "node2:7420"
	if s.Valid(other, body, testSecret) {
		t.Error("valid for another host")
	}
	other = req()
	other.Method = http.MethodDelete
	if s.Valid(other, body, testSecret) {
		t.Error("valid for another method")
	}
	if strings.Contains(r.Header.Get("Authorization"), testSecret) {
		t.Error("the header carries the secret")
	}
}

// A request without the header claims nothing; one with the secret in
// clear (as clients before signatures sent it) or a malformed signature
// claims it and is refused.
func TestSignedRefusesWhatIsNotASignature(t *testing.T) {
	for _, c := range []struct {
		header  string
		claimed bool
		fails   bool
	}{
		{"", false, false},
		{"Bearer x", false, false},
		{"Mortar " + testSecret, true, true},
		{"Mortar-HMAC ts=1,nonce=00,sig=00", true, true},
		{"Mortar-HMAC garbage", true, true},
	} {
		r := httptest.NewRequest(http.MethodGet, "http://node1:7420/v1/node", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		claimed, _, err := Signed(r)
		if claimed != c.claimed || (err != nil) != c.fails {
			t.Errorf("%q: claimed %v, err %v; want claimed %v, failing %v", c.header, claimed, err, c.claimed, c.fails)
		}
	}
}

// A marker error survives the round trip through the wire: the server's
// ErrorBody names it, the client's error matches it again.
func TestMarkersCrossTheWire(t *testing.T) {
	for _, m := range markers {
		sent := Errorf(m.err, "volume %s: %w", "gv0", fs.ErrNotExist)
		if !errors.Is(sent, m.err) || !errors.Is(sent, fs.ErrNotExist) {
			t.Fatalf("%s: Errorf's error matches %v and its cause %v", m.name, errors.Is(sent, m.err), errors.Is(sent, fs.ErrNotExist))
		}
		data, _ := json.Marshal(ErrorBody{Error: sent.Error(), Kind: MarkerName(sent)})
		got := decodeError(http.StatusBadRequest, data)
		if !errors.Is(got, m.err) || got.Error() != sent.Error() {
			t.Errorf("%s: after the wire %q (matches: %v)", m.name, got, errors.Is(got, m.err))
		}
	}
	if got := decodeError(http.StatusBadGateway, []byte("<html>proxy</html>")); !strings.Contains(got.Error(), "502") {
		t.Errorf("an answer that is not an ErrorBody: %v", got)
	}
}

// A cluster secret is 64 hexadecimal digits.
func TestCheckSecret(t *testing.T) {
	if err := CheckSecret(testSecret); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "00", testSecret + "00", strings.Repeat("zz", 32)} {
		if err := CheckSecret(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckSecret(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
