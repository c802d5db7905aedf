package memfs

import "syscall"

// Modes of fallocate(2) that files accept; others fail with EOPNOTSUPP.
const (
	fallocKeepSize  = 0x01 // FALLOC_FL_KEEP_SIZE
	fallocPunchHole = 0x02 // FALLOC_FL_PUNCH_HOLE
	fallocZeroRange = 0x10 // FALLOC_FL_ZERO_RANGE
)

// data is the content of a regular file: its size and the blocks that
// were written or allocated. A block that is absent is a hole and reads
// as zeros, so a file written at 5 GiB holds one block, as on a disk.
type data struct {
	size   int64
	blocks map[int64][]byte
	used   *int64 // the FS's count of blocks held
}

// block returns block i, making it (zeroed) if the file has none there.
func (d *data) block(i int64) []byte {
	b, ok := d.blocks[i]
	if !ok {
		if d.blocks == nil {
			d.blocks = map[int64][]byte{}
		}
		b = make([]byte, blockSize)
		d.blocks[i] = b
		*d.used++
	}
	return b
}

// eachBlock calls fn for every block that bytes [off, off+n) touch, with
// the block's index, the range's offset in it, where the part starts in
// the range and its length.
func eachBlock(off int64, n int, fn func(i int64, in, at, m int)) {
	for at := 0; at < n; {
		pos := off + int64(at)
		in := int(pos % blockSize)
		m := min(n-at, blockSize-in)
		fn(pos/blockSize, in, at, m)
		at += m
	}
}

// readAt copies the bytes at off into p, up to the end of the file, and
// returns how many it copied.
func (d *data) readAt(p []byte, off int64) int {
	if off >= d.size {
		return 0
	}
	n := int(min(int64(len(p)), d.size-off))
	eachBlock(off, n, func(i int64, in, at, m int) {
		if b, ok := d.blocks[i]; ok {
			copy(p[at:at+m], b[in:])
		} else {
			clear(p[at : at+m])
		}
	})
	return n
}

// writeAt writes p at off, growing the file if it ends past it.
func (d *data) writeAt(p []byte, off int64) {
	eachBlock(off, len(p), func(i int64, in, at, m int) {
		copy(d.block(i)[in:], p[at:at+m])
	})
	d.size = max(d.size, off+int64(len(p)))
}

// truncate sets the size. What lay past a smaller size is zeroed, so
// that growing the file again shows zeros, as POSIX wants.
func (d *data) truncate(size int64) {
	if size < d.size {
		d.punch(size, d.size-size)
	}
	d.size = size
}

// punch zeroes bytes [off, off+n), dropping the blocks wholly inside.
// It goes over the blocks held, not over the range, which may be huge.
func (d *data) punch(off, n int64) {
	end := off + n
	for i, b := range d.blocks {
		lo, hi := i*blockSize, (i+1)*blockSize
		switch {
		case hi <= off || lo >= end:
		case lo >= off && hi <= end:
			delete(d.blocks, i) // allowed while ranging over the map
			*d.used--
		default:
			clear(b[max(off, lo)-lo : min(end, hi)-lo])
		}
	}
}

// blocksIn is how many blocks bytes [off, off+n) touch.
func blocksIn(off, n int64) int64 { return (off+n+blockSize-1)/blockSize - off/blockSize }

// allocate gives bytes [off, off+n) blocks.
func (d *data) allocate(off, n int64) {
	for i := off / blockSize; i < (off+n+blockSize-1)/blockSize; i++ {
		d.block(i)
	}
}

// fallocate does fallocate(2) of mode on [off, off+n), already checked
// to be a valid range.
func (d *data) fallocate(mode uint32, off, n int64) error {
	switch mode &^ fallocKeepSize {
	case 0:
	case fallocPunchHole:
		if mode&fallocKeepSize == 0 {
			return syscall.EOPNOTSUPP // as Linux: a punch never changes the size
		}
		d.punch(off, n)
		return nil
	case fallocZeroRange:
		d.punch(off, n)
	default:
		return syscall.EOPNOTSUPP
	}
	d.allocate(off, n)
	if mode&fallocKeepSize == 0 {
		d.size = max(d.size, off+n)
	}
	return nil
}

// free gives back the blocks of a file that is gone.
func (d *data) free() {
	*d.used -= int64(len(d.blocks))
	d.blocks = nil
}
