package writebehind

import (
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// Attribute changes behind: a file created through the layer knows its
// attributes (the create's answer, then its own writes), so a change of
// its mode, owner or times — what tar and cp -a do to every file they
// write — is acknowledged at once with the attributes it makes, and joins
// the file's window: it goes to the bricks right after the window's
// writes, by the same rules (before anything else the layer does, at the
// latest MaxAge after), and a failure is reported the same way.
//
// What a file knows stays true only while nothing else happened: the
// Windows' generation moves as every operation of their layers begins and
// ends, and a file trusts its attributes only while the generation is the
// one it learnt them at — an operation that overlapped another learns
// nothing — or moved on to with its own writes and changes (carry). No other
// file's writes (another open of the inode), no name operation (a link
// or unlink changes the link count), no other client's... except those:
// what another client changes meanwhile is missed, as by every cache of
// the mount, for at most the kernel's attribute timeout.

// behindSet are the changes that may wait: no size (a truncate goes at
// once) and no "now" (the bricks' clock would set another time).
const behindSet = layer.SetMode | layer.SetUid | layer.SetGid | layer.SetAtime | layer.SetMtime

// know records a as the file's attributes, learnt at generation gen (and
// its inode, if the file did not know it). f.mu is held.
func (f *file) know(a layer.Attr, gen uint64) {
	f.attr, f.attrGen = a, gen
	f.l.w.mu.Lock()
	if f.gfid.IsZero() {
		f.gfid = a.Gfid
	}
	f.l.w.mu.Unlock()
}

// setBehind keeps in with the window if it may wait, and returns the
// attributes it makes.
func (f *file) setBehind(in layer.SetattrIn) (layer.Attr, bool) {
	if !f.behind || in.Valid == 0 || in.Valid&^behindSet != 0 {
		return layer.Attr{}, false
	}
	if f.inode().IsZero() {
		return layer.Attr{}, false // its window would not go before others' writes
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Nothing else went on since the file learnt its attributes, and
	// whatever other files know of the inode ends now.
	if f.flushed || f.attrGen == 0 || !f.l.w.gen.CompareAndSwap(f.attrGen, f.attrGen+1) {
		return layer.Attr{}, false
	}
	f.attrGen++
	applySet(&f.attr, in)
	mergeSet(&f.set, in)
	f.pend()
	return f.attr, true
}

// pend makes sure the window is counted and aged. f.mu is held.
func (f *file) pend() {
	if f.timer == nil {
		f.timer = time.AfterFunc(f.l.maxAge, f.age)
	}
	f.l.w.held(f, true)
}

// applySet changes a as in does (and its ctime, as a brick would).
func applySet(a *layer.Attr, in layer.SetattrIn) {
	if in.Valid&layer.SetMode != 0 {
		a.Mode = a.Mode&syscall.S_IFMT | in.Mode&07777
	}
	if in.Valid&layer.SetUid != 0 {
		a.Uid = in.Uid
	}
	if in.Valid&layer.SetGid != 0 {
		a.Gid = in.Gid
	}
	if in.Valid&layer.SetAtime != 0 {
		a.Atime = in.Atime
	}
	if in.Valid&layer.SetMtime != 0 {
		a.Mtime = in.Mtime
	}
	a.Ctime = now()
}

// mergeSet adds the changes of in to set: the later value of each wins.
func mergeSet(set *layer.SetattrIn, in layer.SetattrIn) {
	v := in.Valid
	if v&layer.SetMode != 0 {
		set.Mode = in.Mode
	}
	if v&layer.SetUid != 0 {
		set.Uid = in.Uid
	}
	if v&layer.SetGid != 0 {
		set.Gid = in.Gid
	}
	if v&layer.SetAtime != 0 {
		set.Atime = in.Atime
	}
	if v&layer.SetMtime != 0 {
		set.Mtime = in.Mtime
	}
	set.Valid |= v
}

// carry moves the generation on for a write through f: what every other
// file knows ends, what f knows stays if it was current. f.mu is held.
func (f *file) carry() {
	if g := f.attrGen; g != 0 && f.l.w.gen.CompareAndSwap(g, g+1) {
		f.attrGen = g + 1
		return
	}
	f.l.w.gen.Add(1)
	f.attrGen = 0
}

// wrote updates what the file knows after its own write of n bytes at
// off: size, times and blocks as the bricks will have them. f.mu is held.
func (f *file) wrote(off int64, n int) {
	if f.attrGen == 0 || n == 0 {
		return
	}
	end := uint64(off) + uint64(n)
	// The blocks a local file system would add, at most: the data's.
	f.attr.Blocks = min(f.attr.Blocks+(uint64(n)+4095)/4096*8, (max(end, f.attr.Size)+4095)/4096*8)
	f.attr.Size = max(f.attr.Size, end)
	t := now()
	f.attr.Mtime, f.attr.Ctime = t, t
}

func now() layer.Timespec {
	t := time.Now()
	return layer.Timespec{Sec: t.Unix(), Nsec: uint32(t.Nanosecond())}
}
