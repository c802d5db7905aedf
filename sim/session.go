package sim

import (
	"slices"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// openFile is a file a client holds open across steps (a log, a VM
// image): written now and then, closed later, or left open when its
// client crashes.
type openFile struct {
	path string
	f    layer.File
}

// session opens a file, writes into one held open, or closes one.
func (r *run) session() error {
	i, top := r.client()
	c := r.w.clients[i]
	ctx, cancel := opCtx()
	defer cancel()
	switch {
	case len(c.open) > 0 && r.rng.IntN(3) == 0:
		k := r.rng.IntN(len(c.open))
		f := c.open[k]
		c.open = slices.Delete(c.open, k, k+1)
		r.note("client %d closes %s", i, f.path)
		r.rep.Ops["close"]++
		if err := f.f.Release(ctx); err != nil && !unavailable(err) && !r.allowed("close", err, nil) {
			return violated("close %s: %v", f.path, err)
		}
		return nil
	case len(c.open) > 0:
		f := c.open[r.rng.IntN(len(c.open))]
		old, known := r.m.files[f.path]
		off, data := r.rng.IntN(len(old)+1), r.data()
		r.note("client %d writes %d bytes at %d into open %s", i, len(data), off, f.path)
		_, err := f.f.Write(ctx, data, int64(off))
		return r.changed("write open", err, func() {
			if known {
				r.m.set(f.path, pwrite(old, data, off))
			}
		}, f.path)
	case len(c.open) < 2:
		p := r.free()
		r.note("client %d opens %s", i, p)
		exists, known := r.m.known(p)
		f, _, err := top.Create(ctx, p, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
		if err == nil {
			c.open = append(c.open, &openFile{path: p, f: f})
		}
		return r.changed("open", err, func() {
			if known && !exists {
				r.m.set(p, nil)
			}
		}, p)
	}
	return nil
}
