package layer

import "context"

// SourceRenamer is a layer whose rename can name the inode it moves: a
// brick whose oldpath is another inode (a stale name, left by a change it
// missed) refuses with ESTALE and changes nothing. Replicate tells a
// replica's stale name from the good copies' by it, without a lookup
// first; distribute names the inode its own lookup found. The network
// client, replicate and the brick's layers implement it.
type SourceRenamer interface {
	// RenameSource is Rename of the inode with gfid src at oldpath.
	RenameSource(ctx context.Context, oldpath, newpath string, flags uint32, src Gfid) error
}

// RenameSource renames through l, naming src where l can (and src is
// known: not zero), else as Rename does.
func RenameSource(ctx context.Context, l Layer, oldpath, newpath string, flags uint32, src Gfid) error {
	if r, ok := l.(SourceRenamer); ok && !src.IsZero() {
		return r.RenameSource(ctx, oldpath, newpath, flags, src)
	}
	return l.Rename(ctx, oldpath, newpath, flags)
}

// DirRenamer is a layer that can be told, with a directory's rename over
// an existing directory, that directory as the caller looked it up
// before: replicate, moving back a rename only one replica did
// (replicate's undoDirRename), makes it again there from these
// attributes when no replica that did not do the rename answers.
// Distribute, which looks the target up first, tells it.
type DirRenamer interface {
	RenameDir(ctx context.Context, oldpath, newpath string, flags uint32, replaced Attr) error
}

// RenameDir renames a directory through l, telling l the directory it
// replaces where l can (and one is known: a directory), else as Rename
// does.
func RenameDir(ctx context.Context, l Layer, oldpath, newpath string, flags uint32, replaced Attr) error {
	if r, ok := l.(DirRenamer); ok && replaced.IsDir() {
		return r.RenameDir(ctx, oldpath, newpath, flags, replaced)
	}
	return l.Rename(ctx, oldpath, newpath, flags)
}
