// Package proof lets two ends that share a secret show that they hold it
// without sending it, for mortar without TLS:
//
//   - MAC and Valid: a message authentication code, HMAC-SHA256 keyed with
//     the secret, over a label that says what the message is for and the
//     message's parts, each length-prefixed (so that no two lists of parts
//     give the same bytes). A MAC says nothing of the secret, and is good
//     only for the message it was made for.
//   - Replays: refuses a message stamped too far from this machine's clock,
//     or seen before within that window, so that a recorded message cannot
//     be sent again. A challenge (a Nonce sent by the checking end, which
//     the other answers with a MAC over it) needs no cache and no clock.
//   - Seal and Open: hand a secret over under a key derived from another
//     secret both ends hold (HKDF-SHA256, then AES-256-GCM).
//
// mgmt signs its API requests (a timestamp and a nonce, with Replays) and
// challenges Raft connections with the cluster secret, and seals that
// secret for a node that joins; brick servers challenge their clients
// (layer/protocol) for the volume's secret.
//
// What it does not give: secrecy or integrity of what follows a proof (API
// bodies and answers, Raft entries, file data travel as they are), nor a
// defence against an active attacker in the middle, who can relay a
// challenge to a real client, or take over a connection once it is open.
// TLS gives those.
package proof

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// Size is the length of a MAC.
const Size = sha256.Size

// MAC returns HMAC-SHA256, keyed with secret, of label and parts.
func MAC(secret, label string, parts ...string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	var n [4]byte
	for _, p := range append([]string{label}, parts...) {
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		m.Write(n[:])
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// Valid reports, in constant time, whether mac is MAC(secret, label,
// parts...).
func Valid(mac []byte, secret, label string, parts ...string) bool {
	return hmac.Equal(mac, MAC(secret, label, parts...))
}

// Nonce returns n random bytes.
func Nonce(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return b
}

// Seal encrypts plain for whoever holds secret: AES-256-GCM under a key
// derived from secret and label, with a random nonce, which the result
// begins with.
func Seal(secret, label string, plain []byte) []byte {
	aead := newAEAD(secret, label)
	nonce := Nonce(aead.NonceSize())
	return aead.Seal(nonce, nonce, plain, nil)
}

// ErrOpen is Open's error: sealed was not sealed with secret and label,
// or was altered.
var ErrOpen = errors.New("cannot open: sealed with another secret, or altered")

// Open decrypts what Seal sealed with the same secret and label.
func Open(secret, label string, sealed []byte) ([]byte, error) {
	aead := newAEAD(secret, label)
	n := aead.NonceSize()
	if len(sealed) < n {
		return nil, ErrOpen
	}
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], nil)
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

// newAEAD returns AES-256-GCM keyed with HKDF-SHA256(secret, label).
func newAEAD(secret, label string) cipher.AEAD {
	key, err := hkdf.Key(sha256.New, []byte(secret), nil, label, 32)
	if err != nil {
		panic(err) // only for a key longer than HKDF can make
	}
	block, _ := aes.NewCipher(key) // a 32-byte key is valid
	aead, _ := cipher.NewGCM(block)
	return aead
}
