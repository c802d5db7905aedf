package distribute

import (
	"context"

	"github.com/mortarfs/mortar/layer"
)

var _ layer.DataLooker = (*Distribute)(nil)

// LookupData is Lookup, plus the content of a small regular file (see
// layer.DataLooker): the lookup on the name's hashed child asks for it.
// The content is given only when that lookup found the file itself; a
// name that is a pointer, or that had to be looked for elsewhere (the
// previous layout during a rebalance, a directory on another child) is
// answered as Lookup would, without content.
func (d *Distribute) LookupData(ctx context.Context, path string, max int) (layer.Attr, []byte, error) {
	var first layer.Attr
	var data []byte
	l, err := d.locateFirst(ctx, path, func(h int) (layer.Attr, error) {
		var err error
		first, data, err = layer.LookupData(ctx, d.child(h), path, max)
		return first, err
	})
	if err == nil && l.attr.IsDir() {
		return d.dirTimes(ctx, path, l), nil, nil
	}
	if err != nil || l.ptr || l.prev || l.cached != l.hashed || l.attr.Gfid != first.Gfid || l.attr.Size != first.Size {
		return l.attr, nil, err
	}
	return l.attr, data, nil
}
