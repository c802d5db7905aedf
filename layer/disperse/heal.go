package disperse

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// DataHealer rebuilds fragments for the healer (heal.Options.Data): each
// of a sink's records is recomputed from the good bricks' records of the
// write K of them share, and written only where the sink's differs (other
// version, failing checksums, missing).
type DataHealer struct {
	// Quiet is how long a file marked Dirty must have gone unchanged on
	// every brick before its stripes are checked (NewDataHealer sets
	// DefaultQuiet): a file being written is marked too, and a check
	// racing a write could undo part of it.
	Quiet time.Duration

	sets  [][]replicate.Child
	g     Geometry
	codec *Codec
}

// NewDataHealer returns the data healer of a volume's disperse sets, all
// of redundancy m.
func NewDataHealer(sets [][]replicate.Child, m int) (*DataHealer, error) {
	if len(sets) == 0 {
		return nil, fmt.Errorf("disperse: no sets to heal")
	}
	g, _, err := NewGeometry(len(sets[0]), m)
	if err != nil {
		return nil, err
	}
	for _, s := range sets {
		if len(s) != g.N() {
			return nil, fmt.Errorf("disperse: sets of %d and %d bricks", g.N(), len(s))
		}
	}
	codec, err := NewCodec(g)
	if err != nil {
		return nil, err
	}
	return &DataHealer{Quiet: DefaultQuiet, sets: sets, g: g, codec: codec}, nil
}

// DefaultQuiet is DataHealer.Quiet's default.
const DefaultQuiet = 30 * time.Second

// HealData implements heal.DataHealer.
func (h *DataHealer) HealData(ctx context.Context, set int, path string, gfid layer.Gfid, good, sinks replicate.Mask, size uint64) (wrote uint64, err error) {
	if set < 0 || set >= len(h.sets) {
		return 0, fmt.Errorf("disperse: no set %d", set)
	}
	children := h.sets[set]
	verify := sinks == 0
	var resize replicate.Mask // bricks whose recorded size must be set
	if !verify {
		resize = sinks
	} else {
		// Check every brick reachable; rewrite whatever differs.
		for i, c := range children {
			a, err := c.Layer.Lookup(ctx, path)
			if err != nil || a.Gfid != gfid {
				continue // not this file there: nothing of it to check
			}
			if since := time.Since(time.Unix(a.Ctime.Sec, int64(a.Ctime.Nsec))); since < h.Quiet {
				return 0, fmt.Errorf("%s changed %v ago: %w", path, since.Round(time.Millisecond), layer.ErrHealBusy)
			}
			sinks |= replicate.Bit(i)
			if a.Size != size {
				resize |= replicate.Bit(i)
			}
		}
	}
	files := make([]layer.File, h.g.N())
	defer func() {
		for _, f := range files {
			if f != nil {
				err = errors.Join(err, f.Release(context.WithoutCancel(ctx)))
			}
		}
	}()
	// Every fragment reachable is read: a brick behind on the file may
	// hold the current chunks of most stripes, and per stripe only the
	// write that K bricks share counts (see current). Each is opened for
	// writing too: a torn stripe is written again on every brick
	// (healStripe; a good brick opened read-only answered EBADF, and the
	// file was never healed: sim disperse2+1-full seed 32).
	reach, named, err := h.open(ctx, children, files, path, gfid, sinks)
	if err != nil {
		return 0, err
	}
	if reach.Count() < h.g.K {
		return 0, fmt.Errorf("%s: %d fragments reachable, %d needed: %w", path, reach.Count(), h.g.K, layer.ErrNoHealSource)
	}
	isize := int64(size)
	stripes := (isize + h.g.Stripe() - 1) / h.g.Stripe()
	var lost []int64
	lk := fileLock{files: files, reach: reach, owner: lockOwners.Add(1), k: h.g.K}
	for s := int64(0); s < stripes; s++ {
		var written replicate.Mask
		err := lk.do(ctx, func() (err error) {
			written, err = h.healStripe(ctx, files, reach, named, sinks, s, isize, verify)
			return err
		})
		resize |= written
		wrote += uint64(written.Count()) * Record
		if verify && errors.Is(err, ErrTooFew) {
			lost = append(lost, s) // reported below; the other stripes are still repaired
			continue
		}
		if err != nil {
			return wrote, fmt.Errorf("%s stripe %d: %w", path, s, err)
		}
	}
	if len(lost) > 0 {
		return wrote, fmt.Errorf("%s: stripes %v cannot be rebuilt (fewer than K bricks agree and a data chunk is missing): %w",
			path, lost, layer.ErrNoHealSource)
	}
	return wrote, lk.do(ctx, func() error { return h.resize(ctx, path, files, good, resize, size) })
}

// open opens the fragment of inode gfid on every brick it can (into
// files): reach is where it did, named where path names it (opened for
// writing). A brick that holds the fragment under another name, or
// parked by its id (a rename it missed, or the heal of its stale name),
// serves it by its id, to be read: its chunks count towards the write K
// bricks share (sim disperse2+1x2-dirs seed 60: without it, the sink's
// stale chunk and the one current chunk reachable by name were taken for
// a torn stripe). Failing to open a sink's fragment is an error.
func (h *DataHealer) open(ctx context.Context, children []replicate.Child, files []layer.File, path string, gfid layer.Gfid, sinks replicate.Mask) (reach, named replicate.Mask, err error) {
	for i, c := range children {
		f, err := layer.OpenAs(ctx, c.Layer, path, syscall.O_RDWR|syscall.O_NOATIME, gfid)
		if err == nil {
			named |= replicate.Bit(i)
		} else if !sinks.Has(i) && (errors.Is(err, syscall.ENOENT) || errors.Is(err, layer.ErrReplaced)) {
			f, err = layer.OpenAs(ctx, c.Layer, layer.IDPath(gfid), syscall.O_RDONLY|syscall.O_NOATIME, gfid)
		}
		if err != nil {
			if sinks.Has(i) {
				return reach, named, fmt.Errorf("open the fragment on %s: %w", c.Name, err)
			}
			continue
		}
		files[i], reach = f, reach|replicate.Bit(i)
	}
	return reach, named, nil
}

// all is the mask of every brick of a set.
func (h *DataHealer) all() replicate.Mask { return replicate.Mask(1)<<uint(h.g.N()) - 1 }

// resize sets the size of the bricks in m, unless a client changed it
// since the healer looked (the good bricks say another): then the file is
// healed again at the next scan.
func (h *DataHealer) resize(ctx context.Context, path string, files []layer.File, good, m replicate.Mask, size uint64) error {
	for i, f := range files {
		if !good.Has(i) || m.Has(i) || f == nil {
			continue
		}
		if a, err := f.Getattr(ctx); err == nil && a.Size != size {
			return fmt.Errorf("%s: size changed from %d to %d while healing: %w", path, size, a.Size, syscall.ESTALE)
		}
		break
	}
	t := layer.WithTxn(ctx, layer.Txn{SetSize: true, Size: size})
	for i, f := range files {
		if m.Has(i) {
			if _, err := f.Setattr(t, layer.SetattrIn{Valid: layer.SetSize, Size: uint64(h.g.FragmentLen(int64(size)))}); err != nil {
				return err
			}
		}
	}
	return nil
}

// fileLock is the writers' lock (lock.go) as the healer takes it: around
// each stripe it rebuilds, so that no client writes the stripe meanwhile
// and a writer waits for one stripe at most.
type fileLock struct {
	files []layer.File
	reach replicate.Mask
	owner uint64
	k     int
}

func (l fileLock) do(ctx context.Context, fn func() error) error {
	got, err := lockFiles(ctx, l.files, l.reach, l.owner, l.k)
	if err != nil {
		return fmt.Errorf("write lock: %w", err)
	}
	defer unlockFiles(l.files, got, l.owner)
	return fn()
}

// healStripe rewrites the sinks' records of stripe s that differ from what
// the current write (the one K bricks share) says they should be (with
// verify, every brick is a sink: none is known to be behind).
//
// Only the bricks in named (open for writing by the file's name) are
// written; one read by its id gets its records once its name is healed.
// A stripe no write of which K bricks share is torn, and written anew
// from the data chunks as they are, only when every brick is in named:
// with one out of reach, or readable only by its id, the current chunks
// may be there, and the stripe waits for a later pass (ErrTooFew).
func (h *DataHealer) healStripe(ctx context.Context, files []layer.File, reach, named, sinks replicate.Mask, s, size int64, verify bool) (written replicate.Mask, err error) {
	sc, _ := fetchStripe(ctx, h.g, files, reach, s)
	mine := stripeChunks{headers: append([]Header(nil), sc.headers...), chunks: append([][]byte(nil), sc.chunks...)}
	// A write cut short is undone where the bricks kept what it replaced
	// (undo.go): the stripe is then as it was before it, whole.
	// Only the bricks not known to be behind count (every brick with
	// verify: none is known behind).
	trusted := reach
	if !verify {
		trusted &^= sinks
	}
	sinks |= revert(ctx, h.g, files, reach, trusted, &sc, s)
	// A torn stripe takes every brick's data chunk as it is, a blamed
	// brick's too: its marks may be for another change than this stripe
	// (one mask covers the inode), and with every brick up nothing else
	// is left to go by (reads, which may have bricks down, are stricter).
	// But not a sink's hole (no record): a sink is behind on the file,
	// or new to it (its fragment made by the heal of its name), and its
	// hole says only that it missed the writes (sim disperse2+1 seed 45:
	// the stripe rebuilt from a new fragment's zeros and the one current
	// chunk reachable).
	trusted = reach
	for i := range files {
		if !verify && sinks.Has(i) && sc.chunks[i] != nil && sc.headers[i].Version == 0 {
			trusted &^= replicate.Bit(i)
		}
	}
	if named != h.all() {
		trusted = 0
	}
	version, torn, err := settle(h.g, &sc, trusted)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", err, layer.ErrNoHealSource)
	}
	if torn {
		// A write cut short: the data chunks stand, every brick gets
		// them again with parity made anew, under a new version.
		version, sinks = newVersion(), reach
	}
	if err := h.codec.Rebuild(sc.chunks, false); err != nil {
		return 0, err
	}
	rl := h.g.recordLen(s, size)
	for i := range files {
		if !(sinks & named).Has(i) {
			continue
		}
		if mine.chunks[i] != nil && mine.headers[i].Version == version {
			continue // checked against its sums by fetchStripe: already right
		}
		rec := make([]byte, rl)
		if version != 0 {
			hd := Header{Version: version, Stripe: s, K: uint8(h.g.K), M: uint8(h.g.M), Index: uint8(i)}
			hd.sumBlocks(sc.chunks[i])
			hd.put(rec)
			copy(rec[HeaderSize:], sc.chunks[i])
		}
		if _, err := files[i].Write(ctx, rec, s*Record); err != nil {
			return written, err
		}
		written |= replicate.Bit(i)
	}
	return written, nil
}
