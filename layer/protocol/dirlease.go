package protocol

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// Directory leases (layer.NameLeaser): with Config.DirLeases, every mkdir
// asks the brick for the new directory's names (wire.MkdirLease). While
// the session holds a directory's lease it keeps the names it made there
// since, so it knows any other name is absent (OwnsName). The lease ends
// when the brick recalls it (the client first hands Config.OnRecall the
// directory, to send what it held back, then returns the lease), when the
// session ends, or when an operation of the client in the directory goes
// otherwise than the client could tell in advance (it then stops trusting
// the lease and returns it).

// dirLease is a directory lease the session holds.
type dirLease struct {
	id   uint64
	path string
	attr layer.Attr // the directory's, from its mkdir
	// names are those made in it through the session since: true for
	// a non-directory made with its kind known (not moved in by a
	// rename), which MadeName answers for.
	names map[string]bool
	used  time.Time // when OwnsName last said yes (or it was granted)
}

// A session keeps at most maxHeldDirs leases, giving back the one used
// least lately for a new one, and gives back a lease whose directory it
// made more than maxLeaseNames names in (what it knows costs memory).
const (
	maxHeldDirs   = 1024
	maxLeaseNames = 1 << 16
)

var _ layer.NameLeaser = (*Client)(nil)

// OwnsName reports whether the session holds the lease of path's
// directory, has heard the brick lately (leaseTrust) and did not make
// path's name (layer.NameLeaser).
func (c *Client) OwnsName(path string) (layer.Attr, bool) {
	var dir layer.Attr
	ok := c.withLease(path, func(l *dirLease, name string) bool {
		if _, made := l.names[name]; made {
			return false
		}
		l.used, dir = time.Now(), l.attr
		return true
	})
	return dir, ok
}

// MadeName reports whether the client made path, not a directory, in a
// directory it holds the lease of (layer.NameLeaser).
func (c *Client) MadeName(path string) bool {
	return c.withLease(path, func(l *dirLease, name string) bool {
		return l.names[name]
	})
}

// withLease runs fn on the lease of path's directory and path's name in
// it, if the current session holds one it can trust (heard from its brick
// lately), and returns what fn says; false without a lease.
func (c *Client) withLease(path string, fn func(l *dirLease, name string) bool) bool {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	if s == nil || !alive(s) || time.Since(time.Unix(0, s.lastRecv.Load())) > leaseTrust {
		return false
	}
	dir, name := layer.Split(path)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.dirs[dir]
	return l != nil && fn(l, name)
}

// mkdir makes a directory, asking for its lease with Config.DirLeases.
func (c *Client) mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	req := &wire.Request{Op: wire.OpMkdir, Path: path, Owner: in.Owner, Mode: in.Mode}
	if c.cfg.DirLeases {
		req.Flags = wire.MkdirLease
	}
	s, err := c.session(ctx)
	if err != nil {
		return layer.Attr{}, err
	}
	cl, err := c.roundTrip(ctx, s, req, nil, nil)
	if err != nil {
		s.named(req, err)
		return layer.Attr{}, err
	}
	d := wire.Dec{B: cl.payload}
	a := d.Attr()
	var id uint64
	if len(d.B) == 8 && d.Err == nil {
		id = d.U64()
	}
	if err := decoded(&d); err != nil {
		s.named(req, err)
		return layer.Attr{}, err
	}
	s.named(req, nil)
	if id != 0 {
		s.leased(id, path, a)
	}
	return a, nil
}

// leased keeps the lease id of the directory at path, just made, unless
// the brick recalled it already (its recall can overtake the mkdir's
// answer): then it is returned at once.
func (s *session) leased(id uint64, path string, a layer.Attr) {
	s.mu.Lock()
	_, gone := s.dirRecalled[id]
	delete(s.dirRecalled, id)
	var evict *dirLease
	if !gone && s.err == nil {
		l := &dirLease{id: id, path: path, attr: a, names: map[string]bool{}, used: time.Now()}
		if old := s.dirs[path]; old != nil {
			delete(s.dirByID, old.id)
		}
		s.dirs[path], s.dirByID[id] = l, l
		if len(s.dirs) > maxHeldDirs {
			evict = s.leastUsed()
			s.forgetLocked(evict)
		}
	}
	s.mu.Unlock()
	if gone {
		s.returnDir(id)
	}
	if evict != nil {
		go s.handBack(evict)
	}
}

// leastUsed is the lease OwnsName said yes for least lately. s.mu is
// held.
func (s *session) leastUsed() *dirLease {
	var lru *dirLease
	for _, l := range s.dirs {
		if lru == nil || l.used.Before(lru.used) {
			lru = l
		}
	}
	return lru
}

// forgetLocked stops using lease l. s.mu is held.
func (s *session) forgetLocked(l *dirLease) {
	delete(s.dirs, l.path)
	delete(s.dirByID, l.id)
}

// handBack sends what the client held back in l's directory (onRecall),
// then returns the lease, which the session no longer uses.
func (s *session) handBack(l *dirLease) {
	if s.onRecall != nil {
		s.onRecall(l.path)
	}
	s.returnDir(l.id)
}

// giveUp hands back, before an operation of the client that changes
// path (with subtree, anything below it too), the leases it would end:
// a create held back in such a directory must reach the bricks before
// the operation moves or removes the directory under it.
func (s *session) giveUp(path string, subtree bool) {
	s.mu.Lock()
	var ending []*dirLease
	for p, l := range s.dirs {
		if p == path || subtree && len(p) > len(path) && strings.HasPrefix(p, path) && (path == "/" || p[len(path)] == '/') {
			ending = append(ending, l)
			s.forgetLocked(l)
		}
	}
	s.mu.Unlock()
	for _, l := range ending {
		s.handBack(l)
	}
}

// givesUp hands back the leases an operation of the client would end,
// before it is sent (see giveUp).
func (s *session) givesUp(req *wire.Request) {
	switch req.Op {
	case wire.OpRename:
		s.giveUp(req.Path, true)
		s.giveUp(req.Path2, false)
	case wire.OpSetattr:
		s.flushDir(req.Path)
	case wire.OpRmdir, wire.OpSetxattr, wire.OpRemovexattr:
		s.giveUp(req.Path, false)
	}
}

// flushDir sends, before the client's own attribute change of a
// directory it holds the lease of, what it held back there (a create
// sent after a change of the directory's times would move them again);
// the lease is kept (setattr updates what it knows of the directory).
func (s *session) flushDir(path string) {
	s.mu.Lock()
	l := s.dirs[path]
	s.mu.Unlock()
	if l != nil && s.onRecall != nil {
		s.onRecall(path)
	}
}

// setattr changes the attributes of path, and those the session knows
// of the directory at path if it holds its lease (its mode and group
// decide a new inode's group; see layer.NameLeaser.OwnsName). A change
// that fails ends the lease (named).
func (c *Client) setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	a, err := c.attrCall(ctx, &wire.Request{Op: wire.OpSetattr, Path: path, Setattr: in})
	if err == nil && c.cfg.DirLeases {
		c.mu.Lock()
		s := c.cur
		c.mu.Unlock()
		if s != nil {
			s.mu.Lock()
			if l := s.dirs[path]; l != nil {
				l.attr = a
			}
			s.mu.Unlock()
		}
	}
	return a, err
}

// named keeps the session's leases true to what req, an operation on
// names that ended with err, did: the names it made or removed in leased
// directories, and the leases of directories it removed, moved or
// changed. A failed operation in a leased directory ends the lease (the
// brick may hold a name the session does not know of).
func (s *session) named(req *wire.Request, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.dirs) == 0 {
		return
	}
	switch req.Op {
	case wire.OpCreate, wire.OpMake, wire.OpMknod, wire.OpSymlink:
		s.name(req.Path, madeFile, err)
	case wire.OpMkdir:
		s.name(req.Path, madeOther, err)
	case wire.OpLink:
		s.name(req.Path2, madeFile, err)
	case wire.OpUnlink, wire.OpUnlinkData:
		s.name(req.Path, removed, err)
	case wire.OpRmdir:
		s.name(req.Path, removed, err)
		s.endUnder(req.Path, false)
	case wire.OpRename:
		s.name(req.Path, removed, err)
		s.name(req.Path2, madeOther, err) // a file or a directory
		s.endUnder(req.Path, true)
		s.endUnder(req.Path2, false)
	case wire.OpSetattr:
		if err != nil {
			s.endUnder(req.Path, false) // its mode or group may have changed
		}
	case wire.OpSetxattr, wire.OpRemovexattr:
		s.endUnder(req.Path, false) // an ACL may have changed what a new inode gets
	}
}

// How an operation changed a name (session.name).
const (
	removed   = iota
	madeFile  // a non-directory
	madeOther // a directory, or a name of either kind
)

// name records that path's name was made (how) or removed in its leased
// directory, or ends the lease if the operation failed. s.mu is held.
func (s *session) name(path string, how int, err error) {
	dir, name := layer.Split(path)
	l := s.dirs[dir]
	switch {
	case l == nil:
	case err != nil:
		s.endLocked(l)
	case how != removed:
		l.names[name] = how == madeFile
		if len(l.names) > maxLeaseNames {
			s.forgetLocked(l)
			go s.handBack(l)
		}
	default:
		delete(l.names, name)
	}
}

// endUnder ends the lease of the directory at path (and those below it,
// with subtree). s.mu is held.
func (s *session) endUnder(path string, subtree bool) {
	if l := s.dirs[path]; l != nil {
		s.endLocked(l)
	}
	if !subtree {
		return
	}
	prefix := path + "/"
	for p, l := range s.dirs {
		if len(p) > len(prefix) && p[:len(prefix)] == prefix {
			s.endLocked(l)
		}
	}
}

// endLocked forgets lease l and hands it back (what was held back in its
// directory goes first). s.mu is held.
func (s *session) endLocked(l *dirLease) {
	s.forgetLocked(l)
	go s.handBack(l)
}

// returnDir tells the brick the session no longer holds lease id.
func (s *session) returnDir(id uint64) {
	var e wire.Enc
	(&wire.Request{Op: wire.OpDirLeaseReturn, Cookie: id}).Encode(&e)
	h := wire.Header{Kind: wire.KindRequest, Op: wire.OpDirLeaseReturn, ID: s.nextID.Add(1), Flags: wire.FlagNoReply}
	if err := s.w.Send(h, e.B); err != nil {
		s.fail(err)
	}
}

// recallDir reads a KindRecallDir frame: the session stops using the
// lease, hands its directory to onRecall (which sends what was held back
// in it), then returns it. A lease not known yet is recorded (the mkdir's
// answer granting it may still be on its way).
func (s *session) recallDir(h wire.Header) error {
	if h.Len != 0 {
		return errors.New("directory recall frame with a payload")
	}
	s.mu.Lock()
	l := s.dirByID[h.ID]
	if l == nil {
		noteRecall(s.dirRecalled, h.ID)
	} else {
		s.forgetLocked(l)
	}
	s.mu.Unlock()
	if l != nil {
		go s.handBack(l)
	}
	return nil
}
