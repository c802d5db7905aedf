package replicate

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Removing names: Unlink and Rmdir, and how the answers of replicas
// that were behind or raced another client are counted.

// removal runs Unlink or Rmdir. A replica that lacked the name (it was
// behind) loses to the ones that removed it and is marked for heal; when
// no copy of the directory is behind, the name was there on every
// replica and another client's removal took it from some first (raced).
func (r *Replicate) removal(ctx context.Context, path string, rm func(l layer.Layer, ctx context.Context) error) error {
	parent := parentOf(path)
	adjust := func(targets Mask, errs []error, good Mask) (done, judged Mask) {
		r.parentElsewhere(ctx, parent, targets, errs)
		if ok, absent := okAndAbsent(targets, errs); ok|absent == targets && r.inStep(ctx, parent) {
			return raced(errs, ok, absent), good
		}
		return goneAlready(targets, errs, good)
	}
	_, err := r.modifyWith(ctx, []string{parent}, adjust, func(ctx context.Context, i int) error {
		return rm(r.children[i].Layer, ctx)
	})
	return err
}

// errNoParent stands for a replica's ENOENT to a removal that others did
// because it holds the name's directory under another name (a directory
// rename half done): the name may still be in that directory there. It
// missed the removal, as a replica down does (marked, no vote for it;
// counted as done, one replica of three removing a file was
// acknowledged, and heal gave it back: sim disperse2+1x2-dirs seed 70).
var errNoParent = fmt.Errorf("the name's directory is elsewhere on this replica: %w", syscall.ENOTCONN)

// parentElsewhere turns, when some replicas did a removal in directory
// dir, the ENOENT of those that hold dir (by the gfid a replica that did
// it gives it) under another name into errNoParent. A replica that never
// had dir (it missed its mkdir) keeps its ENOENT: heal makes dir there
// without the name. Only in that mixed case, two round trips per such
// replica.
func (r *Replicate) parentElsewhere(ctx context.Context, dir string, targets Mask, errs []error) {
	ok, absent := okAndAbsent(targets, errs)
	if ok == 0 || absent == 0 || dir == "/" {
		return
	}
	d, err := r.children[ok.First()].Layer.Lookup(ctx, dir)
	if err != nil || !d.IsDir() {
		return // gone meanwhile (a client's rmdir racing): the answers stand
	}
	for i := range errs {
		if !absent.Has(i) {
			continue
		}
		l := r.children[i].Layer
		if _, err := l.Lookup(ctx, dir); !errors.Is(err, syscall.ENOENT) {
			continue
		}
		if at, err := l.Getxattr(ctx, layer.IDPath(d.Gfid), layer.XattrPath); err == nil && string(at) != dir {
			errs[i] = errNoParent
		}
	}
}

// inStep reports whether the copies of directory dir agree: none blames
// another, so every replica up holds the same names.
func (r *Replicate) inStep(ctx context.Context, dir string) bool {
	v, _, err := r.judge(ctx, dir)
	return err == nil && v.Err == nil && v.Blamed == 0 && !v.Merge && !v.SplitBrain
}

// raced settles the removal of a name two clients removed at once, each
// first on some replicas (ok) and second on the others (absent): the
// lowest replica that answered decides, so that of two such removals
// exactly one succeeds, the other ENOENT, as on a local file system
// (each replica took the name away once; without a rule both succeeded).
// Either way the name is gone on every replica: the answers are made
// alike, and nothing is marked.
func raced(errs []error, ok, absent Mask) (done Mask) {
	first := 0
	for !(ok | absent).Has(first) {
		first++
	}
	for i := range errs {
		switch {
		case ok.Has(first) && absent.Has(i):
			errs[i] = nil
		case absent.Has(first) && ok.Has(i):
			errs[i] = syscall.ENOENT
		}
	}
	if ok.Has(first) {
		return absent
	}
	return 0
}

// goneAlready counts a replica that answered a removal with ENOENT as
// having done it when another did it and no good copy of the directory
// refused it: the name is absent there, which is what the removal makes.
// Such a replica missed the name's creation; with copies of the
// directory that blame each other (good unknown) the name is listed, and
// its removal answered ENOENT was a wrong answer (the simulation,
// replica3x2-full seed 62). When the good copies lack the name, their
// ENOENT stands: the copies that had it were stale.
func goneAlready(targets Mask, errs []error, good Mask) (done, judged Mask) {
	ok, absent := okAndAbsent(targets, errs)
	if ok == 0 || absent&good != 0 && ok&good == 0 {
		return 0, good
	}
	for i := range errs {
		if absent.Has(i) {
			errs[i] = nil
		}
	}
	return absent, good
}

// okAndAbsent returns the targets that did an operation and those that
// answered ENOENT.
func okAndAbsent(targets Mask, errs []error) (ok, absent Mask) {
	for i, err := range errs {
		switch {
		case !targets.Has(i):
		case err == nil:
			ok |= Bit(i)
		case errors.Is(err, syscall.ENOENT):
			absent |= Bit(i)
		}
	}
	return ok, absent
}

func (r *Replicate) Unlink(ctx context.Context, path string) error {
	return r.removal(ctx, path, func(l layer.Layer, ctx context.Context) error { return l.Unlink(ctx, path) })
}

// UnlinkData is Unlink, refused with EREMOTE for a pointer file
// (layer.DataUnlinker); every copy of a name is alike, pointer or not.
func (r *Replicate) UnlinkData(ctx context.Context, path string) error {
	return r.removal(ctx, path, func(l layer.Layer, ctx context.Context) error { return layer.UnlinkData(ctx, l, path) })
}

func (r *Replicate) Rmdir(ctx context.Context, path string) error {
	return r.removal(ctx, path, func(l layer.Layer, ctx context.Context) error { return l.Rmdir(ctx, path) })
}
