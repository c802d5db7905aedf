package replicate

import (
	"context"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// Copies open but behind. A file opened while one of its copies was
// blamed (a brick back from a restart, not healed yet), or reopened on a
// replica that came back, writes to that copy too but does not read from
// it. Each change then also records that copy as pending on the good
// copies, in the same round trip, as if it had missed the change: the
// healer may be copying the file to it at that very moment, and a change
// that lands on the behind copy before the heal's copy and on the good
// copies after the heal has cleared its marks would otherwise be lost on
// it with no mark left to say so. The heal clears a mark only if the
// source did not change since it read it (brick/posix ClearPending), so
// the copy stays blamed until a heal has seen every change of the file.
//
// Once no copy blames it any more, with none of this file's changes in
// flight, the behind copy has them all: the file counts it as good again,
// reads from it and stops marking it (catchUp, at most every catchUpEvery
// while a copy is behind).

// catchUpEvery is how often an open file with copies behind asks the
// bricks whether they have caught up.
const catchUpEvery = 200 * time.Millisecond

// pendingFor returns the context of a change sent to targets, by
// replica: the good copies record as pending the replicas that miss it
// and those that are behind; a copy that is behind records only those
// that miss it.
func (f *file) pendingFor(ctx context.Context, targets Mask) func(i int) context.Context {
	f.mu.Lock()
	good := f.good & targets
	f.mu.Unlock()
	toGood := f.r.withPending(ctx, good)
	if good == targets {
		return func(int) context.Context { return toGood }
	}
	toBehind := f.r.withPending(ctx, targets)
	return func(i int) context.Context {
		if good.Has(i) {
			return toGood
		}
		return toBehind
	}
}

// catchUp counts as good again the open copies that were behind and that
// no copy blames any more. It waits for the file's changes in flight and
// holds off new ones for one round trip of attribute reads.
func (f *file) catchUp(ctx context.Context) {
	f.mu.Lock()
	due := f.open&^f.good&f.r.up() != 0 && time.Since(f.checked) >= catchUpEvery
	if due {
		f.checked = time.Now()
	}
	f.mu.Unlock()
	if !due {
		return
	}
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.mu.Lock()
	files := append([]layer.File(nil), f.files...)
	open, good := f.open&f.r.up(), f.good
	f.mu.Unlock()
	attrs := make([]layer.Attr, len(files))
	errs := f.r.parallel(open, func(i int) error {
		var err error
		attrs[i], err = files[i].Getattr(ctx)
		return err
	})
	var blamed, same Mask
	for i := range files {
		if !open.Has(i) {
			continue
		}
		if errs[i] != nil {
			if good.Has(i) {
				return // a good copy's marks are unknown
			}
			continue
		}
		blamed |= Mask(attrs[i].Pending) &^ Bit(i)
		if attrs[i].Gfid == f.attr.Gfid {
			same |= Bit(i)
		}
	}
	caught := open &^ good & same &^ blamed
	if caught == 0 {
		return
	}
	f.mu.Lock()
	f.good |= caught & f.open
	f.mu.Unlock()
	f.r.log.Debug("copies caught up: the open file reads from them again", "path", f.path, "replicas", f.r.names(caught))
}
