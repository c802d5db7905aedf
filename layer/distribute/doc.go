// Package distribute spreads one namespace over several children (bricks,
// or replicate/disperse sets) by hashing names, with no metadata server:
// GlusterFS's elastic hashing, done so that a settled layout never makes a
// lookup ask every child.
//
// # Placement
//
// Every directory exists on every child, with the same gfid. Each
// directory's 32-bit hash space is split into ranges, one per child (its
// layout); a non-directory (regular file, symlink, fifo, device) lives on
// exactly one child, normally the one whose range holds the hash of its
// name: its hashed child. The hash is FNV-1a 64 of the name folded to 32
// bits (see hashName); rsync-style temporary names ".NAME.XXXXXX" hash as
// NAME so the final rename does not move anything. Every directory uses the
// volume's layout (Options.Layout): by default the hash space cut into
// equal contiguous ranges in child order; after add-brick or remove-brick,
// the layout the volume spec records (see "Changing the layout").
//
// # Pointer files
//
// When a name comes to hash to a child other than the one holding its
// inode (after a rename, or for a hard link's second name), the inode stays
// where it is (its cached child) and the name's hashed child gets a
// pointer file: an empty regular file with mode 01000 whose linkto xattr
// names the cached child (GlusterFS's linkto file). Moving the data
// instead would make rename cost a copy. Pointers are found by name and
// get their own gfid; Readdir never shows them and Lookup resolves them.
//
// A name is thus resolved with one lookup on its hashed child, plus one on
// the cached child when the hashed child holds a pointer (and, if a rename
// replaced the pointer and removed the data in between, once more). A name the
// hashed child does not have does not exist: it is never searched for on
// the other children. A pointer whose target is missing (dangling) reads
// as "no such name"; a create of the name replaces it.
//
// # Operations
//
//   - Lookup, Getxattr, Listxattr, Readlink, Open and Setattr of a file go
//     to the child holding the inode. A directory's attributes are read
//     from its hashed child (the root's from child 0); changes to a
//     directory (Setattr, Setxattr, Removexattr) are made on the hashed
//     child first, whose refusal leaves nothing half done, then on every
//     other child in parallel.
//   - Create, Mknod and Symlink run on the hashed child. Create without
//     O_EXCL of a name that lives elsewhere opens it there.
//   - Mkdir runs on the hashed child first (its EEXIST decides), then on
//     the others in parallel with the same gfid; if one fails, the copies
//     made are removed. A child that lacks the parent directory gets the
//     missing chain made (same gfid, mode and owner; not yet xattrs or
//     times) and the operation is retried; this heal applies to every
//     operation that creates a name on a child.
//   - Rmdir checks on every child that the directory holds nothing but
//     pointer files (stale then, and deleted), removes it on the
//     non-hashed children, then on the hashed one; a failure re-creates
//     the copies removed.
//   - Link makes the new name on the cached child, so the storage counts
//     links, plus a pointer on the new name's hashed child if it differs
//     (pointer first: a crash leaves a dangling pointer, not a hidden
//     name). Unlink removes the name on the cached child, then its
//     pointer.
//   - Readdir lists every child concurrently and merges; see Readdir for
//     paging and errors. Statfs sums the children.
//
// # Renaming a file
//
// Let s be the source name with inode on child cs (and, if s hashes
// elsewhere, a pointer on its hashed child hs), d the target name hashed
// to hd, and, if d exists, its inode on cd. Nothing ever crosses children
// (never EXDEV). Steps:
//
//  1. rename s to d on cs: atomically replaces whatever cs had at d.
//  2. if hd != cs, make d on hd a pointer to cs: Mknod a pointer under a
//     temporary name (".mortar-ptr-" + random; hidden as every pointer is)
//     and rename it over d on hd, replacing the old d (data or pointer)
//     atomically.
//  3. if cd is neither cs nor hd, unlink the old d's data on cd.
//  4. if s had a pointer on hs, unlink it.
//
// Order of 1 and 2. If d did not exist, step 2 runs before step 1
// (RenameNoReplace: Mknod exclusively at d, so hd decides EEXIST): d reads
// as absent (dangling pointer) until step 1 makes it appear, and s stays
// readable until then. If d existed with its inode on cs, hd's pointer
// already names cs and step 2 is skipped: step 1 alone switches d. If d
// existed on hd or a third child, step 1 runs first: Lookup of d sees the
// old d until step 2 replaces it in one rename, then the new one. So a
// Lookup of d sees the old d or the new one, never nothing, when d existed.
// If step 2 fails, step 1 is undone. If step 1 fails so that it may stand
// (as below) and cs then answers d with s's inode, steps 2 to 4 are done
// all the same and the rename answers step 1's error: otherwise s's inode
// could stay under d on cs, a second file of the name that a rebalance
// cannot place (the simulation, replica3x2-grow seed 20); if cs does not,
// nothing more is done (the old d stays). Step 1 names s's inode
// (layer.SourceRenamer), so that a replica holding another one under s
// refuses. If step 1 fails after step 2, the
// pointer is removed, unless the failure may leave the rename done (EIO, as
// a replica set answers when fewer than a quorum of its bricks did it, or a
// child that stopped answering): the pointer then stays, dangling if the
// data did not move, so that d is never a data file off its hashed child
// with no pointer (which a create of d would make twice).
//
// Crash windows (the client dies between steps; there are no on-brick
// journals yet):
//   - d absent, after 2 before 1: a dangling pointer at d; s intact. Clean.
//   - d existed on hd or a third child, after 1 before 2: s's inode sits
//     under the name d on cs, shadowed by the old d, which Lookup still
//     returns; s reads as gone. Readdir shows d once (the hashed child's
//     entry). Nothing is deleted, but s's content is reachable only on the
//     brick until a future fsck/rebalance pass finds data files that are
//     not on their hashed child and have no pointer. This is the one
//     window that hides data.
//   - after 2 (or 1) before 3: the old d's data stays on cd as an orphan:
//     unreachable through d, costs space, found by the same future pass.
//   - before 4: s's pointer dangles; reads as absent, replaced on the next
//     create of s.
//
// Renaming back onto a pointer of the same file, or between two names of
// one inode, follows the same rules (the latter is a no-op, as in
// rename(2)). File over directory gives EISDIR, directory over file
// ENOTDIR, checked before anything changes.
//
// # Renaming a directory
//
// The target, if it exists, must be an empty directory on every child
// (checked first, stale pointers deleted). The rename runs on the decider
// first — the volume's first child (its errors decide, e.g. EEXIST with
// RenameNoReplace) — then on every other child in
// parallel; if one fails, those that renamed are renamed back, the
// decider last, and a replaced empty target is made again. While it runs,
// both names may be seen for a moment. A crash in between (or a rollback
// that fails) leaves the directory under the new name on some children
// and the old one on the others: nothing makes it again on a child that
// holds it under the other name (mkdirCopy looks for its gfid there
// first, and refuses with EIO), and a listing of the parent, which sees
// one gfid under two names, moves it on every child to the name the
// decider holds, the one the rename had reached (splitdir.go). A
// directory moved so into another parent is not seen by one listing, and
// is not settled yet: creates that need it on a child holding it
// elsewhere, and renames of it, fail with EIO, and a rebalance counts it
// failed (keeping the previous layout).
//
// # Changing the layout
//
// Adding a child gives it a share of the hash space taken from every other
// child (volume.Layout.With); removing one spreads its ranges over the
// others (Without). Either way only the names whose owner changed must
// move. Clients are given the new layout and, while a rebalance runs, the
// previous one (Options.Previous):
//
//   - A name is looked for on its hashed child under the new layout and,
//     if it is not there, where the previous layout put it (loc.prev),
//     then once more on its hashed child (the rebalance may have moved it
//     in between). Operations on a name found at its previous place act
//     there. A missing name costs up to three lookups during a rebalance;
//     with its previous place unreachable, the lookup fails with that
//     child's error, never ENOENT.
//   - Names are made only where the new layout puts them, and Create,
//     Mknod, Symlink, Link and Mkdir first check that the name does not
//     still live at its previous place (EEXIST, or Create opens it), so a
//     name never exists twice; with that place unreachable they fail with
//     its error. Rename onto such a name puts the new name
//     on its new hashed child and removes the old target's copies.
//   - Readdir accepts a directory missing on its new hashed child if the
//     previous one has it (before fix-layout made it there).
//
// Rebalance (rebalance.go) first makes every directory on every child
// (FixLayout alone does only that), then, per directory, depth first in
// name order, moves each file whose data is not on its hashed child:
//
//   - A regular file with one link is migrated (migrate.go) while clients
//     keep it open: the bricks holding it are told to watch it (note any
//     change); it is copied to a hidden name (migPrefix) on the new child
//     with the same gfid (inode numbers do not change), in 1 MiB chunks,
//     chunks of zeros left as holes, then its user xattrs, mode and times;
//     the bricks freeze it (every change waits; changes in flight finish
//     first) and say whether it changed since the watch. If it did, the
//     copy starts over (twice); the third time a file of at most 64 MiB is
//     copied again under the freeze, a larger one is skipped (counted,
//     for a later run). Then the copy is renamed over the name on the new
//     child (replacing a pointer there), and the bricks turn the old inode
//     into a pointer to the new child and mark it moved: from then on its
//     open files answer EREMOTE to every operation but Getattr (which
//     reports the pointer), and so do the changes the freeze held; the
//     bricks then remove the old name (open files keep the inode). A
//     freeze also holds the operations on the file's names (link, rename
//     away or over, unlink), which then answer EREMOTE and are done again
//     where the file went (Link, Rename, Unlink). A freeze ends by
//     itself after 30 s should the rebalancer die; a move whose freeze
//     expired before the switch is undone. The commands travel as Setxattr
//     of trusted.mortar.migrate, which the bricks intercept (see
//     posix.XattrMigrate) and which distribute refuses from its callers;
//     replicate and disperse send them to every brick of the set and need
//     all of them up.
//   - Files opened through distribute are handles (handle.go) that, on
//     EREMOTE, find the file again by the path they were opened with,
//     check it is the same inode (gfid), reopen it there with the same
//     flags (without O_CREAT, O_EXCL, O_TRUNC) and do the operation again:
//     the application sees nothing. Replicate and disperse pass EREMOTE up
//     without marking anything pending (the copies that did the change
//     changed the old inode, now gone). A file renamed while open and then
//     moved is not found under its old path: its operations then fail
//     with ESTALE. POSIX locks held on a file that moves are not carried
//     to its new child.
//   - A file with several links stays on its child (storage counts its
//     links there); its name gets a pointer on its hashed child. One on a
//     child being removed moves after the walk, all names at once
//     (links.go): the walk gathers its names, the copy gets them all on
//     the hashed child of the first, the other names' hashed children
//     point there, and the bricks turn the old inode into a pointer and
//     remove its names in one command, under the freeze.
//   - A pointer on a child being removed (its name hashed there, its data
//     is elsewhere) gets a copy on the name's new hashed child, unless the
//     data is there: once the child is gone, that is where the name is
//     looked for.
//   - Symlinks and special files are made again on the new child (same
//     gfid) and removed from the old one.
//   - Pointers made stale (on a child that no longer owns the name, whose
//     name is now found on its hashed child or which dangle) are removed.
//
// A checkpoint (the last directory done) lets a later run skip what was
// done. Options.Source splits the work: each node moves the files whose
// data is on its own bricks.
//
// Known limits: an O_APPEND write that the freeze catches after it reached
// some bricks of a set but not others can be applied twice (the held part
// is retried whole on the new child); a rebalancer that dies between the
// switch and the conversion leaves two copies, the new one wins on the
// next run and changes made meanwhile through files opened before the
// switch are lost; a name created in the instant between the existence
// check at its previous place and the create on its hashed child, for a
// name the rebalance is moving at that moment, is not serialised (there
// are no entry locks yet, see below).
//
// # Errors and what is not done yet
//
// Children's errors are passed through. Operations that need every child
// (Mkdir, Rmdir, directory rename, Statfs, directory Setattr and xattrs)
// fail when one child fails (Readdir lists what the children up hold and
// says what it lacks, see Readdir), e.g. with ENOTCONN when it is down,
// after undoing what can be undone; an update already applied to the
// hashed child of a directory is not undone (the children then differ
// until a future heal). Lookup and file operations need only the children
// that hold the name.
//
// Lookup of a path below a non-directory that lives on another child
// answers ENOENT where a local file system says ENOTDIR: telling the two
// apart would cost a second lookup on every miss, and the kernel never
// looks up a name below a non-directory. The other operations check on
// their error path and answer ENOTDIR.
//
// There are no entry locks yet: concurrent namespace operations on the
// same name from different clients are not serialised across children
// (e.g. a create racing a rename onto the same name can leave an orphan).
// A directory missing on its own hashed child reads as absent until a
// create inside it heals it there.
package distribute
