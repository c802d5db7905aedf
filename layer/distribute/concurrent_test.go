package distribute

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// TestRenameNeverHidesTarget: while files hashed to every child are
// renamed over d again and again (d's inode moving between its hashed
// child, the source's child and a third child), Lookup and Readdir of d
// never miss it.
func TestRenameNeverHidesTarget(t *testing.T) {
	r := newRig(t, 3, nil)
	d := r.name("/", "d", 1)
	srcs := []string{r.name("/", "s", 0), r.name("/", "s", 1), r.name("/", "s", 2)}
	r.write(d, "initial")
	var stop atomic.Bool
	var misses, listMisses atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			if _, err := r.d.Lookup(r.ctx, d); err != nil {
				misses.Add(1)
			}
		}
	})
	wg.Go(func() {
		for !stop.Load() {
			es, err := layer.ReadDirAll(r.ctx, r.d, "/")
			if err != nil {
				listMisses.Add(1)
				continue
			}
			n := 0
			for _, e := range es {
				if "/"+e.Name == d {
					n++
				}
			}
			if n != 1 {
				listMisses.Add(1)
			}
		}
	})
	for i := range 150 {
		s := srcs[(i*7)%3]
		r.write(s, fmt.Sprint(i))
		if err := r.d.Rename(r.ctx, s, d, 0); err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("rename %d: %v", i, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if misses.Load() != 0 {
		t.Errorf("%d lookups of %s failed during renames", misses.Load(), d)
	}
	if listMisses.Load() != 0 {
		t.Errorf("%d listings did not show %s exactly once during renames", listMisses.Load(), d)
	}
	if got := r.read(d); got != "149" {
		t.Errorf("final content %q", got)
	}
	for _, s := range srcs {
		r.wantDisk(s, "", "", "")
	}
}

// TestConcurrentNamespace: goroutines create, rename, link and unlink
// their own names in one directory at once; the result is exact.
func TestConcurrentNamespace(t *testing.T) {
	r := newRig(t, 3, nil)
	_, err := r.d.Mkdir(r.ctx, "/d", layer.MkdirIn{Mode: 0o755})
	r.ok(err, "mkdir")
	const workers, rounds = 6, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				a := fmt.Sprintf("/d/w%d-a%d", w, i)
				b := fmt.Sprintf("/d/w%d-b%d", w, i)
				c := fmt.Sprintf("/d/w%d-c%d", w, i)
				f, _, err := r.d.Create(r.ctx, a, layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
				if err == nil {
					_, err = f.Write(r.ctx, []byte(b), 0)
					f.Release(r.ctx)
				}
				if err == nil {
					err = r.d.Rename(r.ctx, a, b, 0)
				}
				if err == nil {
					_, err = r.d.Link(r.ctx, b, c)
				}
				if err == nil && i%2 == 0 {
					err = r.d.Unlink(r.ctx, c)
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	names := r.names("/d")
	if len(names) != workers*rounds*3/2 {
		t.Errorf("%d names, want %d", len(names), workers*rounds*3/2)
	}
	for w := range workers {
		for i := range rounds {
			b := fmt.Sprintf("/d/w%d-b%d", w, i)
			a, err := r.d.Lookup(r.ctx, b)
			r.ok(err, "lookup")
			if want := uint32(1 + i%2); a.Nlink != want {
				t.Errorf("%s: nlink %d, want %d", b, a.Nlink, want)
			}
			if got := r.read(b); got != b {
				t.Errorf("%s: content %q", b, got)
			}
		}
	}
}
