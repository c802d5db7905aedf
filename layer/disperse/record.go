package disperse

import (
	"encoding/binary"
	"errors"
)

// A fragment file is a sequence of records, one per stripe: record s, at
// offset s·Record, is a HeaderSize header followed by the brick's Chunk of
// stripe s. The header says which write made the chunk (Version), where it
// belongs (stripe, brick index, geometry) and holds a CRC-32C of every
// Block of the chunk, so a chunk is checked block by block and a small read
// needs only its blocks and the header. A record of the file's last stripe
// is cut after the last Block that holds file data (the rest of the chunk
// is zeros, and so is its parity), so small files stay small; a stripe
// never written (a hole) reads as an all-zero header: version 0, zeros.
//
// The data starts HeaderSize into the record, so that chunks stay aligned
// for direct I/O on the brick.
const (
	HeaderSize = 4096
	Record     = HeaderSize + Chunk
	Block      = 4096
	blocks     = Chunk / Block
)

var magic = [8]byte{'M', 'O', 'R', 'T', 'A', 'R', 'F', '1'}

// headerLen is the encoded part of a header: magic, version, stripe,
// geometry and index, block sums, and the header's own checksum.
const headerLen = 8 + 8 + 8 + 4 + 4*blocks + 4

// Header describes one chunk of a fragment.
type Header struct {
	// Version identifies the write that made the chunk; all chunks of a
	// stripe written together share it. 0 is a hole (never written).
	Version uint64
	Stripe  int64
	K, M    uint8
	Index   uint8 // the brick's position in the set
	Sums    [blocks]uint32
}

var errBadHeader = errors.New("disperse: bad fragment header")

// put encodes h into b (HeaderSize bytes, zeroed past the header).
func (h *Header) put(b []byte) {
	clear(b[:HeaderSize])
	copy(b, magic[:])
	binary.LittleEndian.PutUint64(b[8:], h.Version)
	binary.LittleEndian.PutUint64(b[16:], uint64(h.Stripe))
	b[24], b[25], b[26] = h.K, h.M, h.Index
	for i, s := range h.Sums {
		binary.LittleEndian.PutUint32(b[28+4*i:], s)
	}
	binary.LittleEndian.PutUint32(b[headerLen-4:], Sum(b[:headerLen-4]))
}

// parseHeader decodes a header; an all-zero one is a hole (Version 0).
func parseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < headerLen {
		return h, errBadHeader
	}
	if allZero(b[:headerLen]) {
		return h, nil
	}
	if [8]byte(b[:8]) != magic || binary.LittleEndian.Uint32(b[headerLen-4:]) != Sum(b[:headerLen-4]) {
		return h, errBadHeader
	}
	h.Version = binary.LittleEndian.Uint64(b[8:])
	h.Stripe = int64(binary.LittleEndian.Uint64(b[16:]))
	h.K, h.M, h.Index = b[24], b[25], b[26]
	for i := range h.Sums {
		h.Sums[i] = binary.LittleEndian.Uint32(b[28+4*i:])
	}
	return h, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// sumBlocks fills h.Sums from a whole chunk.
func (h *Header) sumBlocks(chunk []byte) {
	for i := range h.Sums {
		h.Sums[i] = Sum(chunk[i*Block : (i+1)*Block])
	}
}

// check verifies the blocks [from, to) of chunk (a whole chunk buffer)
// against the header; a hole's chunk is zeros whatever the brick holds.
func (h *Header) check(chunk []byte, from, to int) bool {
	if h.Version == 0 {
		clear(chunk[from*Block : to*Block])
		return true
	}
	return h.checkBlocks(chunk[from*Block:to*Block], from)
}

// checkBlocks verifies blocks, the chunk's blocks from block from on
// (whole blocks), against the header's sums.
func (h *Header) checkBlocks(blocks []byte, from int) bool {
	for i := 0; (i+1)*Block <= len(blocks); i++ {
		if Sum(blocks[i*Block:(i+1)*Block]) != h.Sums[from+i] {
			return false
		}
	}
	return true
}

// recordLen is how much of record s a fragment holds for a file of size
// bytes: whole records, except the file's last stripe, cut after the last
// Block holding file data.
func (g Geometry) recordLen(s, size int64) int64 {
	ss := g.Stripe()
	last := (size - 1) / ss
	if size <= 0 || s < last {
		return Record
	}
	used := min(size-last*ss, Chunk) // chunk 0 is the fullest
	return HeaderSize + roundUp(used, Block)
}

// FragmentLen is the length of every fragment of a file of size bytes.
func (g Geometry) FragmentLen(size int64) int64 {
	if size <= 0 {
		return 0
	}
	last := (size - 1) / g.Stripe()
	return last*Record + g.recordLen(last, size)
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }
