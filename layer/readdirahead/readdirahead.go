// Package readdirahead is a client-side layer that lists the directories
// of a tree being walked before they are asked for (GlusterFS's
// readdir-ahead and parallel-readdir, for whole trees): `find`, `ls -lR`,
// `du` and backups list one directory after another and wait for each, a
// round trip to every brick of the volume per directory.
//
// # When it reads ahead
//
// A walk is under way when a directory is listed while its parent's
// listing is fresh (less than Timeout old). The layer then lists, in the
// background and at most Parallel at once, the subdirectories the listing
// shows and its siblings (the parent's other subdirectories) that this walk
// has not listed yet, at most perWalk more per listing. A listing of such a
// directory (from offset 0) that comes while the one read ahead is under
// way waits for it; one read ahead is served once, and only if it is
// younger than Timeout; older ones are dropped. A directory listed while
// its parent's listing is not fresh starts nothing.
//
// # How fresh
//
// A listing served from memory is at most Timeout old: a name made,
// removed or changed through another client may be missed for that long,
// the bound the kernel's attribute and entry caches already put on every
// name (with features.cache-invalidation, a notice forgets the directory
// at once). Changes made through this layer are never missed: a name made,
// removed, renamed or changed forgets the listings of its directory and of
// the directory above (whose listing shows the directory's times and link
// count), and for a directory those of the tree below it, when it ends,
// whether the listing is kept, still being read, or awaited; a write, a
// truncation or an
// attribute change through an open file forgets every listing (the file
// may have been renamed since it was opened). Listings that lack a brick
// that is down (DirPage.Missing) are never kept.
package readdirahead

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// Defaults of Options.
const (
	DefaultTimeout  = time.Second
	DefaultParallel = 4
)

// Bounds on what the layer holds: listings pending or kept, the entries
// of the kept ones, the entries of one listing worth keeping, and the
// directories remembered as listed (to notice a walk).
const (
	maxAhead      = 256
	maxEntries    = 1 << 16
	maxListing    = 10000
	maxListed     = 4096
	perWalk       = 16
	fetchDeadline = 30 * time.Second
)

// Options tune the layer; zero values take the defaults.
type Options struct {
	// Timeout is how long a listing read ahead may be served after it
	// was taken, and how long a listing counts as fresh to notice a walk.
	Timeout time.Duration
	// Parallel bounds the listings read ahead at once.
	Parallel int
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Layer reads listings ahead over its child.
type Layer struct {
	layer.Base
	opts   Options
	sem    chan struct{}
	wg     sync.WaitGroup
	ctx    context.Context // of the listings read ahead; Close cancels it
	cancel context.CancelFunc

	mu      sync.Mutex
	ahead   map[string]*pending // listings read ahead, by directory
	listed  map[string]listed   // directories listed lately
	entries int                 // entries of the kept listings
	closed  bool
}

// listed is when a directory was last listed and its subdirectories'
// names.
type listed struct {
	at      time.Time
	subdirs []string
}

// pending is a listing read ahead: queued, under way or kept. Only one
// in the map may be served; a change drops it from the map.
type pending struct {
	done    chan struct{} // closed once the listing ended (or never started)
	started bool
	at      time.Time
	page    layer.DirPage
	ok      bool // it came whole, and its entries are counted
}

var (
	_ layer.Layer     = (*Layer)(nil)
	_ layer.Forgetter = (*Layer)(nil)
	_ layer.Syncer    = (*Layer)(nil)
)

// New returns the layer over child.
func New(child layer.Layer, opts Options) *Layer {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultParallel
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Layer{Base: layer.Base{Child: child}, opts: opts, sem: make(chan struct{}, opts.Parallel),
		ctx: ctx, cancel: cancel, ahead: map[string]*pending{}, listed: map[string]listed{}}
}

// Close stops reading ahead, cancels the listings under way and waits
// for them.
func (l *Layer) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
}

// Readdir serves a whole listing read ahead, or asks the child; either
// way it notes the listing, and reads on if a walk is under way.
func (l *Layer) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	if cookie != 0 {
		return l.Child.Readdir(ctx, path, cookie, max)
	}
	page, ok := l.take(ctx, path)
	if !ok {
		var err error
		if page, err = l.Child.Readdir(ctx, path, cookie, max); err != nil {
			return page, err
		}
	}
	if page.EOF {
		l.walked(path, page.Entries)
	}
	return page, nil
}

// take removes path's listing read ahead and returns it if it may be
// served, waiting for it if it is under way (it stays where a change can
// forget it meanwhile); a queued one is dropped.
func (l *Layer) take(ctx context.Context, path string) (layer.DirPage, bool) {
	l.mu.Lock()
	p := l.ahead[path]
	if p != nil && !p.started {
		l.drop(path, p)
	}
	l.mu.Unlock()
	if p == nil || !p.started {
		return layer.DirPage{}, false
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return layer.DirPage{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ahead[path] != p { // forgotten, or taken by another listing
		return layer.DirPage{}, false
	}
	ok := p.ok && l.opts.Now().Sub(p.at) < l.opts.Timeout
	l.drop(path, p)
	return p.page, ok
}

// drop removes p, path's listing, from the map: whatever it brings or
// holds is never served (a listing under way, or awaited, is served only
// from the map); l.mu is held.
func (l *Layer) drop(path string, p *pending) {
	delete(l.ahead, path)
	if p.ok {
		l.entries -= len(p.page.Entries)
		p.ok = false
	}
}

// walked notes that path was listed with entries, and if its parent was
// listed lately, reads ahead its subdirectories and its siblings.
func (l *Layer) walked(path string, entries []layer.Entry) {
	now := l.opts.Now()
	var subdirs []string
	for _, e := range entries {
		if e.Attr.IsDir() {
			subdirs = append(subdirs, e.Name)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	parent, _ := layer.Split(path)
	up, walking := l.listed[parent]
	walking = walking && path != "/" && now.Sub(up.at) < l.opts.Timeout
	l.note(path, listed{at: now, subdirs: subdirs})
	if !walking || l.closed {
		return
	}
	l.expire(now)
	budget := perWalk
	for _, name := range subdirs {
		l.readAhead(layer.Join(path, name), now, &budget)
	}
	for _, name := range up.subdirs {
		l.readAhead(layer.Join(parent, name), up.at, &budget)
	}
}

// expire drops the listings read ahead that are too old to serve; l.mu
// is held.
func (l *Layer) expire(now time.Time) {
	for d, p := range l.ahead {
		if p.started && now.Sub(p.at) >= l.opts.Timeout {
			l.drop(d, p)
		}
	}
}

// note remembers that path was listed; l.mu is held.
func (l *Layer) note(path string, d listed) {
	if _, ok := l.listed[path]; !ok && len(l.listed) >= maxListed {
		for p, o := range l.listed {
			if d.at.Sub(o.at) >= l.opts.Timeout || len(l.listed) >= maxListed {
				delete(l.listed, p)
			}
		}
	}
	l.listed[path] = d
}

// readAhead queues a listing of path unless one is pending or path was
// listed after since (its parent's listing: this walk has been there),
// room and budget allowing; l.mu is held.
func (l *Layer) readAhead(path string, since time.Time, budget *int) {
	if _, ok := l.ahead[path]; ok || *budget <= 0 || len(l.ahead) >= maxAhead || l.entries >= maxEntries {
		return
	}
	if d, ok := l.listed[path]; ok && !d.at.Before(since) {
		return
	}
	*budget--
	p := &pending{done: make(chan struct{})}
	l.ahead[path] = p
	l.wg.Add(1)
	go l.fetch(path, p)
}

// fetch lists path for p once a slot is free, unless p was taken or
// forgotten meanwhile.
func (l *Layer) fetch(path string, p *pending) {
	defer l.wg.Done()
	defer close(p.done)
	l.sem <- struct{}{}
	defer func() { <-l.sem }()
	l.mu.Lock()
	if l.ahead[path] != p || l.closed { // taken or forgotten before it started
		l.mu.Unlock()
		return
	}
	p.started, p.at = true, l.opts.Now()
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(l.ctx, fetchDeadline)
	defer cancel()
	page, err := l.Child.Readdir(ctx, path, 0, maxListing)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ahead[path] != p {
		return // forgotten meanwhile
	}
	if err != nil || !page.EOF || page.Missing != nil || len(page.Entries) > maxListing {
		l.drop(path, p)
		return
	}
	p.page, p.ok = page, true
	l.entries += len(page.Entries)
}

// forget drops the listings of the directory of each path and of the
// directory above it, and of the trees at the paths that are directories;
// l.mu is held.
func (l *Layer) forget(paths ...string) {
	for _, path := range paths {
		parent, _ := layer.Split(path)
		grand, _ := layer.Split(parent)
		for d, p := range l.ahead {
			if d == parent || d == grand || under(d, path) {
				l.drop(d, p)
			}
		}
	}
}

// under reports whether d is path or below it.
func under(d, path string) bool {
	return path == "/" || d == path || strings.HasPrefix(d, path) && d[len(path)] == '/'
}

// forgetAll drops every listing; l.mu is held.
func (l *Layer) forgetAll() {
	for d, p := range l.ahead {
		l.drop(d, p)
	}
}

// changed runs a change through the layer on paths, then forgets what
// it may have made stale (see forget).
func changed[T any](l *Layer, run func() (T, error), paths ...string) (T, error) {
	v, err := run()
	l.mu.Lock()
	l.forget(paths...)
	l.mu.Unlock()
	return v, err
}

// changedErr is changed for a change that returns only an error.
func changedErr(l *Layer, run func() error, paths ...string) error {
	_, err := changed(l, func() (struct{}, error) { return struct{}{}, run() }, paths...)
	return err
}

// Forget takes in a change another client made.
func (l *Layer) Forget(c layer.Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.All {
		l.forgetAll()
		return
	}
	l.forget(c.Path)
}

// Sync passes on (layer.Syncer).
func (l *Layer) Sync(ctx context.Context) error { return layer.Sync(ctx, l.Child) }

// writes reports whether open flags may change the file.
func writes(flags uint32) bool {
	return flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC) != 0
}
