package nlcache

import (
	"context"
	"errors"
	"strings"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// The operations that change names run between begin and end, which keep
// the known directories' names up to date.

// begin counts an operation on the names of dirs under way, on the
// records of them (made if there are none: a listing that starts
// meanwhile then knows not to trust itself), and returns those records.
func (l *Layer) begin(dirs ...string) []*dir {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*dir, len(dirs))
	for i, p := range dirs {
		d := l.dirOf(p)
		d.busy++
		d.gen++
		out[i] = d
	}
	return out
}

// end counts the operation out of the records begin counted it in, marks
// the directories' records of now changed (a listing that overlapped it is
// not used), and lets apply, under l.mu, change what is known by its
// outcome. A record left knowing nothing is dropped.
func (l *Layer) end(counted []*dir, dirs []string, apply func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, d := range counted {
		d.busy--
		if cur := l.dirs[dirs[i]]; cur != nil {
			cur.gen++
		}
	}
	apply()
	for _, p := range dirs {
		if d := l.dirs[p]; d != nil && d.names == nil && d.busy == 0 && !d.listing {
			delete(l.dirs, p)
		}
	}
}

// made records that path exists (it was made, or was there: EEXIST), or
// forgets its directory when err says neither; l.mu is held.
func (l *Layer) made(path string, err error) {
	parent, name := layer.Split(path)
	d := l.dirs[parent]
	switch {
	case d == nil || d.names == nil:
	case err == nil || errors.Is(err, syscall.EEXIST):
		d.names[name] = struct{}{}
	default:
		d.names = nil
	}
}

// gone records that path no longer exists (removed, or was not there),
// or forgets its directory when err says neither; l.mu is held.
func (l *Layer) gone(path string, err error) {
	parent, name := layer.Split(path)
	d := l.dirs[parent]
	switch {
	case d == nil || d.names == nil:
	case err == nil || errors.Is(err, syscall.ENOENT):
		delete(d.names, name)
	default:
		d.names = nil
	}
}

// forgetTree forgets path and every directory below it; l.mu is held.
func (l *Layer) forgetTree(path string) {
	for p := range l.dirs {
		if p == path || strings.HasPrefix(p, path+"/") || path == "/" {
			delete(l.dirs, p)
		}
	}
}

// named runs an operation that makes path.
func (l *Layer) named(path string, op func() error) error {
	parent, _ := layer.Split(path)
	counted := l.begin(parent)
	err := op()
	l.end(counted, []string{parent}, func() { l.made(path, err) })
	return err
}

func (l *Layer) Create(ctx context.Context, path string, in layer.CreateIn) (f layer.File, a layer.Attr, err error) {
	err = l.named(path, func() error {
		f, a, err = l.Child.Create(ctx, path, in)
		return err
	})
	return f, a, err
}

func (l *Layer) Mknod(ctx context.Context, path string, in layer.MknodIn) (a layer.Attr, err error) {
	err = l.named(path, func() error {
		a, err = l.Child.Mknod(ctx, path, in)
		return err
	})
	return a, err
}

func (l *Layer) Symlink(ctx context.Context, path string, in layer.SymlinkIn) (a layer.Attr, err error) {
	err = l.named(path, func() error {
		a, err = l.Child.Symlink(ctx, path, in)
		return err
	})
	return a, err
}

func (l *Layer) Link(ctx context.Context, oldpath, newpath string) (a layer.Attr, err error) {
	err = l.named(newpath, func() error {
		a, err = l.Child.Link(ctx, oldpath, newpath)
		return err
	})
	return a, err
}

// Mkdir makes the directory, which the layer then knows: it has no names.
func (l *Layer) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (a layer.Attr, err error) {
	parent, _ := layer.Split(path)
	counted := l.begin(parent)
	start := l.opts.Now()
	a, err = l.Child.Mkdir(ctx, path, in)
	l.end(counted, []string{parent}, func() {
		l.made(path, err)
		if err == nil {
			l.forgetTree(path)
			d := l.dirOf(path)
			d.names, d.since = map[string]struct{}{}, start
		}
	})
	return a, err
}

func (l *Layer) Unlink(ctx context.Context, path string) error {
	parent, _ := layer.Split(path)
	counted := l.begin(parent)
	err := l.Child.Unlink(ctx, path)
	l.end(counted, []string{parent}, func() { l.gone(path, err) })
	return err
}

func (l *Layer) Rmdir(ctx context.Context, path string) error {
	parent, _ := layer.Split(path)
	counted := l.begin(parent)
	err := l.Child.Rmdir(ctx, path)
	l.end(counted, []string{parent}, func() {
		l.gone(path, err)
		l.forgetTree(path)
	})
	return err
}

// Rename makes the new name; the old one is no longer known absent or
// present (renaming one hard link onto another of the same inode leaves
// both), so lookups of it ask the child. What was known below either
// path is forgotten.
func (l *Layer) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	from, _ := layer.Split(oldpath)
	to, _ := layer.Split(newpath)
	counted := l.begin(from, to)
	err := l.Child.Rename(ctx, oldpath, newpath, flags)
	l.end(counted, []string{from, to}, func() {
		if err != nil {
			l.gone(oldpath, syscall.EIO) // unknown: forget both
			l.made(newpath, syscall.EIO)
		} else {
			l.made(oldpath, nil) // in the set: asked for, never answered absent
			l.made(newpath, nil)
		}
		l.forgetTree(oldpath)
		l.forgetTree(newpath)
	})
	return err
}
