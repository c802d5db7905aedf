package distribute

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Readdir lists the directory on every child at once (each completely,
// concurrently) and merges the listings by name: pointer files are hidden,
// and a name found on several children (a directory, or a file left twice
// by a crash) is shown once, with the attributes from the name's hashed
// child when it has the name. A name whose hashed child lists a pointer
// but whose data no listing shows (a rename moved it while the listings
// were taken) is looked up, so a rename never hides a name from a
// concurrent listing. Entries are sorted by name.
//
// Paging: cookie 0 returns the whole directory with EOF set; any other
// cookie returns an empty page with EOF. The FUSE bridge snapshots a
// directory on opendir, so it never asks for a second page.
//
// A child that is down (ENOTCONN) leaves its names out: the page lists
// what the others hold and says what it lacks in Missing (the mount then
// ends the listing with ENOTCONN after its entries, so that `ls` shows
// them and reports the error, and rsync, rm -r and backups see a read
// error rather than a directory that silently lost a brick's files). The
// listing fails only if no child up holds the directory. Another error of
// a child fails the whole listing. A child that lacks the directory
// itself (ENOENT; it holds no file there then) adds nothing, unless it is
// the directory's hashed child, whose answer is authoritative.
func (d *Distribute) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	if cookie != 0 {
		return layer.DirPage{Next: cookie, EOF: true}, nil
	}
	return d.readdir(ctx, path, true)
}

// readdir lists directory path; with settle, a directory it finds under
// two names (splitdir.go) is settled and the listing taken again.
func (d *Distribute) readdir(ctx context.Context, path string, settle bool) (layer.DirPage, error) {
	h, err := d.hashedChild(ctx, path)
	if err != nil {
		return layer.DirPage{}, err
	}
	lists := make([][]layer.Entry, len(d.children))
	var held atomic.Int32 // children that listed the directory
	errs := d.parallel(d.all(), func(i int) error {
		var err error
		lists[i], err = layer.ReadDirAll(ctx, d.child(i), path)
		if i != h && errors.Is(err, syscall.ENOENT) {
			if d.layout.has(i) {
				d.log.Warn("directory missing on a child", "path", path, "child", d.children[i].ID)
			}
			return nil
		}
		if err == nil {
			held.Add(1)
		}
		return err
	})
	missing := d.leaveOutDown(path, errs, held.Load() > 0)
	if ph, ok := d.prevHashed(path); ok && ph != h && errors.Is(errs[h], syscall.ENOENT) && errs[ph] == nil {
		// A rebalance is under way and the directory's new hashed
		// child does not have it yet (fix-layout makes it): the
		// previous one's answer stands.
		if _, err := d.child(ph).Lookup(ctx, path); err == nil {
			errs[h] = nil
		}
	}
	if err := firstErr(errs, h); err != nil {
		return layer.DirPage{}, d.refine(ctx, path, err)
	}
	lay, err := d.layoutOf(ctx, path)
	if err != nil {
		return layer.DirPage{}, err
	}
	if settle && d.splits(ctx, path, lists) {
		return d.readdir(ctx, path, false)
	}
	entries, orphans := merge(lists, lay)
	entries = append(entries, d.resolvePointers(ctx, path, orphans)...)
	slices.SortFunc(entries, func(a, b layer.Entry) int { return strings.Compare(a.Name, b.Name) })
	return layer.DirPage{Entries: entries, Next: 1, EOF: true, Missing: missing}, nil
}

// leaveOutDown clears the errors of the children that are down, if some
// child listed the directory (held), and returns what the listing then
// lacks (nil: nothing).
func (d *Distribute) leaveOutDown(path string, errs []error, held bool) error {
	if !held {
		return nil
	}
	var down []string
	for i, err := range errs {
		if errors.Is(err, syscall.ENOTCONN) {
			errs[i] = nil
			down = append(down, d.children[i].ID)
		}
	}
	if len(down) == 0 {
		return nil
	}
	d.log.Debug("listing without the names of children that are down", "path", path, "down", down)
	return fmt.Errorf("%s lists without the names on %s: %w", path, strings.Join(down, ", "), syscall.ENOTCONN)
}

// merge combines per-child listings, indexed by child, as Readdir says.
// It also returns the names that have a pointer on their hashed child but
// no data entry in any listing: the listings were taken at slightly
// different moments, and a rename may have moved the data between them.
func merge(lists [][]layer.Entry, lay *layout) (out []layer.Entry, orphans []string) {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out = make([]layer.Entry, 0, n)
	at := make(map[string]int, n)
	var pointers []string
	for i, list := range lists {
		for _, e := range list {
			if strings.HasPrefix(e.Name, migPrefix) {
				continue // a rebalance's copy in the making
			}
			if e.Attr.Linkto != "" {
				if lay.owner(hashName(e.Name)) == i && !strings.HasPrefix(e.Name, tmpPrefix) {
					pointers = append(pointers, e.Name)
				}
				continue
			}
			j, dup := at[e.Name]
			switch {
			case !dup:
				at[e.Name] = len(out)
				out = append(out, e)
			case lay.owner(hashName(e.Name)) == i:
				e, out[j] = out[j], e
				fallthrough
			default:
				// A directory's times are the latest of its copies, as
				// its lookup answers (dirtimes.go).
				if out[j].Attr.IsDir() && e.Attr.IsDir() {
					latestTimes(&out[j].Attr, e.Attr)
				}
			}
		}
	}
	for _, name := range pointers {
		if _, ok := at[name]; !ok {
			orphans = append(orphans, name)
		}
	}
	return out, orphans
}

// resolvePointers looks up, concurrently, the names merge found only as
// pointers, and returns entries for those that exist. Without a race or a
// dangling pointer left by a crash there are none.
func (d *Distribute) resolvePointers(ctx context.Context, dir string, names []string) []layer.Entry {
	found := make([]*layer.Entry, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if l, err := d.locate(ctx, layer.Join(dir, name)); err == nil {
				found[i] = &layer.Entry{Name: name, Attr: l.attr}
			}
		})
	}
	wg.Wait()
	var out []layer.Entry
	for _, e := range found {
		if e != nil {
			out = append(out, *e)
		}
	}
	return out
}
