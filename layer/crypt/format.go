package crypt

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// The on-disk format, version 1 (see the package documentation).
const (
	// BlockSize is the plaintext size of a block.
	BlockSize  = 64 << 10
	blockShift = 16
	// NonceSize and TagSize are AES-GCM's.
	NonceSize = 12
	TagSize   = 16
	// Overhead is what every stored block adds to its plaintext.
	Overhead = NonceSize + TagSize
	// StoredBlock is the stored size of a full block.
	StoredBlock = BlockSize + Overhead
	// HeaderSize is the size of the header at the start of a file.
	HeaderSize = 8 + checkSize + NonceSize + fileKeySize + TagSize

	version     = 1
	checkSize   = 8
	fileKeySize = 32 // a file's data key
	flagSparse  = 1  // the file may have holes: all-zero blocks read as zeros
)

var magic = [4]byte{'M', 'C', 'R', 'Y'}

// cryptError is an error of the layer that carries its errno.
type cryptError struct {
	msg   string
	errno syscall.Errno
}

func (e *cryptError) Error() string { return e.msg }
func (e *cryptError) Unwrap() error { return e.errno }

// The errors of the layer's checks.
var (
	errWrongKey error = &cryptError{"wrong volume key: not the one the file was written with", syscall.EACCES}
	errHeader   error = &cryptError{"file header is corrupt or was tampered with", syscall.EIO}
	errBlock    error = &cryptError{"block fails authentication: tampered with or corrupt", syscall.EIO}
)

// blockOff is where block b is stored.
func blockOff(b int64) int64 { return HeaderSize + b*StoredBlock }

// cipherSize is the size on the bricks of a file of plaintext size n with
// a header (n = 0 is a file without one).
func cipherSize(n int64) int64 {
	if n <= 0 {
		return 0
	}
	full, rest := n>>blockShift, n&(BlockSize-1)
	s := blockOff(full)
	if rest > 0 {
		s += rest + Overhead
	}
	return s
}

// plainSize is the plaintext size of a file of size c on the bricks. A
// last block too short to hold anything counts as nothing (reading it
// fails).
func plainSize(c uint64) uint64 {
	if c <= HeaderSize {
		return 0
	}
	d := c - HeaderSize
	full, rest := d/StoredBlock, d%StoredBlock
	n := full * BlockSize
	if rest > Overhead {
		n += rest - Overhead
	}
	return n
}

// plainAttr turns the attributes of a stored inode into what the layer
// reports: regular files get their plaintext size.
func plainAttr(a layer.Attr) layer.Attr {
	if a.IsReg() {
		a.Size = plainSize(a.Size)
	}
	return a
}

// blockAD is the associated data of block b: its index, so that a block
// moved to another place of the file fails to open. Blocks of another file
// fail anyway: every file has its own key.
func blockAD(ad *[8]byte, b int64) []byte {
	binary.BigEndian.PutUint64(ad[:], uint64(b))
	return ad[:]
}

// volumeKeys are what the layer derives from the volume key.
type volumeKeys struct {
	wrap  cipher.AEAD     // wraps file keys
	check [checkSize]byte // tells a wrong key from a tampered header
}

func deriveKeys(key []byte) (*volumeKeys, error) {
	if len(key) != KeySize {
		return nil, errors.New("crypt: a volume key is 32 bytes")
	}
	wk, err := hkdf.Key(sha256.New, key, nil, "mortar crypt v1 key wrap", 32)
	if err != nil {
		return nil, err
	}
	ck, err := hkdf.Key(sha256.New, key, nil, "mortar crypt v1 key check", checkSize)
	if err != nil {
		return nil, err
	}
	aead, err := newAEAD(wk)
	if err != nil {
		return nil, err
	}
	k := &volumeKeys{wrap: aead}
	copy(k.check[:], ck)
	return k, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	c, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(c)
}

// fileKey is the unwrapped header of one file.
type fileKey struct {
	aead   cipher.AEAD
	raw    [fileKeySize]byte
	flags  byte
	header [HeaderSize]byte // as stored
}

func (k *fileKey) sparse() bool { return k.flags&flagSparse != 0 }

// headerAD binds a header to its file (gfid) and to its clear fields.
func headerAD(h []byte, gfid layer.Gfid) []byte {
	ad := make([]byte, 0, 8+checkSize+len(gfid))
	ad = append(ad, h[:8+checkSize]...)
	return append(ad, gfid[:]...)
}

// newFileKey makes a random data key for the file gfid.
func (vk *volumeKeys) newFileKey(gfid layer.Gfid) (*fileKey, error) {
	var raw [fileKeySize]byte
	rand.Read(raw[:])
	return vk.seal(raw, 0, gfid)
}

// seal makes the header that holds raw with flags for gfid.
func (vk *volumeKeys) seal(raw [fileKeySize]byte, flags byte, gfid layer.Gfid) (*fileKey, error) {
	aead, err := newAEAD(raw[:])
	if err != nil {
		return nil, err
	}
	k := &fileKey{aead: aead, raw: raw, flags: flags}
	h := k.header[:]
	copy(h, magic[:])
	h[4], h[5], h[6], h[7] = version, blockShift, flags, 0
	copy(h[8:], vk.check[:])
	nonce := h[8+checkSize : 8+checkSize+NonceSize]
	rand.Read(nonce)
	vk.wrap.Seal(h[8+checkSize+NonceSize:8+checkSize+NonceSize], nonce, raw[:], headerAD(h, gfid))
	return k, nil
}

// withFlags returns k re-sealed with flags added.
func (vk *volumeKeys) withFlags(k *fileKey, flags byte, gfid layer.Gfid) (*fileKey, error) {
	return vk.seal(k.raw, k.flags|flags, gfid)
}

// open unwraps the header h of the file gfid.
func (vk *volumeKeys) open(h []byte, gfid layer.Gfid) (*fileKey, error) {
	if len(h) != HeaderSize || [4]byte(h[:4]) != magic || h[4] != version || h[5] != blockShift || h[7] != 0 {
		return nil, errHeader
	}
	if subtle.ConstantTimeCompare(h[8:8+checkSize], vk.check[:]) != 1 {
		return nil, errWrongKey
	}
	nonce := h[8+checkSize : 8+checkSize+NonceSize]
	raw, err := vk.wrap.Open(nil, nonce, h[8+checkSize+NonceSize:], headerAD(h, gfid))
	if err != nil || len(raw) != fileKeySize {
		return nil, errHeader
	}
	aead, err := newAEAD(raw)
	if err != nil {
		return nil, err
	}
	k := &fileKey{aead: aead, flags: h[6]}
	copy(k.raw[:], raw)
	copy(k.header[:], h)
	return k, nil
}

// zeros is a stored block of zeros, to compare holes with.
var zeros [StoredBlock]byte

// allZero reports whether b (at most a stored block) is all zero bytes.
func allZero(b []byte) bool { return bytes.Equal(b, zeros[:len(b)]) }
