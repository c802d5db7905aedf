package distribute

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Remaining returns the paths of files (up to limit, at least one) whose
// data is still on the children ids: what a remove-brick must not commit
// with. A walk of the whole namespace cannot tell: a client may rename a
// file into a directory the walk has passed, and its data stays where it
// was. Nothing new lands on a child that owns no range, so once this finds
// nothing the children are drained. It reads only those children's
// directories; pointer files and distribute's temporary names do not
// count. A directory it cannot read is an error: nothing is known then.
func (d *Distribute) Remaining(ctx context.Context, ids []string, limit int) ([]string, error) {
	var idx []int
	for _, id := range ids {
		i, ok := d.byID[id]
		if !ok {
			return nil, fmt.Errorf("distribute: no child %q", id)
		}
		idx = append(idx, i)
	}
	var found []string
	err := d.remainingIn(ctx, idx, "/", max(limit, 1), &found)
	return found, err
}

// remainingIn adds the files of directory dir (and below) on children idx
// to found, until it holds limit.
func (d *Distribute) remainingIn(ctx context.Context, idx []int, dir string, limit int, found *[]string) error {
	lists := make([][]layer.Entry, len(d.children))
	errs := d.parallel(idx, func(i int) error {
		var err error
		lists[i], err = layer.ReadDirAll(ctx, d.child(i), dir)
		if errors.Is(err, syscall.ENOENT) && dir != "/" {
			return nil // gone, or never made there
		}
		return err
	})
	if err := firstErr(errs, -1); err != nil {
		return fmt.Errorf("distribute: read %s: %w", dir, err)
	}
	for _, list := range lists {
		for _, e := range list {
			if !e.Attr.IsDir() && e.Attr.Linkto == "" && !hidden(e.Name) && len(*found) < limit {
				*found = append(*found, layer.Join(dir, e.Name))
			}
		}
	}
	for _, name := range subdirs(lists) {
		if len(*found) >= limit {
			return nil
		}
		if err := d.remainingIn(ctx, idx, layer.Join(dir, name), limit, found); err != nil {
			return err
		}
	}
	return nil
}
