package distribute

import (
	"context"
	"sync"

	"github.com/mortarfs/mortar/layer"
)

// A directory exists on every child, and each copy's times move with the
// names made and removed on that child only. A directory's lookup asks
// every child and answers the latest times of all (GlusterFS's DHT merges
// them the same way), so that its mtime and ctime move with every name,
// whichever child holds it. A child that does not answer is left out.
func (d *Distribute) dirTimes(ctx context.Context, path string, l loc) layer.Attr {
	a := l.attr
	if !a.IsDir() || len(d.children) < 2 {
		return a
	}
	var mu sync.Mutex
	d.parallel(d.others(l.cached), func(i int) error {
		o, err := d.child(i).Lookup(ctx, path)
		if err == nil && o.IsDir() {
			mu.Lock()
			latestTimes(&a, o)
			mu.Unlock()
		}
		return err
	})
	return a
}

// latestTimes sets each time of a that o has later.
func latestTimes(a *layer.Attr, o layer.Attr) {
	for _, p := range []struct{ to, from *layer.Timespec }{{&a.Atime, &o.Atime}, {&a.Mtime, &o.Mtime}, {&a.Ctime, &o.Ctime}} {
		if after(*p.from, *p.to) {
			*p.to = *p.from
		}
	}
}

func after(x, y layer.Timespec) bool { return x.Sec > y.Sec || x.Sec == y.Sec && x.Nsec > y.Nsec }
