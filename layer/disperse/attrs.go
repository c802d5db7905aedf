package disperse

import (
	"context"

	"github.com/mortarfs/mortar/layer"
)

// The bricks report a regular file's size as the file's (they record it
// with every write), but its blocks are the fragment's: about 1/K of the
// file's. Attributes passing up are scaled so that du(1) shows the space
// the file's data takes, as on a replicated volume.

func (d *Disperse) scale(a layer.Attr, err error) (layer.Attr, error) {
	if err == nil && a.IsReg() {
		a.Blocks *= uint64(d.g.K)
	}
	return a, err
}

func (d *Disperse) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	return d.scale(d.Replicate.Lookup(ctx, path))
}

func (d *Disperse) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	return d.scale(d.Replicate.Mknod(ctx, path, in))
}

func (d *Disperse) Link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	return d.scale(d.Replicate.Link(ctx, oldpath, newpath))
}

func (d *Disperse) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	page, err := d.Replicate.Readdir(ctx, path, cookie, max)
	for i := range page.Entries {
		page.Entries[i].Attr, _ = d.scale(page.Entries[i].Attr, nil)
	}
	return page, err
}
