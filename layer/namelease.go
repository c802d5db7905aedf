package layer

import (
	"context"
	"syscall"
)

// Directory leases let a client create a file without a round trip
// (create-behind): a brick that makes a directory for a client may lease
// it the directory's names, and from then on runs no operation of another
// client on a name in that directory, on the directory itself or below it
// before it has recalled the lease. The client, told of the recall, sends
// what it still holds back in the directory (files it has answered for
// but not yet made), then returns the lease. While it holds the lease and
// knows every name it made in the directory since, the client knows that
// a name it did not make is absent and stays so: a create of it cannot
// fail with EEXIST, nor race with another client's, until the client
// itself sends it.

// NameLeaser is a client layer that knows when it holds the names of a
// directory (the protocol client, and the layers that route a name to one
// of them: replicate, distribute, quick-read). A layer that does not
// implement it never has a create held back; a layer must not pass the
// question on to its child unless it handles CreateIn's Data and Set as
// its child would (crypt changes what reaches the bricks, and does not;
// disperse encodes Data into each brick's fragment).
type NameLeaser interface {
	// OwnsName reports whether a create of path now would find no such
	// name, and nobody else can make, remove or look up a name in its
	// directory until this client has sent what it holds: the directory's
	// names are leased to this client by every brick that would hold
	// path. It returns the directory's attributes as the client knows
	// them (its mode and group decide a new inode's group).
	OwnsName(path string) (dir Attr, ok bool)
	// MadeName reports whether this client made path, a non-directory
	// (a file, symlink, device... made or linked there, not moved in by
	// a rename), in a directory whose names it still leases (from every
	// brick that holds path):
	// nobody else can look path up, open, change or remove it until the
	// client has handed the lease back, so what the client knows of the
	// file it made is what the bricks hold.
	MadeName(path string) bool
}

// MaxCreateData is the most a create made in one go carries (CreateIn's
// Data): more is written after it.
const MaxCreateData = 1 << 20

// Syncer is a client layer that holds operations back (write-behind's
// windows and creates): Sync sends them all and returns once the bricks
// have them. The caches above it pass it on. fsync of a directory calls
// it: the names made in it are then on the bricks.
type Syncer interface {
	Sync(ctx context.Context) error
}

// Sync syncs l if it holds operations back (Syncer), else does nothing.
func Sync(ctx context.Context, l Layer) error {
	if s, ok := l.(Syncer); ok {
		return s.Sync(ctx)
	}
	return nil
}

// Fill writes data at offset 0 of f, a file just created, and makes the
// changes of set: what a create made in one go (CreateIn's Data and Set)
// does after the create. It returns the attributes they leave (a, the
// created file's, if none).
func Fill(ctx context.Context, f File, data []byte, set SetattrIn, a Attr) (Attr, error) {
	if len(data) > 0 {
		n, err := f.Write(ctx, data, 0)
		if err == nil && n < len(data) {
			err = syscall.EIO
		}
		if err != nil {
			return a, err
		}
	}
	if set.Valid != 0 {
		return f.Setattr(ctx, set)
	}
	if len(data) > 0 {
		return f.Getattr(ctx)
	}
	return a, nil
}
