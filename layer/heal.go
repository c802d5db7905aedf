package layer

import (
	"context"
	"errors"
	"syscall"
)

// Replication bookkeeping. Replicate sends every modifying operation to all
// the replicas of a set in parallel. The replicas it knows will not get the
// operation (down, or not open) travel with the request as a Txn, and the
// storage that does the operation records them as *pending* on the inode it
// changes — in the same round trip, before the change — and lists the inode
// in its heal index. The healer later copies what the pending replicas
// missed and clears the marks.
//
// Pending marks are bit masks over the replicas of a set: bit i is replica
// i of the set (its position in the volume spec). A brick never needs to
// know its own position.

// Txn is what a modifying operation carries for replicate.
type Txn struct {
	// Pending has bit i set for each replica i of the set that will miss
	// this operation.
	Pending uint64
	// SetSize asks a disperse brick (one whose storage keeps fragments)
	// to record the file's size with the operation: with Write it raises
	// the recorded size to at least Size, with Setattr SetSize it sets it
	// to Size exactly (the fragment's own length is not the file's size).
	SetSize bool
	Size    uint64
	// KeepUndo asks a disperse brick, with a write, to keep what the
	// write replaces first, until the inode's Dirty mark goes
	// (layer.UndoReader).
	KeepUndo bool
}

// Dirty is a pending mark that blames no replica: the copies may differ
// and nothing says which is right. A disperse client sets it while it
// changes the content of the inode on every brick of its set at once and
// clears it when done; a brick of a replicated set sets it on a file a
// client went away from with writes (brick.BrickOptions.MarkAbandoned).
// If it stays, the healer checks that the bricks' data agree (see
// heal.DataHealer for disperse, heal's abandoned.go for replicate). It is
// bit 63: a set never has 64 bricks.
const Dirty uint64 = 1 << 63

type txnKey struct{}

// WithTxn returns ctx carrying t to the storage below.
func WithTxn(ctx context.Context, t Txn) context.Context {
	return context.WithValue(ctx, txnKey{}, t)
}

// TxnFrom returns the Txn ctx carries (zero if none).
func TxnFrom(ctx context.Context) Txn {
	t, _ := ctx.Value(txnKey{}).(Txn)
	return t
}

// HealEntry is one inode in a brick's heal index.
type HealEntry struct {
	Gfid Gfid
	// Path is where the inode was when it was marked, moved along by
	// the storage when the inode or a directory above it is renamed
	// (best effort: it may still name a path a rename took away).
	Path string
	// Pending is the inode's current mark (0 when only the index entry
	// is left, for instance after the inode was removed).
	Pending uint64
}

// HealStore is implemented by storage that keeps pending marks and a heal
// index (brick/posix), and passed through by the layers above it on the
// brick and by the network client.
//
// Attr.Pending reports an inode's marks on Lookup, Setattr and Getattr.
type HealStore interface {
	// HealIndex lists up to max entries of the heal index, starting after
	// the entry whose gfid is after (zero: from the start).
	HealIndex(ctx context.Context, after Gfid, max int) ([]HealEntry, error)
	// MarkPending adds mask to the pending marks of the inode at path,
	// which must have gfid g (ESTALE otherwise; g zero: any).
	MarkPending(ctx context.Context, path string, g Gfid, mask uint64) error
	// ClearPending removes mask from the marks of the inode at path if it
	// still has gfid g and ctime ctime (ESTALE if not: it changed since
	// the healer looked, and must be looked at again). When no mark is
	// left the index entry goes too.
	ClearPending(ctx context.Context, path string, g Gfid, mask uint64, ctime Timespec) error
	// DropHealEntry removes the index entry of g whatever its marks, if
	// it still records path (any path if path is empty): the healer uses
	// it for inodes that no longer exist where the entry it read said, and
	// must not drop one that a rename has moved since it read it.
	DropHealEntry(ctx context.Context, g Gfid, path string) error
	// Removed lists the names recorded as removed from directory dir by
	// operations some replicas missed, while the directory has marks:
	// when copies of a directory that blame each other are merged, a name
	// one copy holds and another recorded as removed (with the same gfid)
	// was removed, not made.
	Removed(ctx context.Context, dir string) ([]Removal, error)
}

// Removal is a name removed from a directory, and the inode it named.
type Removal struct {
	Name string
	Gfid Gfid
}

// ErrHealBusy is what a data healer (heal.DataHealer, disperse's) returns
// (wrapped) for a file it must not check now because a client is writing
// it; heal.ErrBusy is this.
var ErrHealBusy = errors.New("being written")

// ErrNoHealSource is what a data healer returns (wrapped) when the good
// copies up cannot rebuild the data; heal.ErrNoSource is this.
var ErrNoHealSource = errors.New("no reachable copy of the data")

// EntryLocker is a brick a healer can ask to hold a directory's names
// still: while it holds dir, the brick makes other clients' operations on
// names in dir (create, mkdir, mknod, symlink, link, unlink, rmdir,
// rename) wait, for a bounded time. A directory written to all the time
// otherwise changes between the healer's look and its ClearPending at
// every pass, and its heal never ends. The lock is for progress only:
// ClearPending's ctime check keeps every mark an operation that got
// through anyway needs.
type EntryLocker interface {
	// LockEntries holds dir; EAGAIN if another client holds it.
	LockEntries(ctx context.Context, dir string) error
	// UnlockEntries lets dir go.
	UnlockEntries(ctx context.Context, dir string) error
}

// HealLeaser is a brick whose heal lease healers take turns at: one
// connection at a time holds it, until it lets it go or the connection
// ends. A healer heals a set only while it holds the lease of most of
// its bricks, so that two healers (on two nodes) never heal one set at
// once.
type HealLeaser interface {
	// LeaseHeal takes the lease, or keeps it; EAGAIN if another holds it.
	LeaseHeal(ctx context.Context) error
	// UnleaseHeal lets it go.
	UnleaseHeal(ctx context.Context) error
}

// healStoreOf returns l as a HealStore, or an error-returning stand-in.
func healStoreOf(l Layer) HealStore {
	if h, ok := l.(HealStore); ok {
		return h
	}
	return noHeal{}
}

type noHeal struct{}

func (noHeal) HealIndex(context.Context, Gfid, int) ([]HealEntry, error) {
	return nil, syscall.ENOTSUP
}
func (noHeal) MarkPending(context.Context, string, Gfid, uint64) error { return syscall.ENOTSUP }
func (noHeal) ClearPending(context.Context, string, Gfid, uint64, Timespec) error {
	return syscall.ENOTSUP
}
func (noHeal) DropHealEntry(context.Context, Gfid, string) error  { return syscall.ENOTSUP }
func (noHeal) Removed(context.Context, string) ([]Removal, error) { return nil, syscall.ENOTSUP }

// HealIndex passes to the child if it keeps a heal index.
func (b Base) HealIndex(ctx context.Context, after Gfid, max int) ([]HealEntry, error) {
	return healStoreOf(b.Child).HealIndex(ctx, after, max)
}

// MarkPending passes to the child if it keeps a heal index.
func (b Base) MarkPending(ctx context.Context, path string, g Gfid, mask uint64) error {
	return healStoreOf(b.Child).MarkPending(ctx, path, g, mask)
}

// ClearPending passes to the child if it keeps a heal index.
func (b Base) ClearPending(ctx context.Context, path string, g Gfid, mask uint64, ctime Timespec) error {
	return healStoreOf(b.Child).ClearPending(ctx, path, g, mask, ctime)
}

// DropHealEntry passes to the child if it keeps a heal index.
func (b Base) DropHealEntry(ctx context.Context, g Gfid, path string) error {
	return healStoreOf(b.Child).DropHealEntry(ctx, g, path)
}

// Removed passes to the child if it keeps a heal index.
func (b Base) Removed(ctx context.Context, dir string) ([]Removal, error) {
	return healStoreOf(b.Child).Removed(ctx, dir)
}

// ErrReplaced is what OpenAs returns when the path names another inode
// than the one asked for.
var ErrReplaced = errors.New("the name now holds another inode")

// OpenAs opens path on l, and fails with ErrReplaced unless the file
// opened is inode g: a healer's check that a path still names the inode
// it judged (a client may have renamed another file over it since).
func OpenAs(ctx context.Context, l Layer, path string, flags uint32, g Gfid) (File, error) {
	f, err := l.Open(ctx, path, flags)
	if err != nil {
		return nil, err
	}
	a, err := f.Getattr(ctx)
	if err == nil && a.Gfid != g {
		err = ErrReplaced
	}
	if err != nil {
		f.Release(ctx)
		return nil, err
	}
	return f, nil
}
