package replicate

import (
	"context"
	"errors"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Changes: an operation sent to the replicas, the outcome judged from
// their answers (who did it, who missed it, whether a quorum did), and
// the pending marks that tell heal which replicas missed it.

// withPending is ctx carrying the replicas that will miss an operation
// sent to targets.
func (r *Replicate) withPending(ctx context.Context, targets Mask) context.Context {
	if miss := r.all &^ targets; miss != 0 {
		t := layer.TxnFrom(ctx) // keeps what a layer above set (disperse's size, Dirty)
		t.Pending |= uint64(miss)
		return layer.WithTxn(ctx, t)
	}
	return ctx
}

// outcome is how a modification went on the replicas it was sent to.
type outcome struct {
	winners Mask // the answer that counts
	losers  Mask // replicas that missed it or answered otherwise
	err     error
}

// settle decides a modification's outcome. When the replicas disagree,
// the side holding the good copies wins (good: the replicas whose copies
// of the changed inodes are current, if known); failing that, the side
// with quorum, or the larger one. The others are losers, to be marked
// pending on the winners. A replica whose brick fenced the client's
// layout off (layer.ErrFenced; its fence raised before the others')
// makes the refusal win whatever the others did: the client must not
// make names by that layout, and heal takes away those it made.
func (r *Replicate) settle(targets Mask, errs []error, good Mask) outcome {
	var ok, down, failed, fenced Mask
	for i := range r.children {
		switch {
		case !targets.Has(i):
		case errs[i] == nil:
			ok |= Bit(i)
		case IsDown(errs[i]):
			down |= Bit(i)
		default:
			failed |= Bit(i)
			if errors.Is(errs[i], layer.ErrFenced) {
				fenced |= Bit(i)
			}
		}
	}
	switch {
	case fenced != 0 && ok != 0:
		return outcome{winners: failed, losers: ok, err: layer.ErrFenced}
	case ok == 0 && failed == 0:
		return outcome{err: syscall.ENOTCONN, losers: down}
	case ok == 0:
		// They all refused (EEXIST, ENOENT, ENOSPC ...): nothing changed.
		// A good copy's reason is the one that counts: a stale copy may
		// lack the name a good one has (EREMOTE from a distribute
		// pointer, say, where the stale copy says ENOENT).
		if g := failed & good; g != 0 {
			return outcome{err: errs[g.First()]}
		}
		return outcome{err: errs[failed.First()]}
	case failed != 0 && failed&good != 0 && ok&good == 0:
		// Only stale copies did it: the refusal of the good ones stands.
		return outcome{winners: failed, losers: ok, err: errs[failed.First()]}
	case failed == 0 || (ok&good != 0 && failed&good == 0) || r.quorate(ok) || ok.Count() > failed.Count():
		o := outcome{winners: ok, losers: failed | down}
		if !r.quorate(ok) {
			// Quorum lost during the operation, or the others up were
			// stale copies that could not do it: it is done on too few
			// replicas for a later quorum to be sure to see it.
			o.err = syscall.EIO
		}
		return o
	}
	// A minority did it and the majority refused: the refusal stands, and
	// the minority is what heal must undo.
	return outcome{winners: failed, losers: ok, err: errs[failed.First()]}
}

// undecided turns the refusal that stood in outcome o into EIO when as
// many replicas did the operation as refused it and the copies it
// changes are in doubt (blaming each other, or a lookup of them answers
// EIO), none known good: the refusal's reason may be a stale copy's
// (ENOENT for a file a quorum made and acknowledged, while a lookup of it
// answered EIO: sim replica3x2-dirs seed 62). A tie with the copies known
// (a race with another client's removal, say) keeps its answer, and so
// does a fence (layer.ErrFenced: the mount retries on a newer graph).
func undecided(o outcome) outcome {
	if o.err != nil && !errors.Is(o.err, layer.ErrFenced) && o.losers != 0 && o.winners.Count() == o.losers.Count() {
		o.err = syscall.EIO
	}
	return o
}

// goodOf returns the replicas whose copies of every path in marks are
// current (0 if that cannot be known), and whether one of them is in
// doubt: its copies blame each other, or its verdict is EIO.
func (r *Replicate) goodOf(ctx context.Context, marks []string) (good Mask, doubt bool) {
	good = r.all
	for _, p := range marks {
		v, _, err := r.judge(ctx, p)
		if err != nil || v.Err != nil {
			return 0, errors.Is(err, syscall.EIO) || errors.Is(v.Err, syscall.EIO)
		}
		if v.Merge || v.SplitBrain {
			doubt = true
		}
		good &= v.Good
	}
	return good, doubt
}

// modify runs a modifying operation on every writable replica: fn gets a
// context carrying the pending replicas. marks are the paths whose inodes
// carry the marks for this operation (the inode itself, or the parent
// directories of changed names).
func (r *Replicate) modify(ctx context.Context, marks []string, fn func(ctx context.Context, i int) error) (outcome, error) {
	return r.modifyWith(ctx, marks, nil, fn)
}

// adjuster looks at the answers of replicas that disagree before they
// are settled (see modifyWith): it may turn refusals into successes
// (done) and say which replicas hold the current copies as far as this
// operation goes (judged: good unless it knows better).
type adjuster func(targets Mask, errs []error, good Mask) (done, judged Mask)

// modifyWith is modify, with the answers passed through adjust (if not
// nil) before they are settled, when the replicas disagree. The replicas
// whose refusal adjust turned into a success record, as the others did
// in the request, that the replicas not among targets missed it.
func (r *Replicate) modifyWith(ctx context.Context, marks []string, adjust adjuster, fn func(ctx context.Context, i int) error) (outcome, error) {
	return r.modifySent(ctx, marks, adjust, r.parallel, fn)
}

// sender runs fn for the replicas in targets and returns the errors by
// replica: parallel, or deciderFirst.
type sender func(targets Mask, fn func(i int) error) []error

// deciderFirst runs fn on the first of targets (the decider), then on
// the others at once: what the decider answered is what a client that
// goes away in between leaves done, and heal settles the copies by it
// (a directory's rename: heal/dirname.go). One round trip more.
func (r *Replicate) deciderFirst(targets Mask, fn func(i int) error) []error {
	d := targets.First()
	first := r.parallel(Bit(d), fn)
	errs := r.parallel(targets&^Bit(d), fn)
	errs[d] = first[d]
	return errs
}

// modifySent is modifyWith, sending the operation with send.
func (r *Replicate) modifySent(ctx context.Context, marks []string, adjust adjuster, send sender, fn func(ctx context.Context, i int) error) (outcome, error) {
	targets, err := r.writable(ctx)
	if err != nil {
		return outcome{}, err
	}
	if targets != r.all {
		if err := r.guard(ctx, targets, marks); err != nil {
			return outcome{}, err
		}
	}
	pctx := r.withPending(ctx, targets)
	errs := send(targets, func(i int) error { return fn(pctx, i) })
	good, doubt := Mask(0), false
	if disagree(targets, errs) {
		// Rare: find out which side holds the current copies.
		good, doubt = r.goodOf(ctx, marks)
		if adjust != nil {
			var done Mask
			done, good = adjust(targets, errs, good)
			if done != 0 && targets != r.all {
				r.markLosers(ctx, outcome{winners: done, losers: r.all &^ targets}, marks)
			}
		}
	}
	o := r.settle(targets, errs, good)
	if doubt && good == 0 {
		o = undecided(o)
	}
	if o.winners != 0 && o.losers != 0 {
		r.markLosers(ctx, o, marks)
	}
	return o, o.err
}

// disagree reports whether some targets succeeded and others answered
// with an error, or they answered with different errors (not counting
// replicas that are down).
func disagree(targets Mask, errs []error) bool {
	var ok bool
	var refused error
	split := false
	for i, err := range errs {
		switch {
		case !targets.Has(i):
		case err == nil:
			ok = true
		case IsDown(err):
		case refused == nil:
			refused = err
		case layer.ToErrno(err) != layer.ToErrno(refused):
			split = true
		}
	}
	return ok && refused != nil || split
}

// guard checks, when replicas are missing, that the inodes an operation
// marks have a current copy among targets: otherwise the operation would
// land only on copies that are behind, and the copies would end up
// blaming each other (one extra round trip, only while degraded).
func (r *Replicate) guard(ctx context.Context, targets Mask, marks []string) error {
	for _, p := range marks {
		v, _, err := r.judge(ctx, p)
		if err != nil {
			return err
		}
		if v.Err == nil && v.Good&targets == 0 {
			r.log.Warn("no current copy is up: refusing the change", "path", p, "up", r.names(targets))
			return syscall.ENOTCONN
		}
	}
	return nil
}

// markLosers records on the winners that the losers missed an operation:
// the second round trip, only when a replica failed during an operation.
func (r *Replicate) markLosers(ctx context.Context, o outcome, paths []string) {
	mask := uint64(o.losers)
	r.parallel(o.winners, func(i int) error {
		h, ok := r.children[i].Layer.(layer.HealStore)
		if !ok {
			return syscall.ENOTSUP
		}
		for _, p := range paths {
			if err := h.MarkPending(ctx, p, layer.Gfid{}, mask); err != nil && !errors.Is(err, syscall.ENOENT) {
				r.log.Error("cannot record a missed operation: the replicas may differ until a full heal",
					"path", p, "replica", r.children[i].Name, "missed", r.names(o.losers), "err", err)
			}
		}
		return nil
	})
	r.log.Warn("replicas missed an operation; marked for heal", "paths", paths, "missed", r.names(o.losers))
}
