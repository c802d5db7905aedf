package crypt

import (
	"context"
	"crypto/rand"
	"errors"
	"runtime"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// file is an open regular file of the layer; the embedded File is the
// child's.
type file struct {
	layer.File
	l      *Layer
	in     *inode
	path   string // as opened, for logs
	append bool
}

func (f *file) Getattr(ctx context.Context) (layer.Attr, error) {
	a, err := f.File.Getattr(ctx)
	return plainAttr(a), err
}

// Fallocate is refused: allocated blocks would have to be written
// encrypted, and their zeros would read as tampering.
func (f *file) Fallocate(ctx context.Context, mode uint32, off, length int64) error {
	return syscall.EOPNOTSUPP
}

func (f *file) Release(ctx context.Context) error {
	f.l.unref(f.in)
	return f.File.Release(ctx)
}

// Read decrypts the blocks that hold [off, off+len(p)). A block that fails
// authentication is read once more, with the header read again, in case a
// writer elsewhere was half way through it or the file was rewritten
// under a new key; then it is EIO.
func (f *file) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if off < 0 {
		return 0, syscall.EINVAL
	}
	f.in.mu.RLock()
	defer f.in.mu.RUnlock()
	n, b, err := f.read(ctx, p, off)
	if errors.Is(err, errBlock) || errors.Is(err, errHeader) {
		f.reloadKey(ctx)
		n, b, err = f.read(ctx, p, off)
	}
	if err != nil {
		return 0, f.failed("read", b, err)
	}
	return n, nil
}

// read reads once; on error it returns the block at fault.
func (f *file) read(ctx context.Context, p []byte, off int64) (int, int64, error) {
	ks := f.in.ks.Load()
	if ks.err != nil {
		return 0, -1, ks.err
	}
	first, last := off/BlockSize, (off+int64(len(p))-1)/BlockSize
	buf := wire.GetBuf(int(last-first+1) * StoredBlock)
	defer wire.PutBuf(buf)
	m, err := f.File.Read(ctx, buf, blockOff(first))
	if err != nil || m == 0 {
		return 0, first, err
	}
	if ks.k == nil {
		return 0, -1, errHeader // data, but no header known
	}
	nb := (m + StoredBlock - 1) / StoredBlock
	if m-(nb-1)*StoredBlock <= Overhead {
		return 0, first + int64(nb) - 1, errBlock // a stub of a block
	}
	end := min(off+int64(len(p)), (first+int64(nb)-1)*BlockSize+int64(m-(nb-1)*StoredBlock-Overhead))
	if end <= off {
		return 0, -1, nil // p starts past the end of the file
	}
	bad := inParallel(nb, func(i int) error {
		b := first + int64(i)
		blk := buf[i*StoredBlock : min((i+1)*StoredBlock, m)]
		start := b * BlockSize
		lo, hi := max(off, start), min(end, start+int64(len(blk)-Overhead))
		switch {
		case lo >= hi:
			return nil
		case hi-lo == int64(len(blk)-Overhead):
			// The whole block goes to p: decrypt it there.
			return openInto(ks.k, p[lo-off:hi-off], b, blk)
		}
		pt, err := openBlock(ks.k, b, blk)
		if err == nil {
			copy(p[lo-off:hi-off], pt[lo-start:hi-start])
		}
		return err
	})
	if bad >= 0 {
		return 0, first + int64(bad), errBlock
	}
	return int(end - off), -1, nil
}

// parallelBlocks is the number of blocks from which a read or write is
// encrypted on several cores: the client has the cores, and the time of
// one core's AES-GCM would add to every large request's latency.
const parallelBlocks = 4

// inParallel calls fn for 0..n-1, on up to GOMAXPROCS goroutines when n
// is large enough, and returns the first i whose fn failed, or -1.
func inParallel(n int, fn func(i int) error) int {
	workers := min(runtime.GOMAXPROCS(0), n/parallelBlocks)
	if workers <= 1 {
		for i := range n {
			if fn(i) != nil {
				return i
			}
		}
		return -1
	}
	bad := make([]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		bad[w] = -1
		run := func() {
			for i := lo; i < hi; i++ {
				if fn(i) != nil {
					bad[w] = i
					return
				}
			}
		}
		if w == workers-1 {
			run() // this goroutine takes the last share
			continue
		}
		wg.Go(run)
	}
	wg.Wait()
	for _, i := range bad {
		if i >= 0 {
			return i
		}
	}
	return -1
}

// openInto decrypts the stored block blk (block b) into dst, which has
// exactly the room of its plaintext. In a sparse file an all-zero block is
// a hole: zeros.
func openInto(k *fileKey, dst []byte, b int64, blk []byte) error {
	if k.sparse() && allZero(blk) {
		clear(dst)
		return nil
	}
	var ad [8]byte
	if _, err := k.aead.Open(dst[:0], blk[:NonceSize], blk[NonceSize:], blockAD(&ad, b)); err != nil {
		return errBlock
	}
	return nil
}

// openBlock decrypts the stored block blk (block b) in place and returns
// its plaintext. In a sparse file an all-zero block is a hole: zeros.
func openBlock(k *fileKey, b int64, blk []byte) ([]byte, error) {
	if len(blk) <= Overhead {
		return nil, errBlock
	}
	if k.sparse() && allZero(blk) {
		return blk[:len(blk)-Overhead], nil
	}
	var ad [8]byte
	pt, err := k.aead.Open(blk[NonceSize:NonceSize], blk[:NonceSize], blk[NonceSize:], blockAD(&ad, b))
	if err != nil {
		return nil, errBlock
	}
	return pt, nil
}

// reloadKey reads the header again (with mu held shared). A key this
// client made and has not written yet stays.
func (f *file) reloadKey(ctx context.Context) {
	if f.in.pending {
		return
	}
	hdr := make([]byte, HeaderSize)
	n, err := f.File.Read(ctx, hdr, 0)
	switch {
	case err != nil:
	case n == 0:
		f.in.ks.Store(&keyState{})
	default:
		f.in.ks.Store(f.l.openHeader(hdr[:n], f.in.gfid))
	}
}

// key returns the file's key (mu held), making one for a file without a
// header; the header is then written with the first data.
func (f *file) key(ctx context.Context) (*fileKey, error) {
	ks := f.in.ks.Load()
	if ks.k == nil && ks.err == nil && !f.in.pending && f.in.size > 0 {
		f.reloadKey(ctx) // data appeared since the open (another client)
		ks = f.in.ks.Load()
	}
	if ks.err != nil {
		return nil, f.failed("write", -1, ks.err)
	}
	if ks.k != nil {
		return ks.k, nil
	}
	k, err := f.l.keys.newFileKey(f.in.gfid)
	if err != nil {
		return nil, err
	}
	f.in.ks.Store(&keyState{k: k})
	f.in.pending = true
	return k, nil
}

// setSparse marks the file as one that may have holes (mu held), before
// the write that makes them: an all-zero block of a file not so marked is
// tampering.
func (f *file) setSparse(ctx context.Context, k *fileKey) (*fileKey, error) {
	if k.sparse() {
		return k, nil
	}
	k2, err := f.l.keys.withFlags(k, flagSparse, f.in.gfid)
	if err != nil {
		return nil, err
	}
	if !f.in.pending {
		if err := f.writeAll(ctx, k2.header[:], 0); err != nil {
			return nil, err
		}
	}
	f.in.ks.Store(&keyState{k: k2})
	return k2, nil
}

// writeHeader writes a pending header (mu held).
func (f *file) writeHeader(ctx context.Context, k *fileKey) error {
	if !f.in.pending {
		return nil
	}
	if err := f.writeAll(ctx, k.header[:], 0); err != nil {
		return err
	}
	f.in.pending = false
	return nil
}

func (f *file) writeAll(ctx context.Context, p []byte, off int64) error {
	n, err := f.File.Write(ctx, p, off)
	if err == nil && n != len(p) {
		err = syscall.EIO
	}
	return err
}

// readBlock returns the plaintext of block b as stored now (nil when the
// file ends before it), in a buffer of its own with room for a full block.
func (f *file) readBlock(ctx context.Context, k *fileKey, b int64) ([]byte, error) {
	buf := make([]byte, StoredBlock)
	n, err := f.File.Read(ctx, buf, blockOff(b))
	if err != nil || n == 0 {
		return nil, err
	}
	pt, err := openBlock(k, b, buf[:n])
	if err != nil {
		return nil, f.failed("rewrite", b, err)
	}
	return pt, nil
}

// sealBlock encrypts plain as block b into dst (len(plain)+Overhead
// bytes), under a fresh random nonce.
func sealBlock(k *fileKey, dst []byte, b int64, plain []byte) {
	nonce := dst[:NonceSize]
	rand.Read(nonce)
	var ad [8]byte
	k.aead.Seal(dst[NonceSize:NonceSize], nonce, plain, blockAD(&ad, b))
}
