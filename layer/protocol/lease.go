package protocol

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/locks"
	"github.com/mortarfs/mortar/wire"
)

// Lock leases (layer.LockLeaser): a file whose brick granted it the lease
// of its inode's POSIX locks takes, releases and tests them here, without
// a round trip, until the brick recalls the lease or the file asks for a
// lock it must wait for; it then hands its locks back (OpLeaseReturn) and
// goes on as without a lease. A lease dies with its session, as the
// brick's locks do.

// heldLease is a lease a file holds, and its locks.
type heldLease struct {
	id    uint64
	s     *session
	fh    uint64
	table *locks.Local
}

// leaseTrust bounds how long after the brick was last heard from a lease
// is used: well within the time a brick waits for a recalled lease before
// it cuts the holder off and lets others have the locks
// (locks.RecallTimeout, 10 s). A healthy session hears a pong every
// PingInterval.
const leaseTrust = 4 * time.Second

// liveLease returns f's lease if its session lives and was heard from
// lately; a lease that may have been recalled unheard is handed back (the
// locks are lost if the brick no longer listens, as with a connection
// lost). f.lmu is held.
func (f *file) liveLease() *heldLease {
	le := f.lease
	switch {
	case le == nil:
	case !alive(le.s):
		f.lease = nil
	case time.Since(time.Unix(0, le.s.lastRecv.Load())) > leaseTrust:
		if err := f.giveBack(); err != nil {
			f.c.log.Warn("returning a lock lease failed", "path", f.path, "err", err)
		}
	}
	return f.lease
}

// leasedSetlk takes or releases an application's POSIX lock (f.lmu is
// held): under a lease here; else on the brick, asking for a lease when
// the request does not wait and no blocking request of f is under way
// (a lease granted meanwhile would miss its lock).
func (f *file) leasedSetlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool) error {
	switch lk.Type {
	case syscall.F_RDLCK, syscall.F_WRLCK, syscall.F_UNLCK:
	default:
		return syscall.EINVAL
	}
	if le := f.liveLease(); le != nil {
		_, conflict := le.table.Conflict(owner, lk)
		// A lock may split one in two: the table must stay within what
		// a return carries.
		full := le.table.Len()+2 > wire.MaxLeaseLocks
		switch {
		case !full && (lk.Type == syscall.F_UNLCK || !conflict):
			le.table.Set(owner, lk)
			return nil
		case !full && !wait:
			return syscall.EAGAIN
		}
		// Another owner of this file holds it (the brick does the
		// waiting), or the table is full.
		if err := f.giveBack(); err != nil {
			return err
		}
	}
	if wait {
		f.waiting++
		f.lmu.Unlock()
		_, _, _, err := f.setlk(ctx, owner, lk, true, 0)
		f.lmu.Lock()
		f.waiting--
		return err
	}
	var flags uint32
	if f.waiting == 0 && !f.c.cfg.NoLeases {
		flags = wire.SetlkLease
	}
	payload, s, fh, err := f.setlk(ctx, owner, lk, false, flags)
	if err == nil && len(payload) == 8 {
		f.takeLease(s, fh, (&wire.Dec{B: payload}).U64(), owner, lk)
	}
	return err
}

// setlk runs a Setlk on the brick, and returns the answer's payload and
// the session and handle it went on.
func (f *file) setlk(ctx context.Context, owner uint64, lk layer.Lock, wait bool, flags uint32) ([]byte, *session, uint64, error) {
	s, fh, err := f.handle(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	req := &wire.Request{Op: wire.OpSetlk, Fh: fh, LockOwner: owner, Lock: lk, Wait: wait, Flags: flags}
	cl, err := f.c.roundTrip(ctx, s, req, nil, nil)
	if err != nil {
		return nil, s, fh, err
	}
	return cl.payload, s, fh, nil
}

// takeLease keeps the lease the brick granted with owner's lock lk,
// unless the brick recalled it already. f.lmu is held.
func (f *file) takeLease(s *session, fh, id, owner uint64, lk layer.Lock) {
	s.mu.Lock()
	_, gone := s.recalled[id]
	delete(s.recalled, id)
	if !gone && s.err == nil {
		s.leases[id] = f
	}
	s.mu.Unlock()
	if gone || !alive(s) {
		return
	}
	f.lease = &heldLease{id: id, s: s, fh: fh, table: locks.NewLocal()}
	f.lease.table.Set(owner, lk)
}

// giveBack returns f's lease with its locks; the brick has taken them
// when it returns. f.lmu is held. It goes on whatever the caller's
// context: a return cut short would leave the brick with stale locks.
func (f *file) giveBack() error {
	le := f.lease
	f.lease = nil
	if le == nil || !alive(le.s) {
		return nil
	}
	req := &wire.Request{Op: wire.OpLeaseReturn, Fh: le.fh, Cookie: le.id, Locks: le.table.Held()}
	_, err := f.c.roundTrip(context.Background(), le.s, req, nil, nil)
	le.s.mu.Lock()
	delete(le.s.leases, le.id)
	le.s.mu.Unlock()
	if errors.Is(err, syscall.ENOTCONN) {
		return nil // the brick dropped the locks with the connection
	}
	return err
}

// dropLease forgets f's lease (its file is released, which ends it on
// the brick too). f.lmu is held.
func (f *file) dropLease() {
	if le := f.lease; le != nil {
		f.lease = nil
		le.s.mu.Lock()
		delete(le.s.leases, le.id)
		le.s.mu.Unlock()
	}
}

// recall reads a KindRecall frame and returns the lease it names, or
// tells the brick it does not hold it (it is recorded, in case the answer
// granting it is still to come).
func (s *session) recall(h wire.Header) error {
	if h.Len != 8 {
		return errors.New("recall frame without a file handle")
	}
	var b [8]byte
	if _, err := io.ReadFull(s.nc, b[:]); err != nil {
		return err
	}
	fh := (&wire.Dec{B: b[:]}).U64()
	s.mu.Lock()
	f := s.leases[h.ID]
	if f == nil {
		s.noteRecalled(h.ID)
	}
	s.mu.Unlock()
	if f != nil {
		go f.recalled(s, h.ID)
		return nil
	}
	var e wire.Enc
	(&wire.Request{Op: wire.OpLeaseReturn, Fh: fh, Cookie: h.ID, Flags: wire.LeaseKeep}).Encode(&e)
	s.sendLater(wire.OpLeaseReturn, e.B)
	return nil
}

// recalledKept bounds how long a recall of an unknown lease is kept.
const recalledKept = time.Minute

// noteRecalled records a recall of a lease not known yet. s.mu is held.
func (s *session) noteRecalled(id uint64) { noteRecall(s.recalled, id) }

// noteRecall records in recalled, by when, a recall of lease id not known
// yet, forgetting those kept past recalledKept.
func noteRecall(recalled map[uint64]time.Time, id uint64) {
	now := time.Now()
	for k, t := range recalled {
		if now.Sub(t) > recalledKept {
			delete(recalled, k)
		}
	}
	recalled[id] = now
}

// recalled returns the lease id of session s, if f still holds it.
func (f *file) recalled(s *session, id uint64) {
	f.lmu.Lock()
	defer f.lmu.Unlock()
	if le := f.lease; le != nil && le.id == id && le.s == s {
		if err := f.giveBack(); err != nil {
			f.c.log.Warn("returning a lock lease failed", "path", f.path, "err", err)
		}
	}
}
