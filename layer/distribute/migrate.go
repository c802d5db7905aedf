package distribute

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// migPrefix starts the names of the copies a rebalance makes on a file's
// new child before switching the name to them. Readdir hides them, and a
// rebalance ignores them.
const migPrefix = ".mortar-mig-"

func migName() string {
	var b [12]byte
	rand.Read(b[:])
	return migPrefix + hex.EncodeToString(b[:])
}

// xattrMigrate carries the rebalance's commands to the bricks holding a
// file (posix.XattrMigrate): watch, freeze, thaw, moved.
const xattrMigrate = "trusted.mortar.migrate"

// Tuning of file migration.
const (
	// migrateTries is how many times a file that changed while it was
	// copied is copied again before it is left for a later run.
	migrateTries = 3
	// smallFile is the largest file copied again under the freeze when
	// it keeps changing (the copy must end well within the bricks'
	// freeze timeout, 30 s by default).
	smallFile = 64 << 20
	// freezeBudget is how long a freeze may have lasted when the name is
	// switched; past it the bricks' freeze may have expired under it.
	freezeBudget = 10 * time.Second
	// copyChunk is the unit of the copy.
	copyChunk = 1 << 20
)

// cmd sends a migration command about w's file to the bricks of w.c.
func (r *rebalancer) cmd(ctx context.Context, w work, op string, extra ...string) error {
	v := op + " " + w.attr.Gfid.String()
	for _, e := range extra {
		v += " " + e
	}
	return r.d.child(w.c).Setxattr(ctx, w.path, xattrMigrate, []byte(v), 0)
}

// migrate moves a regular file with one link from w.c to w.h while
// clients may be reading and writing it:
//
//  1. watch: the bricks note any change to the file from now on;
//  2. copy it to a hidden name on w.h with the same gfid;
//  3. freeze: the bricks hold every change; if one came since the watch,
//     start again (or, the last time, copy again under the freeze if it
//     is small);
//  4. rename the copy over the name on w.h;
//  5. moved: the bricks turn the file into a pointer to w.h and answer
//     EREMOTE to its open files (and to the changes they held), which
//     distribute reopens on w.h; the bricks remove the old name.
func (r *rebalancer) migrate(ctx context.Context, w work) error {
	d := r.d
	if a, err := d.child(w.h).Lookup(ctx, w.path); err == nil && a.Linkto == "" && a.Gfid == w.attr.Gfid {
		return r.recover(ctx, w)
	}
	for try := 1; ; try++ {
		err := r.migrateOnce(ctx, w, try == migrateTries)
		if !errors.Is(err, errChanged) {
			return err
		}
		if try == migrateTries {
			return fmt.Errorf("kept changing while copied: %w", errBusy)
		}
	}
}

// errChanged says a file changed while it was copied.
var errChanged = errors.New("changed while copied")

// migrateOnce is one attempt of migrate; last allows a copy under the
// freeze.
func (r *rebalancer) migrateOnce(ctx context.Context, w work, last bool) error {
	d := r.d
	bg := context.WithoutCancel(ctx) // undoing must happen even when stopped
	if err := r.cmd(ctx, w, "watch"); err != nil {
		r.cmd(bg, w, "thaw") // on the bricks that did it
		return r.migrateErr(err)
	}
	dir, _ := layer.Split(w.path)
	tmp := layer.Join(dir, migName())
	undo := func() {
		r.cmd(bg, w, "thaw")
		d.unlinkPointer(bg, w.h, tmp)
	}
	size, err := r.copyFile(ctx, w, tmp)
	if err != nil {
		undo()
		return r.migrateErr(err)
	}
	err = r.cmd(ctx, w, "freeze")
	frozen := time.Now()
	switch {
	case errors.Is(err, syscall.ESTALE) && last && size <= smallFile:
		r.count(func(st *RebalanceStats) { st.Retries++ })
		d.unlinkPointer(bg, w.h, tmp)
		if size, err = r.copyFile(ctx, w, tmp); err != nil {
			undo()
			return r.migrateErr(err)
		}
	case errors.Is(err, syscall.ESTALE):
		undo()
		r.count(func(st *RebalanceStats) { st.Retries++ })
		return errChanged
	case errors.Is(err, syscall.EMLINK):
		undo()
		w.attr.Nlink = 2
		return r.linkPointer(ctx, w) // linked while copied
	case err != nil:
		undo()
		return r.migrateErr(err)
	}
	if time.Since(frozen) > freezeBudget {
		undo()
		return fmt.Errorf("copy under the freeze too slow: %w", errBusy)
	}
	if err := r.switchName(ctx, w, tmp); err != nil {
		undo()
		return err
	}
	if err := r.finish(ctx, w); err != nil {
		return err
	}
	r.count(func(st *RebalanceStats) { st.Moved++; st.Bytes += size })
	return nil
}

// migrateErr turns what the bricks answered about a file into the
// rebalance's verdict: gone (nothing to do), not all bricks up (later).
func (r *rebalancer) migrateErr(err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESTALE):
		return nil // removed or renamed meanwhile: its new name is placed by its own operation
	case errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.EAGAIN):
		return fmt.Errorf("%w: %w", errBusy, err) // a set not all up, or not healed
	}
	return err
}

// finish tells the bricks of w.c, which hold the file frozen, that it now
// lives on w.h (they remove its old name). If the bricks refuse (the
// freeze expired, and the file may have changed since the copy), the
// switch is undone: the copy on w.h is removed, and the file stays where
// it was, found through the previous layout.
func (r *rebalancer) finish(ctx context.Context, w work) error {
	d := r.d
	bg := context.WithoutCancel(ctx)
	if err := r.cmd(bg, w, "moved", d.children[w.h].ID); err != nil {
		if a, lerr := d.child(w.h).Lookup(bg, w.path); lerr == nil && a.Linkto == "" && a.Gfid == w.attr.Gfid {
			if uerr := d.child(w.h).Unlink(bg, w.path); uerr != nil {
				d.log.Error("rebalance: switch not undone; the file has two copies", "path", w.path, "err", uerr)
			}
		}
		r.cmd(bg, w, "thaw")
		return fmt.Errorf("not converted on %s: %w", d.children[w.c].ID, errors.Join(errBusy, err))
	}
	return nil
}

// recover completes the move of a file that an earlier run switched to
// w.h before it died: the copy on w.h is the file now (clients find it
// first); the old copy is frozen and converted. Changes made since through
// files opened before the switch are lost (see the package documentation).
func (r *rebalancer) recover(ctx context.Context, w work) error {
	bg := context.WithoutCancel(ctx)
	err := r.cmd(ctx, w, "freeze")
	if err == nil || errors.Is(err, syscall.ESTALE) {
		err = r.cmd(bg, w, "moved", r.d.children[w.h].ID)
	}
	if err != nil {
		r.cmd(bg, w, "thaw")
		return r.migrateErr(err)
	}
	r.d.log.Warn("rebalance: finished the move of a file an earlier run left switched", "path", w.path)
	r.count(func(st *RebalanceStats) { st.Moved++ })
	return nil
}

// copyFile copies w's file to tmp on w.h with the same gfid: data in
// chunks (chunks of zeros are left as holes), size, user xattrs, then
// mode and times. It returns the size copied.
func (r *rebalancer) copyFile(ctx context.Context, w work, tmp string) (uint64, error) {
	d := r.d
	src, err := d.child(w.c).Open(ctx, w.path, syscall.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer src.Release(context.WithoutCancel(ctx))
	a, err := src.Getattr(ctx)
	if err != nil {
		return 0, err
	}
	in := layer.CreateIn{
		Owner: layer.Owner{Uid: a.Uid, Gid: a.Gid, Gfid: w.attr.Gfid},
		Flags: syscall.O_RDWR | syscall.O_EXCL,
		Mode:  a.Mode & 07777,
	}
	var dst layer.File
	err = d.withParent(ctx, w.h, tmp, func() error {
		var err error
		dst, _, err = d.child(w.h).Create(ctx, tmp, in)
		return err
	})
	if err != nil {
		return 0, err
	}
	defer dst.Release(context.WithoutCancel(ctx))
	size, err := copyData(ctx, src, dst)
	if err != nil {
		return 0, err
	}
	if err := r.copyXattrs(ctx, w, tmp); err != nil {
		return 0, err
	}
	if a, err = src.Getattr(ctx); err != nil {
		return 0, err
	}
	_, err = dst.Setattr(ctx, layer.SetattrIn{
		Valid: layer.SetMode | layer.SetAtime | layer.SetMtime,
		Mode:  a.Mode & 07777, Atime: a.Atime, Mtime: a.Mtime,
	})
	return size, err
}

// copyData copies src to dst up to src's end and returns the size.
func copyData(ctx context.Context, src, dst layer.File) (uint64, error) {
	buf := make([]byte, copyChunk)
	zeros := make([]byte, copyChunk)
	var off int64
	for {
		n, err := src.Read(ctx, buf, off)
		if err != nil {
			return 0, err
		}
		if n > 0 && !bytes.Equal(buf[:n], zeros[:n]) {
			if _, err := dst.Write(ctx, buf[:n], off); err != nil {
				return 0, err
			}
		}
		off += int64(n)
		if n < len(buf) {
			break
		}
	}
	if _, err := dst.Setattr(ctx, layer.SetattrIn{Valid: layer.SetSize, Size: uint64(off)}); err != nil {
		return 0, err
	}
	return uint64(off), nil
}

// copyXattrs copies the user xattrs of w's file to tmp on w.h.
func (r *rebalancer) copyXattrs(ctx context.Context, w work, tmp string) error {
	d := r.d
	names, err := d.child(w.c).Listxattr(ctx, w.path)
	if err != nil {
		return err
	}
	for _, name := range names {
		v, err := d.child(w.c).Getxattr(ctx, w.path, name)
		if errors.Is(err, syscall.ENODATA) {
			continue
		}
		if err != nil {
			return err
		}
		if err := d.child(w.h).Setxattr(ctx, tmp, name, v, 0); err != nil {
			return err
		}
	}
	return nil
}
