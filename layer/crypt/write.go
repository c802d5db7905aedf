package crypt

import (
	"context"
	"errors"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// Write encrypts p into the blocks it touches. A block p covers only in
// part is read, decrypted, changed and encrypted again under the inode's
// lock; an O_APPEND file writes at the size the bricks have now.
func (f *file) Write(ctx context.Context, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if off < 0 {
		return 0, syscall.EINVAL
	}
	in := f.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if f.append {
		a, err := f.File.Getattr(ctx)
		if err != nil {
			return 0, err
		}
		in.size = int64(plainSize(a.Size))
		if in.pending {
			in.size = 0
		}
		off = in.size
	}
	k, err := f.key(ctx)
	if err != nil {
		return 0, err
	}
	if err := f.write(ctx, k, p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}

// span is the new plaintext of block b.
type span struct {
	b     int64
	plain []byte
}

// write writes p at off with key k (mu held).
func (f *file) write(ctx context.Context, k *fileKey, p []byte, off int64) error {
	size, end := f.in.size, off+int64(len(p))
	first, last := off/BlockSize, (end-1)/BlockSize
	if first > (size+BlockSize-1)/BlockSize {
		// The blocks between the old end and first stay holes.
		var err error
		if k, err = f.setSparse(ctx, k); err != nil {
			return err
		}
	}
	var blocks []span
	if t := size / BlockSize; size%BlockSize != 0 && t < first {
		// The old last block is last no more: zeros fill it up.
		old, err := f.readBlock(ctx, k, t)
		if err != nil {
			return err
		}
		blocks = append(blocks, span{t, pad(old, BlockSize)})
	}
	for b := first; b <= last; b++ {
		start := b * BlockSize
		ws, we := max(off, start)-start, min(end, start+BlockSize)-start
		data := p[start+ws-off : start+we-off]
		have := min(max(size-start, 0), BlockSize) // plaintext there now
		if ws == 0 && we >= have {
			blocks = append(blocks, span{b, data}) // all new: encrypt from p
			continue
		}
		var old []byte
		if have > 0 {
			var err error
			if old, err = f.readBlock(ctx, k, b); err != nil {
				return err
			}
		}
		buf := pad(old, we)
		copy(buf[ws:we], data)
		blocks = append(blocks, span{b, buf})
	}
	if err := f.writeBlocks(ctx, k, blocks); err != nil {
		return err
	}
	lastBlock := blocks[len(blocks)-1]
	f.in.size = max(size, end, lastBlock.b*BlockSize+int64(len(lastBlock.plain)))
	return nil
}

// writeBlocks encrypts blocks (in increasing order) and writes each run of
// consecutive ones with one write, a pending header first.
func (f *file) writeBlocks(ctx context.Context, k *fileKey, blocks []span) error {
	for i := 0; i < len(blocks); {
		j := i + 1
		for j < len(blocks) && blocks[j].b == blocks[j-1].b+1 {
			j++
		}
		run := blocks[i:j]
		i = j
		lead := 0
		if f.in.pending {
			if run[0].b != 0 {
				if err := f.writeHeader(ctx, k); err != nil {
					return err
				}
			} else {
				lead = HeaderSize // the header goes with block 0
			}
		}
		if err := f.writeRun(ctx, k, run, lead); err != nil {
			return err
		}
		if lead > 0 {
			f.in.pending = false
		}
	}
	return nil
}

// pipeBlocks is how many blocks go in one write of a long run: the runs
// of a big write are encrypted and sent in pieces at once, so that the
// bricks write one piece while the next is encrypted.
const pipeBlocks = 4

// writeRun encrypts and writes a run of consecutive blocks, preceded by
// the header when lead is HeaderSize. A run longer than pipeBlocks is cut
// into pieces written concurrently.
func (f *file) writeRun(ctx context.Context, k *fileKey, run []span, lead int) error {
	if len(run) <= pipeBlocks {
		return f.writePiece(ctx, k, run, lead)
	}
	var wg sync.WaitGroup
	errs := make([]error, (len(run)+pipeBlocks-1)/pipeBlocks)
	for i := 0; i < len(run); i += pipeBlocks {
		piece, l := run[i:min(i+pipeBlocks, len(run))], 0
		if i == 0 {
			l = lead
		}
		wg.Go(func() { errs[i/pipeBlocks] = f.writePiece(ctx, k, piece, l) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writePiece encrypts blocks (every one full but the last) into one
// buffer, after lead bytes of header, and writes it.
func (f *file) writePiece(ctx context.Context, k *fileKey, run []span, lead int) error {
	size := lead
	for _, s := range run {
		size += len(s.plain) + Overhead
	}
	out := wire.GetBuf(size)
	defer wire.PutBuf(out)
	copy(out, k.header[:lead])
	for i, s := range run {
		pos := lead + i*StoredBlock
		sealBlock(k, out[pos:pos+len(s.plain)+Overhead], s.b, s.plain)
	}
	return f.writeAll(ctx, out, blockOff(run[0].b)-int64(lead))
}

// pad returns b with zeros appended up to n bytes (b is never shortened),
// in b's own buffer when it has room.
func pad(b []byte, n int64) []byte {
	n = max(n, int64(len(b)))
	if int64(cap(b)) < n {
		nb := make([]byte, n, max(n, BlockSize))
		copy(nb, b)
		return nb
	}
	l := len(b)
	b = b[:n]
	clear(b[l:])
	return b
}

// Setattr with a size re-encrypts the block that becomes the last one.
func (f *file) Setattr(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	if in.Valid&layer.SetSize == 0 {
		a, err := f.File.Setattr(ctx, in)
		return plainAttr(a), err
	}
	f.in.mu.Lock()
	defer f.in.mu.Unlock()
	a, err := f.truncate(ctx, in)
	return plainAttr(a), err
}

// withSize is in with the size set to n (on the bricks).
func withSize(in layer.SetattrIn, n int64) layer.SetattrIn {
	in.Valid |= layer.SetSize
	in.Size = uint64(n)
	return in
}

// truncate changes the size to in.Size and the other attributes in in
// (mu held). It starts from the size the bricks have now.
func (f *file) truncate(ctx context.Context, in layer.SetattrIn) (layer.Attr, error) {
	cur, err := f.File.Getattr(ctx)
	if err != nil {
		return cur, err
	}
	size, n := int64(plainSize(cur.Size)), int64(in.Size)
	if f.in.pending {
		size = 0
	}
	f.in.size = size
	rest := in
	rest.Valid &^= layer.SetSize
	switch {
	case n == 0: // a file without a header; the next write makes a new key
		a, err := f.File.Setattr(ctx, withSize(rest, 0))
		if err == nil {
			f.in.ks.Store(&keyState{})
			f.in.pending, f.in.size = false, 0
		}
		return a, err
	case n == size:
		return f.File.Setattr(ctx, withSize(rest, int64(cur.Size)))
	}
	k, err := f.key(ctx)
	if err != nil {
		return layer.Attr{}, err
	}
	var a layer.Attr
	if n < size {
		a, err = f.shrink(ctx, k, size, n, rest)
	} else {
		a, err = f.grow(ctx, k, size, n, rest)
	}
	if err == nil {
		f.in.size = n
	}
	return a, err
}

// shrink cuts the file from size to n.
func (f *file) shrink(ctx context.Context, k *fileKey, size, n int64, rest layer.SetattrIn) (layer.Attr, error) {
	b := (n - 1) / BlockSize
	keep := n - b*BlockSize
	if keep == min(size-b*BlockSize, BlockSize) { // block b stays whole
		return f.File.Setattr(ctx, withSize(rest, cipherSize(n)))
	}
	old, err := f.readBlock(ctx, k, b)
	if err != nil {
		return layer.Attr{}, err
	}
	plain := pad(old, keep)[:keep]
	// Cut the file before block b, then write block b anew: a crash in
	// between leaves a shorter file, not a corrupt one.
	a, err := f.File.Setattr(ctx, withSize(layer.SetattrIn{}, blockOff(b)))
	if err != nil {
		return a, err
	}
	if err := f.writeBlocks(ctx, k, []span{{b, plain}}); err != nil {
		return layer.Attr{}, err
	}
	if rest.Valid != 0 {
		return f.File.Setattr(ctx, rest)
	}
	a.Size = uint64(cipherSize(n))
	return a, nil
}

// grow extends the file from size to n: the old last block is filled up
// (with zeros) as far as n reaches, the blocks after it are holes.
func (f *file) grow(ctx context.Context, k *fileKey, size, n int64, rest layer.SetattrIn) (layer.Attr, error) {
	t := size / BlockSize
	var tail []byte
	if size%BlockSize != 0 {
		old, err := f.readBlock(ctx, k, t)
		if err != nil {
			return layer.Attr{}, err
		}
		tail = pad(old, min(n-t*BlockSize, BlockSize))
	}
	var err error
	if n > (size+BlockSize-1)/BlockSize*BlockSize {
		if k, err = f.setSparse(ctx, k); err != nil {
			return layer.Attr{}, err
		}
	}
	if err := f.writeHeader(ctx, k); err != nil {
		return layer.Attr{}, err
	}
	if tail != nil {
		if err := f.writeBlocks(ctx, k, []span{{t, tail}}); err != nil {
			return layer.Attr{}, err
		}
	}
	return f.File.Setattr(ctx, withSize(rest, cipherSize(n)))
}
