package heal

import (
	"context"
	"errors"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// A directory has one name. A rename of one that some replicas did and
// others did not, with nothing blaming anybody (the client went away
// between them, and the bricks marked the directories it changed Dirty),
// leaves its copies listing it under two names, or in two directories.
// Given to every copy as other names are, it would be a second
// directory of one gfid on each. Replicate renames a directory on the
// first replica up (the decider) before it sends the rename to the
// others (layer/replicate/rename.go): the decider's name is the one the
// rename reached. So the heal of a Dirty directory gives the others the
// decider's name for such a directory, moving their copy there (reuse,
// moveHere), and does not give them the other names (undecided).

// undecided returns the names in directory path's copies (the members of
// set si) that the heal of a Dirty directory must not give to other
// copies: the names of a directory listed under other names, or not at
// all, by other copies, which its decider (the first good copy holding
// it) holds under another name or in another directory. The decider's
// name here is placed as any name is, moving the others' copies to it;
// a name in another directory is its heal's (the decider's copy of that
// directory is Dirty too).
func (h *Healer) undecided(ctx context.Context, si int, members replicate.Mask, hint *dirHint) map[string]bool {
	skip := map[string]bool{}
	for g, names := range hint.dirNames(members) {
		if names.agree(members) {
			continue
		}
		keep, found := h.decidersName(ctx, si, g, names, members&hint.good)
		if !found {
			continue
		}
		for _, n := range names {
			if n != "" && n != keep {
				h.log.Debug("a directory's other name left to its decider's", "name", n, "gfid", g, "decider's", keep)
				skip[n] = true
			}
		}
	}
	return skip
}

// dirNames is a directory's name in each copy of its parent ("": not
// listed).
type dirNames []string

// agree reports whether every member lists the directory under one name.
func (n dirNames) agree(members replicate.Mask) bool {
	first := n[members.First()]
	for r := range n {
		if members.Has(r) && (n[r] == "" || n[r] != first) {
			return false
		}
	}
	return true
}

// dirNames returns, for each directory some member's copy lists, its
// name in every copy.
func (d *dirHint) dirNames(members replicate.Mask) map[layer.Gfid]dirNames {
	out := map[layer.Gfid]dirNames{}
	for r, l := range d.lists {
		if !members.Has(r) {
			continue
		}
		for name, e := range l {
			if !e.Attr.IsDir() {
				continue
			}
			if out[e.Attr.Gfid] == nil {
				out[e.Attr.Gfid] = make(dirNames, len(d.lists))
			}
			out[e.Attr.Gfid][r] = name
		}
	}
	return out
}

// decidersName returns directory g's name in the decider's copy ("": the
// decider holds it in another directory), the decider being the first of
// cand listing it or holding it by its id; found is false if none does.
func (h *Healer) decidersName(ctx context.Context, si int, g layer.Gfid, names dirNames, cand replicate.Mask) (name string, found bool) {
	for r := range names {
		if !cand.Has(r) {
			continue
		}
		if names[r] != "" {
			return names[r], true
		}
		if a, err := h.sets[si][r].Layer.Lookup(ctx, layer.IDPath(g)); err == nil && a.IsDir() {
			return "", true
		}
	}
	return "", false
}

// moveHere gives sink s directory want at path by moving the sink's copy
// of it from where the sink holds it (layer.XattrPath), rather than make
// a second directory of its gfid. held is false if the sink holds no
// directory of that gfid; err is set if it holds one it could not move
// (a move into its own subtree, or a name taken meanwhile): the heal
// fails and is tried again.
func (h *Healer) moveHere(ctx context.Context, si, s int, path string, want layer.Attr) (held bool, err error) {
	l := h.sets[si][s].Layer
	id := layer.IDPath(want.Gfid)
	if a, err := l.Lookup(ctx, id); errors.Is(err, syscall.ENOENT) || err == nil && !a.IsDir() {
		return false, nil
	} else if err != nil {
		return true, err
	}
	from, err := l.Getxattr(ctx, id, layer.XattrPath)
	if err != nil {
		return true, err
	}
	err = layer.RenameSource(ctx, l, string(from), path, layer.RenameNoReplace, want.Gfid)
	h.log.Debug("a directory moved to where the good copies hold it", "replica", h.sets[si][s].Name,
		"from", string(from), "to", path, "err", err)
	return true, err
}
