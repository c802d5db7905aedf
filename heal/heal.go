// Package heal is mortar's self-heal engine: it brings the replicas of a
// replicated volume back in line after some of them missed operations.
//
// # What it reads
//
// All its state is on the bricks (see layer.HealStore): a brick that did an
// operation some replicas of its set missed marks the changed inode as
// pending for them (the inode itself for data, attribute and xattr changes,
// the parent directory for changes of names) and lists it in its heal
// index. The healer scans the index of every reachable replica, heals each
// listed inode from a good copy, and clears the marks. Restarting the
// process simply rescans: heals are resumable, and healing an inode that is
// already healthy changes nothing and clears its marks.
//
// # Healing one inode
//
// Every reachable replica of the set is looked up at the path, and the
// parent directory too: replicas the parent's copies blame have a stale view
// of names in it and are distrusted. replicate.Judge then says which copies
// are good and which are sinks. For each sink, from a good source:
//
//   - a missing name, or another inode under the name, is replaced by the
//     source's inode created with the same gfid, type, mode and owner
//     (within a directory heal, a same-gfid name on the sink is renamed
//     or hard-linked instead of copied; a directory the sink holds
//     anywhere is moved there, never made twice, and judged again with
//     its own marks: dirname.go);
//   - directories get their names healed: names only on the sink are
//     removed, missing names created, each with its subtree; directories
//     that blame each other (replicate.Verdict.Merge) get the union of
//     their names, less those a copy recorded as removed while the others
//     missed it (layer.HealStore.Removed, replicate.Gone): a name made on
//     one copy is kept, one removed on one copy stays removed; a name
//     only sinks have is removed (its inode parked by its id while another
//     replica holds it), unless it is its inode's last name anywhere, a
//     trusted replica holds the inode parked and the record of a rename
//     done by too few replicas (layer.XattrRenamed) names it: such a
//     rename, taken as done in one directory and as undone in the other,
//     is then undone or done in both (keepLastName; restoreRenamed when
//     heal replaces it under its new name with the old target); a name
//     that some replicas hold only by a rename the client was told was
//     refused (its record says so) is judged by the others (refused.go);
//   - regular files get their data compared in 1 MiB chunks, and only the
//     chunks that differ are written (never on an arbiter, which holds no
//     data, and never from one);
//   - then user xattrs, mode, owner and times.
//
// An index heal only changes replicas the marks blame (on the inode or on
// its parent): a copy nobody blames that differs may be a client's
// operation still under way. Full heals every difference. One exception:
// a regular file marked layer.Dirty by the bricks of a replicated set (a
// client went away with it written) has its copies compared once it is
// quiet, the biggest as the source, of one size the one reads take
// (abandoned.go); a directory a client went away from has the names its
// copies hold given to all, but a directory listed in it under two names
// (a rename half done) goes to where the set's first replica holding it
// has it, which replicate renames first (dirname.go).
//
// Before a sink is written the good copies are marked as blaming it (if not
// already), so an interrupted heal is never mistaken for a finished one; the
// marks are cleared afterwards only if the source did not change meanwhile
// (its ctime), otherwise the next scan heals again. A sink is never written
// from a blamed copy, and a good copy is never deleted from.
//
// # Split-brain
//
// Copies that blame each other (or disagree on identity with nobody to
// decide) are in split-brain: they are left alone and reported by
// SplitBrain and Info, unless Options.Policy picks a favourite child, or an
// operator resolves them with Resolve.
//
// # What it does not do
//
// Heal works by path (there is no open-by-gfid on the bricks). The bricks
// keep their index entries in line with renames (the entry of a renamed
// inode, and of everything under a renamed directory, takes the new
// path), best effort: an entry can still name a path a rename took away
// (the brick died between the two, or the entry was being rewritten). Such
// an entry is dropped after its nearest existing ancestor is healed, or
// followed to a new name in the same directory; the inode keeps its marks
// (so reads stay correct). If a sink missed the rename, healing the
// directory that holds the new name finds the inode: a directory the sink
// has under its old name in the same parent is renamed there and its
// whole subtree visited for marks; a name new to the sink's directory
// (moved from another one) is created, a directory with everything under
// it, copied in full, and the old name removed. Otherwise only the next
// Full crawl finds it.
//
// Heals do not lock out clients: a change that lands on a good copy while
// it is healed is caught by the ctime check on the source (a directory
// that keeps changing is healed again with its names held still on the
// bricks, layer.EntryLocker). A client's operation on a name can reach a
// sink before the heal looks and the good copies only after it is done
// (held back by the hold, or late): so a directory whose names the heal
// changed on a sink (made, renamed, linked or removed) stays blamed for
// that sink until a later pass changes none (Run scans again at once). A
// client creating a name at the very moment the healer creates it may see
// EEXIST.
//
// # Several healers
//
// Every node serving a brick of a volume runs a healer of it; with
// Options.Active and Options.Lease a healer heals only the sets it is
// active for, and only while it holds the heal lease of most of a set's
// bricks (see lease.go), so two never heal one set at once. A full heal
// also repairs regular files whose copies no mark blames but differ in
// size, from the copies of a strict majority (sizesDiffer).
package heal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// Replica is one brick of a replica set, as the healer reaches it: the
// same description replicate uses. Name ("host:/path") is used in reports
// and by Resolve; Layer must also implement layer.HealStore (a
// *protocol.Client or a *posix.Store do).
type Replica = replicate.Child

// Set is a replica set: bit i of a pending mask is Set[i].
type Set []Replica

// Options configure a Healer.
type Options struct {
	// Interval is the period of index scans in Run (default 2s).
	Interval time.Duration
	// Policy resolves split-brains automatically by picking a favourite
	// child: "" or "none" (leave them), "mtime" (newest mtime), "size"
	// (biggest), "majority" (the size and mtime a strict majority of the
	// copies share). Resolve's names "latest-mtime" and "bigger-file" are
	// accepted too.
	Policy string
	// Manual makes Run scan only on Trigger, not every Interval nor when
	// it starts.
	Manual bool
	// Workers is how many heals run in parallel (default 8).
	Workers int
	// Logger receives what the healer does (Debug) and what it cannot do
	// (Warn); nil discards.
	Logger *slog.Logger
	// Data, when set, heals the data of regular files instead of copying
	// it from one good copy: for sets whose bricks hold fragments, not
	// copies (disperse).
	Data DataHealer
	// Active, when set, says whether this healer is to heal set i now
	// (scans and full crawls): several nodes' healers of one volume,
	// one of them active (see lease.go).
	Active func(set int) bool
	// Lease makes scans and full crawls of a set wait until this healer
	// holds the heal lease of most of its bricks (see lease.go).
	Lease bool
	// Quiet is how long a replicated file that a client went away from
	// with writes (marked layer.Dirty by its bricks) must have gone
	// unchanged on every copy before its copies are compared and made
	// equal (default DefaultQuiet; see abandoned.go).
	Quiet time.Duration
	// Quorate, when set, is the rule the clients apply to set i's
	// changes: whether the replicas in m make a quorum (for a volume,
	// volume.Spec.Quorate). Copies that blame each other are then judged
	// by what a quorum may have done (replicate.JudgeQuorum); nil judges
	// without it.
	Quorate func(set int, m replicate.Mask) bool
}

// DefaultQuiet is Options.Quiet's default.
const DefaultQuiet = 5 * time.Second

// DataHealer rebuilds the data of a regular file on the sinks of a set
// from its good copies.
type DataHealer interface {
	// HealData makes the file at path, inode gfid, on the bricks in
	// sinks of set hold the first size bytes of the file as the bricks
	// in good hold it; a brick where path names another inode is not
	// read, and a sink so fails the heal. It
	// fails (errors.Is ErrNoSource) when good cannot rebuild it. With no
	// sinks, it checks that every brick's data agrees (the file was
	// marked layer.Dirty) and repairs those that do not; ErrBusy means the
	// file is being written and is to be checked later. It returns the
	// bytes it wrote to the bricks.
	HealData(ctx context.Context, set int, path string, gfid layer.Gfid, good, sinks replicate.Mask, size uint64) (uint64, error)
}

// ErrBusy is what a DataHealer returns (wrapped) for a file it must not
// check now because a client is writing it.
var ErrBusy = layer.ErrHealBusy

// ErrNoSource is what a DataHealer returns (wrapped) when the good copies
// up cannot rebuild the data.
var ErrNoSource = errNoSource

// ErrSplitBrain is returned (wrapped) for an inode whose copies are in
// split-brain and that no policy resolved.
var ErrSplitBrain = errors.New("split-brain")

// ErrNotHealer is what a full crawl returns (wrapped) for a set this
// healer does not heal now: another node's healer holds its lease, or
// Options.Active says so.
var ErrNotHealer = errors.New("healed by another node's healer now")

// errNoParent: the parent directory is missing on a sink.
var errNoParent = errors.New("parent directory missing on a sink")

// errNoSource: a sink needs data that no reachable copy holds.
var errNoSource = layer.ErrNoHealSource

// errNamedElsewhere: a sink holds the inode to be placed under a stale
// name another heal is to remove; a later pass links it.
var errNamedElsewhere = errors.New("the sink holds the inode under a stale name not yet parked")

// errNotQuiet: an inode a client went away from is still changing; a
// later scan heals it (the marks that bring it back are kept).
var errNotQuiet = errors.New("changed by a client that went away; not quiet yet")

// Healer heals the replica sets of one volume.
type Healer struct {
	data   DataHealer
	sets   []Set
	stores [][]layer.HealStore
	arbs   []replicate.Mask
	policy chooser
	log    *slog.Logger
	every  time.Duration
	manual bool
	// quietFor is Options.Quiet; quiet what abandoned.go saw of Dirty
	// files.
	quietFor time.Duration
	quiet    quietLooks
	trigger  chan struct{}
	slots    chan struct{} // one per running heal goroutine
	locks    pathLocks

	mu       sync.Mutex
	inflight map[entryKey]bool
	split    map[pathKey]layer.Gfid // split-brains seen by the last look
	lastScan time.Time

	healed, failed atomic.Uint64
	bytes, looked  atomic.Uint64 // data written to sinks; inodes looked at
	started        time.Time
	active         atomic.Int64
	activeFor      func(set int) bool
	lease          bool
	quorate        func(set int, m replicate.Mask) bool
	// leased are the bricks of each set whose heal lease this healer
	// took (see lease.go), under leaseMu.
	leaseMu sync.Mutex
	leased  []replicate.Mask
	// kept is set when a heal kept its marks because a copy changed
	// while it healed (a directory that clients keep writing to): the
	// heal's end triggers a scan after retryKept rather than a whole
	// Interval.
	kept atomic.Bool
	// lastName serialises, per inode (striped by gfid), the removals of
	// stale names with keepLastName's look at the inode's other names:
	// two directories healed at once each saw the other name still
	// there, and each removed its own (a review, 2026-11-28).
	lastName [64]sync.Mutex
}

// retryKept is how soon Run scans again after a heal kept its marks
// because its inode changed meanwhile. Retrying at every Interval made a
// directory written to all the time (files created in it every few
// milliseconds) take many intervals to heal: each pass fails on the
// change since its first lookup, and a restarted brick stayed behind for
// 9 to 15 seconds (then more) instead of well under one.
const retryKept = 20 * time.Millisecond

type pathKey struct {
	set  int
	path string
}

type entryKey struct {
	set  int
	gfid layer.Gfid
	path string
}

// New returns a healer of sets. It fails if a set is empty or larger than
// 64, a replica's layer keeps no heal index, or the policy is unknown.
func New(sets []Set, opts Options) (*Healer, error) {
	policy, err := policyByName(opts.Policy)
	if err != nil {
		return nil, err
	}
	h := &Healer{started: time.Now(),
		data:      opts.Data,
		sets:      sets,
		policy:    policy,
		log:       opts.Logger,
		every:     opts.Interval,
		quietFor:  cmp.Or(opts.Quiet, DefaultQuiet),
		manual:    opts.Manual,
		trigger:   make(chan struct{}, 1),
		inflight:  map[entryKey]bool{},
		split:     map[pathKey]layer.Gfid{},
		activeFor: opts.Active,
		lease:     opts.Lease,
		quorate:   opts.Quorate,
		leased:    make([]replicate.Mask, len(sets)),
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.every <= 0 {
		h.every = 2 * time.Second
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = 8
	}
	h.slots = make(chan struct{}, workers)
	for si, s := range sets {
		if len(s) == 0 || len(s) > 64 {
			return nil, fmt.Errorf("heal: set %d has %d replicas (1 to 64)", si, len(s))
		}
		stores := make([]layer.HealStore, len(s))
		var arbs replicate.Mask
		for i, r := range s {
			hs, ok := r.Layer.(layer.HealStore)
			if !ok {
				return nil, fmt.Errorf("heal: replica %s keeps no heal index", r.Name)
			}
			stores[i] = hs
			if r.Arbiter {
				arbs |= replicate.Bit(i)
			}
		}
		h.stores = append(h.stores, stores)
		h.arbs = append(h.arbs, arbs)
	}
	return h, nil
}

// up reports whether replica i of set si is worth asking.
func (h *Healer) up(si, i int) bool {
	f := h.sets[si][i].Up
	return f == nil || f()
}

// upMask is the mask of the replicas of set si worth asking.
func (h *Healer) upMask(si int) replicate.Mask {
	var m replicate.Mask
	for i := range h.sets[si] {
		if h.up(si, i) {
			m |= replicate.Bit(i)
		}
	}
	return m
}

// all is the mask of every replica of set si.
func (h *Healer) all(si int) replicate.Mask {
	return replicate.Mask(1)<<uint(len(h.sets[si])) - 1
}

// names turns a mask of set si into replica names.
func (h *Healer) names(si int, m uint64) []string {
	var out []string
	for i := range h.sets[si] {
		if m&(1<<uint(i)) != 0 {
			out = append(out, h.sets[si][i].Name)
		}
	}
	return out
}

// Run scans the heal index of every reachable replica each Interval (or
// at once on Trigger) and heals what it lists, Workers at a time, until
// ctx is done; it returns when its heals have stopped. Entries still being
// healed are not started again.
func (h *Healer) Run(ctx context.Context) {
	var heals sync.WaitGroup
	defer heals.Wait()
	t := time.NewTicker(h.every)
	defer t.Stop()
	tick := t.C
	if h.manual {
		tick = nil
		select {
		case <-ctx.Done():
			return
		case <-h.trigger:
		}
	}
	for {
		h.scan(ctx, &heals)
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-h.trigger:
		}
	}
}

// Manual reports whether Run scans only on Trigger (Options.Manual).
func (h *Healer) Manual() bool { return h.manual }

// Trigger makes Run scan now.
func (h *Healer) Trigger() {
	select {
	case h.trigger <- struct{}{}:
	default:
	}
}

// Full crawls every set from "/" (with Options.Active, every set this
// healer is active for), comparing every name on every reachable
// replica, and heals what differs: it finds what no index lists (a wiped
// or replaced brick, marks whose index entry was lost).
func (h *Healer) Full(ctx context.Context) error {
	errs := make([]error, len(h.sets))
	var wg sync.WaitGroup
	for si := range h.sets {
		if h.activeFor != nil && !h.activeFor(si) {
			continue // another node's healer crawls it
		}
		if !h.mayHeal(ctx, si) {
			errs[si] = fmt.Errorf("set %d (%s): %w", si, h.sets[si][0].Name, ErrNotHealer)
			continue
		}
		wg.Go(func() {
			errs[si] = h.healUp(ctx, &job{set: si, choose: h.policy, deep: true}, "/")
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Heal heals the inode at path in set si now (a directory's names, not
// its whole subtree). A split-brain no policy resolves is ErrSplitBrain.
func (h *Healer) Heal(ctx context.Context, si int, path string) error {
	if si < 0 || si >= len(h.sets) {
		return fmt.Errorf("heal: no set %d", si)
	}
	if err := layer.CheckPath(path); err != nil {
		return err
	}
	return h.healUp(ctx, &job{set: si, choose: h.policy}, path)
}

// healUp heals path; if a sink lacks its parent directory, it heals the
// missing directories first and tries again. The highest missing one is a
// name in a directory every replica has, whose names are healed first
// (when it blames the sink): the sink may hold the missing directory
// under an old name (renamed while it was away), which that heal renames;
// healed alone, it would be made anew and everything under it copied
// again.
func (h *Healer) healUp(ctx context.Context, j *job, path string) error {
	err := h.healTop(ctx, j, path)
	if !errors.Is(err, errNoParent) || path == "/" {
		return err
	}
	dir, _ := layer.Split(path)
	top := dir
	for top != "/" && h.lacking(ctx, j.set, top) {
		top, _ = layer.Split(top)
	}
	if top != dir {
		// Whatever it does, what follows heals the rest.
		if terr := h.healTop(ctx, j, top); ctx.Err() != nil {
			return terr
		}
	}
	if err := h.healUp(ctx, j, dir); err != nil {
		return err
	}
	return h.healTop(ctx, j, path)
}

// lacking reports whether a reachable replica of set si answers that path
// does not exist.
func (h *Healer) lacking(ctx context.Context, si int, path string) bool {
	for _, c := range h.look(ctx, si, path, h.all(si)) {
		if errors.Is(c.Err, syscall.ENOENT) || errors.Is(c.Err, syscall.ENOTDIR) {
			return true
		}
	}
	return false
}

// healTop heals path with the replicas its parent blames distrusted.
func (h *Healer) healTop(ctx context.Context, j *job, path string) error {
	var distrust replicate.Mask
	if path != "/" {
		dir, _ := layer.Split(path)
		v := h.judge(j.set, h.look(ctx, j.set, dir, h.all(j.set)), 0)
		distrust = v.StaleNames()
		if v.Merge {
			distrust |= h.removedHere(ctx, j.set, path, v.Good)
		}
	}
	return h.healPath(ctx, j, path, distrust, h.all(j.set), nil)
}

// removedHere returns the copies that hold path, in a directory whose
// copies members blame each other (a merge), as a name the others
// removed (see healEntries): healed on its own, from its own marks, it
// would otherwise be given back to the copies that removed it. (A split
// of such a name between versions goes to the abandoned-file pick among
// the copies not distrusted: see trusted.)
func (h *Healer) removedHere(ctx context.Context, si int, path string, members replicate.Mask) replicate.Mask {
	dir, name := layer.Split(path)
	hint := &dirHint{lists: make([]map[string]layer.Entry, len(h.sets[si]))}
	for r, c := range h.look(ctx, si, path, members) {
		if members.Has(r) {
			hint.lists[r] = map[string]layer.Entry{}
			if c.Err == nil {
				hint.lists[r][name] = layer.Entry{Name: name, Attr: c.Attr}
			}
		}
	}
	hint.gone = h.removedOn(ctx, si, dir, members, hint)
	if held := hint.removedFrom(name); held != 0 {
		return held
	}
	return h.unreadableRemoved(ctx, si, name, hint)
}

// judge judges copies of an inode of set si (replicate.JudgeQuorum).
func (h *Healer) judge(si int, copies []replicate.Copy, distrust replicate.Mask) replicate.Verdict {
	var quorate func(replicate.Mask) bool
	if h.quorate != nil {
		quorate = func(m replicate.Mask) bool { return h.quorate(si, m) }
	}
	return replicate.JudgeQuorum(copies, distrust, h.arbs[si], quorate)
}

// look looks path up on the replicas of set si in within, in parallel;
// the others, and those not up, answer ENOTCONN.
func (h *Healer) look(ctx context.Context, si int, path string, within replicate.Mask) []replicate.Copy {
	copies := make([]replicate.Copy, len(h.sets[si]))
	var wg sync.WaitGroup
	for i, r := range h.sets[si] {
		if !within.Has(i) || !h.up(si, i) {
			copies[i].Err = syscall.ENOTCONN
			continue
		}
		wg.Go(func() {
			copies[i].Attr, copies[i].Err = r.Layer.Lookup(ctx, path)
		})
	}
	wg.Wait()
	return copies
}

// noteSplit records (or with split false forgets) a split-brain at path.
func (h *Healer) noteSplit(si int, path string, g layer.Gfid, split bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if split {
		h.split[pathKey{si, path}] = g
	} else {
		delete(h.split, pathKey{si, path})
	}
}

// pathLocks serialises heals of one path of one set.
type pathLocks struct {
	mu sync.Mutex
	m  map[pathKey]*pathLock
}

type pathLock struct {
	ch   chan struct{}
	refs int
}

// lock waits for the path's lock (or ctx) and returns its unlock.
func (p *pathLocks) lock(ctx context.Context, si int, path string) (func(), error) {
	k := pathKey{si, path}
	p.mu.Lock()
	if p.m == nil {
		p.m = map[pathKey]*pathLock{}
	}
	l := p.m[k]
	if l == nil {
		l = &pathLock{ch: make(chan struct{}, 1)}
		p.m[k] = l
	}
	l.refs++
	p.mu.Unlock()
	put := func() {
		p.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(p.m, k)
		}
		p.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; put() }, nil
	case <-ctx.Done():
		put()
		return nil, ctx.Err()
	}
}
