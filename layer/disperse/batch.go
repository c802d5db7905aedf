package disperse

import (
	"context"
	"syscall"
)

// Writes within one stripe of a file wait for each other (the stripe's
// lock: each changes the stripe's version on every brick). Those that
// wait together go together: the first to come takes the stripe's lock
// for every write that joins it meanwhile, and sends each run of writes
// that touch one another — in the order they came, later bytes over
// earlier ones — as one write. A queue of sequential small direct writes
// (fio, a VM's disk) so costs a round of brick requests per run, not per
// write; writes that touch nothing before them go one by one, as before.
// Every write of a run gets the run's result.

// batch is the writes waiting for one stripe under one leader.
type batch struct{ writes []*queued }

// queued is one write of a batch.
type queued struct {
	p    []byte
	off  int64
	err  error
	done chan struct{}
}

func (w *queued) end() int64 { return w.off + int64(len(w.p)) }

// batched writes p at off, within stripe s, with the writes that wait for
// the stripe with it.
func (f *file) batched(ctx context.Context, s int64, p []byte, off int64) error {
	w := &queued{p: p, off: off, done: make(chan struct{})}
	b, leader := f.join(s, w)
	if !leader {
		<-w.done
		return w.err
	}
	unlock := f.lockStripes(s, s, true)
	defer unlock()
	f.mu.Lock()
	delete(f.batches, s) // writes coming from now on wait for the next round
	writes := b.writes
	f.mu.Unlock()
	if len(writes) > 1 {
		ctx = context.WithoutCancel(ctx) // others' writes: not ours to interrupt
	}
	sp := Span{First: s, Last: s}
	for i, r := range runs(writes, f.d.g.Stripe()) {
		var err error = syscall.EIO // a run before lost the lock on the bricks
		if i == 0 || f.hold.holds(f.d.g.K) {
			err = f.writeSpan(ctx, sp, r.p, r.off)
		}
		for _, q := range r.writes {
			q.err = err
			close(q.done)
		}
	}
	return w.err
}

// join adds w to the batch of stripe s, starting one if none is waiting
// (leader: the caller sends it).
func (f *file) join(s int64, w *queued) (b *batch, leader bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.batches[s]
	if !ok {
		b = &batch{}
		if f.batches == nil {
			f.batches = map[int64]*batch{}
		}
		f.batches[s] = b
	}
	b.writes = append(b.writes, w)
	return b, !ok
}

// run is writes that touch one another, merged.
type run struct {
	off    int64
	p      []byte
	owned  bool // p is the run's own buffer, not a write's
	writes []*queued
}

func (r *run) end() int64 { return r.off + int64(len(r.p)) }

// runs merges writes, in order, into runs: a write that overlaps or
// adjoins the run before it joins it (its bytes over the run's), any other
// starts a run. Writes lie within one stripe of stripe bytes.
func runs(writes []*queued, stripe int64) []*run {
	var out []*run
	for _, w := range writes {
		if n := len(out); n > 0 && w.off <= out[n-1].end() && w.end() >= out[n-1].off {
			out[n-1].add(w, stripe)
			continue
		}
		out = append(out, &run{off: w.off, p: w.p, writes: []*queued{w}})
	}
	return out
}

// add merges w, which touches the run, into it.
func (r *run) add(w *queued, stripe int64) {
	lo, hi := min(r.off, w.off), max(r.end(), w.end())
	if r.owned && lo == r.off {
		r.p = r.p[:hi-lo] // within the stripe: the buffer's capacity
	} else {
		p := make([]byte, hi-lo, max(stripe, hi-lo))
		copy(p[r.off-lo:], r.p)
		r.p, r.owned = p, true
	}
	r.off = lo
	copy(r.p[w.off-lo:], w.p)
	r.writes = append(r.writes, w)
}
