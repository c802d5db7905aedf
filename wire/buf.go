package wire

import (
	"sync"
	"unsafe"
)

// Align is the alignment of buffers from GetBuf, enough for O_DIRECT.
const Align = 4096

// Buffers of at least minPooled bytes come from size-class pools; smaller
// ones are plain allocations.
const minPooled = 64 << 10

var pools [8]sync.Pool // 64K, 128K, ... 8M

func class(n int) int {
	c, size := 0, minPooled
	for size < n {
		c++
		size <<= 1
	}
	return c
}

// GetBuf returns a 4096-byte-aligned buffer of length n. Give it back with
// PutBuf when done.
func GetBuf(n int) []byte {
	if n < minPooled {
		return alignedAlloc(n)
	}
	c := class(n)
	if c >= len(pools) {
		return alignedAlloc(n)
	}
	if p, ok := pools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return alignedAlloc(minPooled << c)[:n]
}

// PutBuf returns a buffer obtained from GetBuf.
func PutBuf(b []byte) {
	n := cap(b)
	if n < minPooled {
		return
	}
	c := class(n)
	if c >= len(pools) || minPooled<<c != n {
		return
	}
	b = b[:n]
	pools[c].Put(&b)
}

func alignedAlloc(n int) []byte {
	b := make([]byte, n+Align)
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (Align - 1))
	if off != 0 {
		off = Align - off
	}
	return b[off : off+n : off+n]
}
