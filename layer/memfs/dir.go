package memfs

import (
	"context"
	"slices"
	"sort"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// defaultPage is the page size of a Readdir that gives none (as posix).
const defaultPage = 1024

// dir holds a directory's entries in the order they were made. Each has a
// cookie (seq) that is its own for as long as the entry is there: a
// listing resumes after the cookie of the last entry it returned, and so
// lists each entry that stays in the directory once, whatever is added
// or removed between its pages.
type dir struct {
	byName map[string]*dirent
	order  []*dirent // by seq, with the removed ones not yet compacted
	seq    uint64    // the last cookie given
	gone   int       // removed entries in order
}

type dirent struct {
	name    string
	ino     *inode
	seq     uint64
	removed bool
}

func newDir() *dir { return &dir{byName: map[string]*dirent{}} }

func (d *dir) get(name string) *inode {
	if e := d.byName[name]; e != nil {
		return e.ino
	}
	return nil
}

func (d *dir) len() int { return len(d.byName) }

func (d *dir) add(name string, ino *inode) {
	d.seq++
	e := &dirent{name: name, ino: ino, seq: d.seq}
	d.byName[name] = e
	d.order = append(d.order, e)
}

// remove marks the entry removed, and compacts order once half of it is:
// removing each entry of a large directory in turn (rm -rf) stays linear.
func (d *dir) remove(name string) {
	d.byName[name].removed = true
	delete(d.byName, name)
	if d.gone++; d.gone > len(d.order)/2 {
		d.order = slices.DeleteFunc(d.order, func(e *dirent) bool { return e.removed })
		d.gone = 0
	}
}

// after returns the entries made after cookie, removed ones included.
func (d *dir) after(cookie uint64) []*dirent {
	i := sort.Search(len(d.order), func(i int) bool { return d.order[i].seq > cookie })
	return d.order[i:]
}

// Readdir lists up to max entries of the directory at path made after
// cookie, with their attributes and a symlink's target. Next is the
// cookie of the last entry listed; EOF says none is left.
func (fs *FS) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	return on(fs, path, func(ino *inode) (layer.DirPage, error) {
		if !ino.isDir() {
			return layer.DirPage{}, syscall.ENOTDIR
		}
		if max <= 0 {
			max = defaultPage
		}
		page := layer.DirPage{Next: cookie, EOF: true}
		for _, e := range ino.dir.after(cookie) {
			if e.removed {
				continue
			}
			if len(page.Entries) == max {
				page.EOF = false
				break
			}
			page.Entries = append(page.Entries, layer.Entry{Name: e.name, Attr: e.ino.attr(), Target: e.ino.target})
			page.Next = e.seq
		}
		return page, nil
	})
}
