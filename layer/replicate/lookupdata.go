package replicate

import (
	"context"

	"github.com/mortarfs/mortar/layer"
)

var _ layer.DataLooker = (*Replicate)(nil)

// LookupData is Lookup, plus the content of a small regular file (see
// layer.DataLooker). The replica an open for reading would read from is
// asked for LookupData, the others for Lookup, all in the one parallel
// round trip a Lookup takes. The content is given only if the verdict
// judges that replica's copy good and its gfid and size are the
// verdict's; otherwise the verdict's attributes go alone, and the caller
// opens and reads as usual (from a good copy).
func (r *Replicate) LookupData(ctx context.Context, path string, max int) (layer.Attr, []byte, error) {
	key := pathKey(path)
	return r.LookupDataFrom(ctx, path, func(m Mask) int { return r.pick(m, key) },
		func(l layer.Layer) (layer.Attr, []byte, error) { return layer.LookupData(ctx, l, path, max) })
}

// LookupDataFrom is LookupData with the content asked by get of the
// replica from chooses among those up (-1: none): disperse asks its first
// data brick for its fragment.
func (r *Replicate) LookupDataFrom(ctx context.Context, path string, from func(up Mask) int,
	get func(l layer.Layer) (layer.Attr, []byte, error)) (layer.Attr, []byte, error) {
	src := -1
	var data []byte
	v, copies, err := r.judgeAs(ctx, path, true, func(m Mask, i int) (layer.Attr, error) {
		if i != from(m) {
			return r.children[i].Layer.Lookup(ctx, path)
		}
		src = i // only this replica's goroutine writes src and data
		a, d, err := get(r.children[i].Layer)
		data = d
		return a, err
	})
	a, err := r.lookedUp(path, v, err)
	if err != nil || src < 0 || !v.Good.Has(src) {
		return a, nil, err
	}
	if c := copies[src].Attr; c.Gfid != a.Gfid || c.Size != a.Size {
		return a, nil, nil
	}
	return a, data, nil
}
