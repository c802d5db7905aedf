package posix

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// Undo copies (layer.UndoReader). On a disperse brick, a write that
// carries the Dirty mark and asks for it (Txn.KeepUndo) — a disperse
// client's write under its writers' lock, which a dying client can leave
// on too few bricks — first keeps what it replaces, within the
// fragment's length, in memory (undoKeeper). What a file's writes kept
// goes with its Dirty mark (ClearPending) and with its last name. Writes
// of one inode hold its mark lock, which orders them with what they keep
// and its removal.
//
// In memory, not on disk: a copy on disk cost each small overwrite a read
// and a write more on every brick (random 4 KiB direct writes on 4 + 2 at
// half their rate, measured), and it is needed only for the writes a
// client was making when it died, which the brick outlives. A brick that
// restarts before the heal has lost them: the stripe then stays torn, as
// it did before undo copies. The keeper holds at most undoBudget bytes,
// forgetting the oldest first: the writes in flight when a client died
// are the newest.

// undoBudget bounds what a brick keeps in memory for undo copies: many
// times what the clients of a volume have in flight.
const undoBudget = 32 << 20

// undoKeeper keeps, per inode, the pieces its Dirty writes replaced, in
// the order they came (a later piece over an earlier one). Over budget,
// the oldest pieces go first: what a record's latest write replaced
// outlives what earlier ones did, and a copy that lost a piece it needs
// fails its checksums rather than put back a record half.
type undoKeeper struct {
	mu     sync.Mutex
	pieces map[layer.Gfid][]*undoPiece
	fifo   []*undoPiece // the pieces kept, oldest first (and some forgotten)
	live   int          // pieces kept
	bytes  int
	budget int // undoBudget if 0
}

// undoPiece is what one write replaced at off.
type undoPiece struct {
	gfid layer.Gfid
	off  int64
	data []byte // nil once forgotten
}

// keep adds what inode g held at off before a write.
func (k *undoKeeper) keep(g layer.Gfid, off int64, data []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pieces == nil {
		k.pieces = map[layer.Gfid][]*undoPiece{}
	}
	p := &undoPiece{gfid: g, off: off, data: data}
	k.pieces[g] = append(k.pieces[g], p)
	k.fifo = append(k.fifo, p)
	k.live++
	k.bytes += len(data)
	budget := cmp.Or(k.budget, undoBudget)
	for k.bytes > budget {
		old := k.fifo[0]
		k.fifo = k.fifo[1:]
		if old.data != nil {
			k.drop(old)
			ps := k.pieces[old.gfid]
			for len(ps) > 0 && ps[0].data == nil {
				ps = ps[1:]
			}
			if len(ps) == 0 {
				delete(k.pieces, old.gfid)
			} else {
				k.pieces[old.gfid] = ps
			}
		}
	}
}

// drop forgets piece p.
func (k *undoKeeper) drop(p *undoPiece) {
	k.bytes -= len(p.data)
	k.live--
	p.data = nil
}

// forget drops what was kept of g.
func (k *undoKeeper) forget(g layer.Gfid) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pieces[g] {
		if p.data != nil {
			k.drop(p)
		}
	}
	delete(k.pieces, g)
	if len(k.fifo) > 2*k.live+64 { // mostly forgotten: keep the queue small
		k.fifo = slices.DeleteFunc(k.fifo, func(p *undoPiece) bool { return p.data == nil })
	}
}

// cut drops the pieces of g that a change of [from, to) (to < 0: to the
// end) makes stale: a truncate, or a write that keeps no copy, replaces
// what they hold, and put back they would bring back data acknowledged
// operations replaced since (a review, 2026-11-28).
func (k *undoKeeper) cut(g layer.Gfid, from, to int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pieces[g] {
		if p.data != nil && p.off+int64(len(p.data)) > from && (to < 0 || p.off < to) {
			k.drop(p)
		}
	}
}

// holding reports whether the keeper holds any piece.
func (k *undoKeeper) holding() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.live > 0
}

// read fills p with g's copy at off: zeros where nothing was kept, and
// n = 0 if nothing kept overlaps it.
func (k *undoKeeper) read(g layer.Gfid, p []byte, off int64) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	clear(p)
	n := 0
	for _, pc := range k.pieces[g] {
		lo, hi := max(pc.off, off), min(pc.off+int64(len(pc.data)), off+int64(len(p)))
		if lo < hi && pc.data != nil {
			copy(p[lo-off:hi-off], pc.data[lo-pc.off:hi-pc.off])
			n = len(p)
		}
	}
	return n
}

// span is a range of a file a write replaces.
type span struct{ off, len int64 }

// keepsUndo reports whether a write in ctx keeps what it replaces first.
func (f *file) keepsUndo(ctx context.Context) bool {
	t := layer.TxnFrom(ctx)
	return f.s.disperse && !f.s.arbiter && t.KeepUndo && t.Pending&layer.Dirty != 0
}

// saveUndo keeps what spans of the file hold now; past the end there is
// nothing to keep.
func (f *file) saveUndo(spans ...span) error {
	g, err := readGfid("", f.fd)
	if err != nil {
		return err
	}
	for _, sp := range spans {
		if sp.len <= 0 {
			continue
		}
		buf := alignedBytes(sp.len)
		got, err := f.readOld(buf, sp.off)
		if err != nil {
			return err
		}
		if got > 0 { // kept without the alignment's slack
			f.s.undo.keep(g, sp.off, append([]byte(nil), buf[:got]...))
		}
	}
	return nil
}

// alignedBytes is n bytes at a 4 KiB-aligned address: a direct file is
// read with O_DIRECT, for a buffered read of a file written direct would
// fill the page cache that each direct write then has to invalidate.
func alignedBytes(n int64) []byte {
	b := make([]byte, n+4096)
	o := (4096 - int(uintptr(unsafe.Pointer(&b[0]))%4096)) % 4096
	return b[o : o+int(n) : o+int(n)]
}

// readOld reads p at off for the undo copy, through a reading descriptor
// of the inode if the file was opened write-only.
func (f *file) readOld(p []byte, off int64) (int, error) {
	if f.flags&unix.O_ACCMODE != unix.O_WRONLY {
		return readFull(func(p []byte, off int64) (int, error) { return f.io(unix.Pread, p, off) }, p, off)
	}
	fd, err := unix.Open(procFd(f.fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return readFull(func(p []byte, off int64) (int, error) { return unix.Pread(fd, p, off) }, p, off)
}

// readFull reads len(p) bytes at off with read, fewer only at end of file.
func readFull(read func(p []byte, off int64) (int, error), p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := read(p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}

// ReadUndo reads the file's undo copy (layer.UndoReader): n = 0 when the
// brick keeps nothing of it there.
func (f *file) ReadUndo(ctx context.Context, p []byte, off int64) (int, error) {
	g, err := readGfid("", f.fd)
	if err != nil {
		return 0, err
	}
	return f.s.undo.read(g, p, off), nil
}

// cutUndo drops what the undo copy of the inode open at fd holds of
// [from, to) (to < 0: to the end), which a change that keeps no copy
// replaces (undoKeeper.cut); nothing to do while nothing is kept.
func (s *Store) cutUndo(fd int, from, to int64) {
	if !s.disperse || !s.undo.holding() { // only a disperse brick keeps copies
		return
	}
	if g, err := readGfid("", fd); err == nil {
		s.undo.cut(g, from, to)
	}
}

// dropUndo forgets the undo copy of inode g, if any.
func (s *Store) dropUndo(g layer.Gfid) { s.undo.forget(g) }
