package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Directory renames (Config.DirRenames). A step renames one of the three
// directories /dK to /dK~ and back, through one client, which may die in
// the middle (its links armed to die after a few writes, as in
// crashDuringPut). Both renames done, nothing changed. Otherwise the
// directory may be under either name: its files are in doubt for the
// model, which keeps what they held (movedDir); the directory is not
// renamed again in the run, and after heal exactly one of its two names
// must hold it (once its parent is listed: a rename done on one set of
// the volume and not the other is settled so), with every file it held
// unless the model has learnt otherwise since (checkMoved), and what the
// model learnt since under its old name (checkAll, at finalPath).

// movedDir is a directory a rename left under one of two names.
type movedDir struct {
	dir   string            // /dK; the other name is dir + "~"
	files map[string][]byte // path under dir → content when the rename failed
	at    string            // the name it ends under, after heal (checkMoved)
}

// away is the other name of directory dir.
func away(dir string) string { return dir + "~" }

// movedOf returns the moved directory path is under (nil: none).
func (r *run) movedOf(path string) *movedDir {
	for _, d := range r.moved {
		if strings.HasPrefix(path, d.dir+"/") {
			return d
		}
	}
	return nil
}

// renameDir is the step.
func (r *run) renameDir() error {
	dir := fmt.Sprintf("/d%d", r.rng.IntN(3))
	if r.movedOf(dir+"/x") != nil || r.openUnder(dir) {
		return r.list()
	}
	i, top := r.client()
	dies := r.rng.IntN(2) == 0
	if dies {
		for _, b := range r.w.bricks {
			r.w.net.arm(link{r.w.clients[i].id, b.addr}, r.rng.IntN(6))
		}
		r.rep.Faults["client crash mid-rename of a directory"]++
	}
	r.note("client %d renames %s to %s and back (dies meanwhile: %v)", i, dir, away(dir), dies)
	r.rep.Ops["rename dir"]++
	err := renameThere(top, dir, away(dir))
	if err == nil {
		err = renameThere(top, away(dir), dir)
	}
	if dies {
		if cerr := r.w.crashClient(i); cerr != nil {
			return cerr
		}
	}
	if err != nil {
		r.note("  -> %v", err)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return violated("rename %s hung for %v", dir, opTimeout)
	case !unavailable(err):
		return violated("rename %s: %v", dir, err)
	}
	r.rep.Failed++
	d := &movedDir{dir: dir, files: map[string][]byte{}}
	for _, p := range r.paths {
		if !strings.HasPrefix(p, dir+"/") {
			continue
		}
		if data, ok := r.m.files[p]; ok {
			d.files[p] = data
		}
		r.m.doubt(p)
	}
	r.moved = append(r.moved, d)
	return nil
}

func renameThere(top layer.Layer, from, to string) error {
	ctx, cancel := opCtx()
	defer cancel()
	return top.Rename(ctx, from, to, 0)
}

// openUnder reports whether a client holds a file under dir open.
func (r *run) openUnder(dir string) bool {
	for _, p := range r.paths {
		if strings.HasPrefix(p, dir+"/") && r.heldOpen(p) {
			return true
		}
	}
	return false
}

// finalPath is where path is after heal: under the name its directory
// ends under, if a rename left it under either (checkMoved says which).
// What the model learnt under the old name after the rename failed moves
// with the directory: the rename may take effect when it is settled.
func (r *run) finalPath(path string) string {
	if d := r.movedOf(path); d != nil && d.at != "" {
		return d.at + strings.TrimPrefix(path, d.dir)
	}
	return path
}

// learnt forgets what a moved directory held at path: an operation on it
// was answered since (the model knows, or doubts, it anew).
func (r *run) learnt(paths ...string) {
	for _, p := range paths {
		if d := r.movedOf(p); d != nil {
			delete(d.files, p)
		}
	}
}

// checkMoved checks, after heal, that each moved directory is under one
// of its two names, holding what it held (checkAll reads it under its
// old name; here under the other).
func (r *run) checkMoved() error {
	ctx, cancel := opCtx()
	defer cancel()
	top := r.w.clients[0].graph.Top
	if len(r.moved) > 0 {
		// A listing of the parent settles a directory a rename left under
		// two names on different sets (layer/distribute/splitdir.go).
		if _, err := layer.ReadDirAll(ctx, top, "/"); err != nil {
			return violated("after heal, list /: %v", err)
		}
	}
	for _, d := range r.moved {
		_, herr := top.Lookup(ctx, d.dir)
		_, aerr := top.Lookup(ctx, away(d.dir))
		if herr != nil && !errors.Is(herr, syscall.ENOENT) || aerr != nil && !errors.Is(aerr, syscall.ENOENT) {
			return violated("after heal, %s: %v; %s: %v", d.dir, herr, away(d.dir), aerr)
		}
		if (herr == nil) == (aerr == nil) {
			return violated("after heal, %s is under both or neither of %s and %s (%v, %v)", d.dir, d.dir, away(d.dir), herr, aerr)
		}
		d.at = d.dir
		if aerr == nil {
			d.at = away(d.dir)
		}
		for p, want := range d.files {
			q := r.finalPath(p)
			got, err := readFile(top, q)
			if err != nil || string(got) != string(want) {
				return violated("after heal, %s (moved with %s): %d bytes, %v; want the %d it held", q, d.dir, len(got), err, len(want))
			}
		}
	}
	return nil
}
