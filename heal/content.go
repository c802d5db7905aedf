package heal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// Chunk is the unit of incremental data heal: a sink gets only the chunks
// of this size that differ from the source.
const Chunk = 1 << 20

var chunkPool = sync.Pool{New: func() any { b := make([]byte, Chunk); return &b }}

// healContent copies what is in the inode at path, not in its names, from
// p's source to sink s: data, user xattrs, then mode, owner and times
// (last: writing the data changes the times). Each step first checks that
// the path still names the inode the plan is for, on both sides: a path
// that names another inode since the copies were looked at (a client
// renamed a file over it) fails with layer.ErrReplaced, nothing is written
// there, the marks stay, and a later pass heals what the path names then.
func (h *Healer) healContent(ctx context.Context, si, s int, path string, p *plan) error {
	want := p.attr()
	src, dst := h.sets[si][p.src].Layer, h.sets[si][s].Layer
	if h.data != nil && want.IsReg() && want.Linkto == "" {
		n, err := h.data.HealData(ctx, si, path, want.Gfid, p.good, replicate.Bit(s), want.Size)
		h.bytes.Add(n)
		if err != nil {
			return err
		}
		h.log.Debug("data rebuilt", "replica", h.sets[si][s].Name, "path", path)
	} else if p.data >= 0 && !h.arbs[si].Has(s) {
		n, err := copyData(ctx, h.sets[si][p.data].Layer, dst, path, want.Gfid, want.Size)
		h.bytes.Add(n)
		if err != nil {
			return err
		}
		h.log.Debug("data healed", "replica", h.sets[si][s].Name, "path", path, "bytes", n)
	}
	if want.Linkto != "" {
		return nil // a distribute pointer: made whole by Mknod
	}
	if err := sameAt(ctx, want.Gfid, path, src, dst); err != nil {
		return err
	}
	if want.IsReg() || want.IsDir() {
		if err := copyXattrs(ctx, src, dst, path); err != nil {
			return err
		}
	}
	return copyAttrs(ctx, dst, path, want)
}

// sameAt fails with layer.ErrReplaced unless path names inode g on every one of
// layers.
func sameAt(ctx context.Context, g layer.Gfid, path string, layers ...layer.Layer) error {
	for _, l := range layers {
		a, err := l.Lookup(ctx, path)
		if err != nil {
			return err
		}
		if a.Gfid != g {
			return layer.ErrReplaced
		}
	}
	return nil
}

// copyData makes the regular file at path on dst hold the first size
// bytes of it on src, both inode g: it compares them chunk by chunk,
// writes the chunks that differ, then truncates. It returns how many
// bytes it wrote.
func copyData(ctx context.Context, src, dst layer.Layer, path string, g layer.Gfid, size uint64) (written uint64, err error) {
	sf, err := layer.OpenAs(ctx, src, path, syscall.O_RDONLY|syscall.O_NOATIME, g)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, sf.Release(ctx)) }()
	df, err := layer.OpenAs(ctx, dst, path, syscall.O_RDWR|syscall.O_NOATIME, g)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, df.Release(ctx)) }()
	sp, dp := chunkPool.Get().(*[]byte), chunkPool.Get().(*[]byte)
	defer chunkPool.Put(sp)
	defer chunkPool.Put(dp)
	for off := uint64(0); off < size; off += Chunk {
		n := int(min(Chunk, size-off))
		sb, db := (*sp)[:n], (*dp)[:n]
		got, err := sf.Read(ctx, sb, int64(off))
		if err != nil {
			return written, err
		}
		if got < n {
			// The source shrank since it was looked at: its ctime moved
			// too, so its marks stay and the next scan heals again.
			size, n, sb = off+uint64(got), got, sb[:got]
			db = db[:got]
		}
		m, err := df.Read(ctx, db, int64(off))
		if err != nil {
			return written, err
		}
		clear(db[m:]) // past the sink's end: what truncating would give
		if bytes.Equal(sb, db) {
			continue
		}
		if _, err := df.Write(ctx, sb, int64(off)); err != nil {
			return written, err
		}
		written += uint64(len(sb))
	}
	// Truncating the sink to a size the source no longer has would cut
	// off what a client wrote to both since the look (a copy behind
	// takes a file's writes too): the heal stops, its marks stay, and the
	// next scan looks again.
	if sa, err := sf.Getattr(ctx); err != nil || sa.Size != size {
		return written, errors.Join(err, errChanged)
	}
	a, err := df.Getattr(ctx)
	if err == nil && a.Size != size {
		_, err = df.Setattr(ctx, layer.SetattrIn{Valid: layer.SetSize, Size: size})
	}
	return written, err
}

// errChanged is what a heal step returns when the source changed since
// the copies were looked at: nothing is wrong, the marks stay and the
// next scan heals again.
var errChanged = fmt.Errorf("the source changed while healing: %w", syscall.ESTALE)

// copyXattrs makes the user xattrs of path on dst those on src.
func copyXattrs(ctx context.Context, src, dst layer.Layer, path string) error {
	want, err := src.Listxattr(ctx, path)
	if err != nil {
		return err
	}
	have, err := dst.Listxattr(ctx, path)
	if err != nil {
		return err
	}
	for _, name := range want {
		v, err := src.Getxattr(ctx, path, name)
		if errors.Is(err, syscall.ENODATA) {
			continue // removed meanwhile
		}
		if err != nil {
			return err
		}
		if cur, err := dst.Getxattr(ctx, path, name); err == nil && bytes.Equal(cur, v) {
			continue
		}
		if err := dst.Setxattr(ctx, path, name, v, 0); err != nil {
			return err
		}
	}
	for _, name := range have {
		if slices.Contains(want, name) {
			continue
		}
		if err := dst.Removexattr(ctx, path, name); err != nil && !errors.Is(err, syscall.ENODATA) {
			return err
		}
	}
	return nil
}

// copyAttrs gives path on dst the mode, owner and times of want.
func copyAttrs(ctx context.Context, dst layer.Layer, path string, want layer.Attr) error {
	have, err := dst.Lookup(ctx, path)
	if err != nil {
		return err
	}
	if have.Gfid != want.Gfid {
		return layer.ErrReplaced
	}
	symlink := want.Mode&syscall.S_IFMT == syscall.S_IFLNK
	var in layer.SetattrIn
	if have.Uid != want.Uid || have.Gid != want.Gid {
		// chown clears set-user-ID bits: the mode is set again after it.
		in.Valid |= layer.SetUid | layer.SetGid
		in.Uid, in.Gid = want.Uid, want.Gid
	}
	if !symlink && (have.Mode&07777 != want.Mode&07777 || in.Valid != 0) {
		in.Valid |= layer.SetMode
		in.Mode = want.Mode & 07777
	}
	if have.Mtime != want.Mtime { // atimes drift with every read: not compared
		in.Valid |= layer.SetAtime | layer.SetMtime
		in.Atime, in.Mtime = want.Atime, want.Mtime
	}
	if in.Valid == 0 {
		return nil
	}
	_, err = dst.Setattr(ctx, path, in)
	return err
}
