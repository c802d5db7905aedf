// Package nlcache is a client-side layer that answers lookups of names a
// directory does not have without asking the bricks (GlusterFS's
// nl-cache): a file created in a directory this client knows costs the
// create's round trip, not a lookup's first.
//
// # What it knows
//
// The layer knows every name of a directory it made (Mkdir: empty), or
// listed whole (after a lookup the bricks answered ENOENT in it, it lists
// the directory, at most once per Timeout). It keeps that
// set up to date with the names its own operations make and remove
// (create, mknod, mkdir, symlink, link, unlink, rmdir, rename). A lookup
// of a name the set lacks, in a directory known for less than Timeout,
// fails with ENOENT at once; every other lookup goes to the child.
//
// # How fresh
//
// A name made by another client (another mount) may be answered ENOENT
// for at most Timeout after this client made or listed the directory: the
// same bound the kernel's entry cache (performance.entry-timeout) puts on
// a name removed elsewhere. Making that name here is still right: a
// create or mkdir of it reaches the bricks, which answer EEXIST (or open
// the file, without O_EXCL). Names made and removed through this layer
// are never missed: an operation that may have changed a directory's
// names without the layer knowing how (an error other than EEXIST or
// ENOENT) forgets the directory, and a listing that overlapped an
// operation of this layer on the directory is not used.
//
// Directories of more than MaxNames names are not kept; nor more than
// MaxDirs directories (the oldest known go first).
package nlcache

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// Defaults of Options.
const (
	DefaultTimeout  = time.Second
	DefaultMaxNames = 10000
	DefaultMaxDirs  = 256
)

// Options tune the layer; zero values take the defaults.
type Options struct {
	// Timeout is how long what the layer learnt of a directory from the
	// bricks is trusted.
	Timeout  time.Duration
	MaxNames int
	MaxDirs  int
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Layer is the negative-lookup cache over its child.
type Layer struct {
	layer.Base
	opts Options

	mu   sync.Mutex
	dirs map[string]*dir
	// big are directories found to hold more than MaxNames names: never
	// listed again (a record evicted would otherwise be relisted whole at
	// the next lookup of a missing name). Bounded by maxBig.
	big map[string]struct{}
}

// maxBig bounds the directories remembered as too big to keep.
const maxBig = 4096

// dir is what the layer knows of one directory.
type dir struct {
	names map[string]struct{} // nil: the names are not known
	since time.Time           // when the bricks last told every name
	// busy counts this layer's operations on the directory's names under
	// way; gen counts those begun. A listing is used only if neither
	// moved while it ran.
	busy, gen int
	listing   bool // a listing runs
}

// New returns the layer over child.
func New(child layer.Layer, opts Options) *Layer {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxNames <= 0 {
		opts.MaxNames = DefaultMaxNames
	}
	if opts.MaxDirs <= 0 {
		opts.MaxDirs = DefaultMaxDirs
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Layer{Base: layer.Base{Child: child}, opts: opts, dirs: map[string]*dir{}, big: map[string]struct{}{}}
}

// Lookup answers ENOENT for a name a known directory lacks, and asks the
// child for every other.
func (l *Layer) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	parent, name := layer.Split(path)
	if path != "/" && l.absent(parent, name) {
		return layer.Attr{}, syscall.ENOENT
	}
	a, err := l.Child.Lookup(ctx, path)
	if errors.Is(err, syscall.ENOENT) && path != "/" {
		l.learn(parent)
	}
	return a, err
}

// absent reports whether dir is known, freshly, to lack name.
func (l *Layer) absent(dir, name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dirs[dir]
	if d == nil || d.names == nil || l.opts.Now().Sub(d.since) >= l.opts.Timeout {
		return false
	}
	_, ok := d.names[name]
	return !ok
}

// learn lists dir whole, unless it is known and fresh or being listed,
// and trusts the listing if none of this layer's operations on the
// directory ran meanwhile.
func (l *Layer) learn(path string) {
	l.mu.Lock()
	d := l.dirOf(path)
	now := l.opts.Now()
	_, big := l.big[path]
	if d.listing || big || d.names != nil && now.Sub(d.since) < l.opts.Timeout {
		l.mu.Unlock()
		return
	}
	d.listing = true
	gen, busy := d.gen, d.busy
	l.mu.Unlock()
	names, err := l.list(path)
	l.mu.Lock()
	defer l.mu.Unlock()
	d.listing = false
	switch {
	case errors.Is(err, errTooBig):
		d.names = nil
		if len(l.big) >= maxBig {
			clear(l.big)
		}
		l.big[path] = struct{}{}
	case err == nil && busy == 0 && d.busy == 0 && d.gen == gen:
		d.names, d.since = names, now
	}
}

// errTooBig: a directory has more than MaxNames names.
var errTooBig = errors.New("too many names")

// list reads every name of dir, giving up past MaxNames.
func (l *Layer) list(dir string) (map[string]struct{}, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := map[string]struct{}{}
	for cookie := uint64(0); ; {
		page, err := l.Child.Readdir(ctx, dir, cookie, 1024)
		if err == nil {
			err = page.Missing // names it cannot see must not be denied
		}
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entries {
			names[e.Name] = struct{}{}
		}
		if len(names) > l.opts.MaxNames {
			return nil, errTooBig
		}
		if page.EOF || len(page.Entries) == 0 {
			return names, nil
		}
		cookie = page.Next
	}
}

// dirOf returns what is known of path, making room for it; l.mu is held.
func (l *Layer) dirOf(path string) *dir {
	if d := l.dirs[path]; d != nil {
		return d
	}
	if len(l.dirs) >= l.opts.MaxDirs {
		l.evict()
	}
	d := &dir{}
	l.dirs[path] = d
	return d
}

// evict forgets the idle directory known the longest; l.mu is held.
func (l *Layer) evict() {
	var oldest string
	var at time.Time
	for p, d := range l.dirs {
		if d.busy == 0 && !d.listing && (oldest == "" || d.since.Before(at)) {
			oldest, at = p, d.since
		}
	}
	if oldest != "" {
		delete(l.dirs, oldest)
	}
}
