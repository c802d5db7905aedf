package distribute

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// Files with several names leaving a child (remove-brick). Every name of
// such a file is a link on the child holding its data (storage counts
// the links there); a name hashed to another child has a pointer there
// too. A rebalance that adds a child leaves them where they are, with a
// pointer on each name's hashed child (linkPointer). One that must empty
// a child moves them, all names at once: while it walks it gathers the
// names of each (all on the leaving child), and once the walk is done it
// moves every file whose names it all saw:
//
//  1. watch; copy the file to a hidden name on the hashed child of its
//     first name (the target); freeze, expecting that many names (EMLINK
//     otherwise: a link made since the walk; a new link or a rename of a
//     name waits for the freeze, see posix.XattrMigrate);
//  2. check that every name gathered still names the file;
//  3. give the target every name: the copy renamed to the first, the
//     others linked to it (replacing the pointers to the old child there);
//  4. point the other names' hashed children at the target: from then on
//     every name is found there;
//  5. moved, listing the names: on the old child the file becomes a
//     pointer to the target under every name at once, its open files
//     reopen it there, and its names there are removed. The operations on
//     its names the freeze held then answer EREMOTE, and distribute does
//     them on the target. If moved fails (the freeze expired), steps 3 and
//     4 are undone.
//
// A file with names the walk did not see (made during it, or before a
// checkpoint it resumed from) is skipped: the next run finds them all.

// linked is a file with several names on a leaving child, gathered by the
// walk.
type linked struct {
	attr  layer.Attr
	c     int
	names []string
}

// gather records w, one name of a file with several names on a leaving
// child.
func (r *rebalancer) gather(w work) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.links == nil {
		r.links = map[layer.Gfid]*linked{}
	}
	l := r.links[w.attr.Gfid]
	if l == nil {
		l = &linked{attr: w.attr, c: w.c}
		r.links[w.attr.Gfid] = l
	}
	l.names = append(l.names, w.path)
}

// hashOf is the child path's name hashes to in the layout being made.
func (r *rebalancer) hashOf(path string) int {
	_, name := layer.Split(path)
	return r.d.layout.owner(hashName(name))
}

// moveLinked moves the files gathered, one at a time.
func (r *rebalancer) moveLinked(ctx context.Context) {
	r.mu.Lock()
	var all []*linked
	for _, l := range r.links {
		all = append(all, l)
	}
	r.links = nil
	r.mu.Unlock()
	for _, l := range all {
		slices.Sort(l.names)
	}
	slices.SortFunc(all, func(a, b *linked) int { return comparePaths(a.names[0], b.names[0]) })
	for _, l := range all {
		if ctx.Err() != nil {
			return
		}
		r.done(ctx, l.names[0], r.moveNames(ctx, l))
	}
}

// moveNames moves l, trying again when it changed while copied.
func (r *rebalancer) moveNames(ctx context.Context, l *linked) error {
	if len(l.names) != int(l.attr.Nlink) {
		return fmt.Errorf("%d names, %d found (made during the walk?): %w", l.attr.Nlink, len(l.names), errBusy)
	}
	for try := 1; ; try++ {
		err := r.moveNamesOnce(ctx, l)
		if !errors.Is(err, errChanged) {
			return err
		}
		if try == migrateTries {
			return fmt.Errorf("kept changing while copied: %w", errBusy)
		}
	}
}

// moveNamesOnce is one attempt of moveNames (steps 1 to 5).
func (r *rebalancer) moveNamesOnce(ctx context.Context, l *linked) error {
	d := r.d
	bg := context.WithoutCancel(ctx)
	w := work{path: l.names[0], c: l.c, h: r.hashOf(l.names[0]), attr: l.attr}
	n := strconv.Itoa(len(l.names))
	if err := r.cmd(ctx, w, "watch"); err != nil {
		r.cmd(bg, w, "thaw")
		return r.migrateErr(err)
	}
	dir, _ := layer.Split(w.path)
	tmp := layer.Join(dir, migName())
	size, err := r.copyFile(ctx, w, tmp)
	if err == nil {
		err = r.frozen(ctx, w, n)
	}
	frozen := time.Now()
	if err == nil {
		err = r.sameNames(ctx, l)
	}
	var undo []func()
	if err == nil {
		undo, err = r.giveNames(ctx, l, w, tmp)
	}
	if err == nil {
		var more []func()
		more, err = r.pointAt(ctx, l, w.h)
		undo = append(undo, more...)
	}
	if err == nil && time.Since(frozen) > freezeBudget {
		err = fmt.Errorf("names moved under the freeze too slowly: %w", errBusy)
	}
	if err == nil {
		err = r.cmd(bg, w, "moved", append([]string{d.children[w.h].ID, n}, encodeNames(l.names)...)...)
		if errors.Is(err, syscall.EMLINK) || errors.Is(err, syscall.ESTALE) {
			err = fmt.Errorf("names changed while moved: %w", errBusy)
		}
	}
	if err != nil {
		for _, u := range slices.Backward(undo) {
			u()
		}
		r.cmd(bg, w, "thaw")
		d.unlinkPointer(bg, w.h, tmp)
		return err
	}
	r.count(func(st *RebalanceStats) { st.Moved++; st.Bytes += size })
	return nil
}

// frozen freezes w's file on its child, expecting n names: a change since
// the watch is errChanged, another number of names errBusy.
func (r *rebalancer) frozen(ctx context.Context, w work, n string) error {
	err := r.cmd(ctx, w, "freeze", n)
	switch {
	case errors.Is(err, syscall.ESTALE):
		return errChanged
	case errors.Is(err, syscall.EMLINK):
		return fmt.Errorf("linked while copied: %w", errBusy)
	case err != nil:
		return r.migrateErr(err)
	}
	return nil
}

// sameNames checks, under the freeze, that every name gathered for l
// still names its file on its child (a rename meanwhile keeps the count).
func (r *rebalancer) sameNames(ctx context.Context, l *linked) error {
	for _, p := range l.names {
		a, err := r.d.child(l.c).Lookup(ctx, p)
		if err != nil || a.Gfid != l.attr.Gfid || a.Linkto != "" {
			return fmt.Errorf("%s renamed since the walk: %w", p, errBusy)
		}
	}
	return nil
}

// giveNames makes every name of l on w.h a link of the copy at tmp; what it
// returns undoes what it did.
func (r *rebalancer) giveNames(ctx context.Context, l *linked, w work, tmp string) ([]func(), error) {
	d := r.d
	bg := context.WithoutCancel(ctx)
	var undo []func()
	for i, p := range l.names {
		from := tmp
		if i > 0 {
			dir, _ := layer.Split(p)
			from = layer.Join(dir, migName())
			err := d.withParent(ctx, w.h, from, func() error {
				_, err := d.child(w.h).Link(ctx, w.path, from)
				return err
			})
			if err != nil {
				return undo, err
			}
		}
		had, herr := d.child(w.h).Lookup(ctx, p)
		if err := r.switchName(ctx, work{path: p, h: w.h, attr: w.attr}, from); err != nil {
			if i > 0 {
				d.unlinkPointer(bg, w.h, from)
			}
			return undo, err
		}
		undo = append(undo, func() { r.takeName(bg, w.h, p, l, herr == nil && had.Linkto != "") })
	}
	return undo, nil
}

// takeName undoes giveNames for name p on child t: a pointer to the old
// child again if there was one (there was a pointer, not data, or
// switchName would have refused), else no name.
func (r *rebalancer) takeName(ctx context.Context, t int, p string, l *linked, pointer bool) {
	d := r.d
	if pointer {
		if err := d.placePointer(ctx, t, p, loc{cached: l.c, attr: l.attr}, false); err != nil {
			d.log.Warn("rebalance: pointer not put back", "path", p, "child", d.children[t].ID, "err", err)
		}
		return
	}
	if a, err := d.child(t).Lookup(ctx, p); err == nil && a.Gfid == l.attr.Gfid && a.Linkto == "" {
		d.unlinkPointer(ctx, t, p)
	}
}

// pointAt gives every name of l hashed to a child other than t a pointer
// to t there; what it returns undoes it (the pointer to the old child
// again, or none).
func (r *rebalancer) pointAt(ctx context.Context, l *linked, t int) ([]func(), error) {
	d := r.d
	bg := context.WithoutCancel(ctx)
	var undo []func()
	for _, p := range l.names {
		h := r.hashOf(p)
		if h == t {
			continue
		}
		a, lerr := d.child(h).Lookup(ctx, p)
		switch {
		case lerr == nil && a.Linkto == "":
			return undo, fmt.Errorf("%s: name also on %s (%w)", p, d.children[h].ID, syscall.EEXIST)
		case lerr != nil && !errors.Is(lerr, syscall.ENOENT):
			return undo, lerr
		}
		if err := d.placePointer(ctx, h, p, loc{cached: t, attr: l.attr}, false); err != nil {
			return undo, err
		}
		hadPointer := lerr == nil
		undo = append(undo, func() {
			if hadPointer {
				d.placePointer(bg, h, p, loc{cached: l.c, attr: l.attr}, false) //nolint:errcheck // a pointer left to the target reads as the file there
			} else {
				d.unlinkPointer(bg, h, p)
			}
		})
	}
	return undo, nil
}

// encodeNames encodes paths for a moved command (posix.XattrMigrate).
func encodeNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = base64.RawURLEncoding.EncodeToString([]byte(p))
	}
	return out
}
