package crypt

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// KeySize is the size of a volume key.
const KeySize = 32

// EnvKey is the environment variable that gives clients the volume key, in
// hex, when no key file is named.
const EnvKey = "MORTAR_VOLUME_KEY"

// NewKey returns a new random volume key.
func NewKey() []byte {
	k := make([]byte, KeySize)
	rand.Read(k)
	return k
}

// EncodeKey returns key in hex, the form key files and EnvKey hold.
func EncodeKey(key []byte) string { return hex.EncodeToString(key) }

// ParseKey reads a volume key: 64 hex digits (surrounding white space is
// ignored) or exactly 32 raw bytes.
func ParseKey(data []byte) ([]byte, error) {
	if t := bytes.TrimSpace(data); len(t) == 2*KeySize {
		if k, err := hex.DecodeString(string(t)); err == nil {
			return k, nil
		}
	}
	if len(data) == KeySize {
		return bytes.Clone(data), nil
	}
	return nil, fmt.Errorf("a volume key is %d hex digits or %d raw bytes (got %d bytes)", 2*KeySize, KeySize, len(data))
}

// LoadKeyFile reads the volume key in the file path (see ParseKey).
func LoadKeyFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("volume key: %w", err)
	}
	k, err := ParseKey(data)
	if err != nil {
		return nil, fmt.Errorf("volume key file %s: %w", path, err)
	}
	return k, nil
}

// ResolveKey returns the volume key a client was given: key if set, else
// the content of keyFile if named, else EnvKey's value if set, else nil.
func ResolveKey(key []byte, keyFile string) ([]byte, error) {
	switch {
	case len(key) > 0:
		if len(key) != KeySize {
			return nil, fmt.Errorf("a volume key is %d bytes (got %d)", KeySize, len(key))
		}
		return key, nil
	case keyFile != "":
		return LoadKeyFile(keyFile)
	}
	v, ok := os.LookupEnv(EnvKey)
	if !ok || v == "" {
		return nil, nil
	}
	k, err := ParseKey([]byte(v))
	if err != nil || len(bytes.TrimSpace([]byte(v))) != 2*KeySize {
		return nil, fmt.Errorf("%s: want %d hex digits", EnvKey, 2*KeySize)
	}
	return k, nil
}
