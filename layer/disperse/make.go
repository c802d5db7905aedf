package disperse

import (
	"context"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Files made in one go (write-behind's create-behind): an exclusive create
// that carries the file's first bytes and attribute changes
// (layer.CreateIn's Data and Set) sends every brick the records of its
// fragment — each stripe the bytes touch, encoded whole — and the changes,
// in the one round trip of the create; the bricks record the file's size
// with the write. The file is new, and while the client owns the name
// (layer.NameLeaser) no other client can open it, so the make takes no
// writers' lock and leaves no Dirty mark: a brick either holds the whole
// fragment or, its create undone when the write failed, no file; a brick
// the make missed is marked as a create's is, and healed.

var _ layer.NameLeaser = (*Disperse)(nil)

// OwnsName reports whether the client owns path's name: a set's names are
// replicated, so every brick of the set must lease it (replicate).
func (d *Disperse) OwnsName(path string) (layer.Attr, bool) { return d.Replicate.OwnsName(path) }

// MadeName reports whether the client made path where it still owns the
// names (replicate).
func (d *Disperse) MadeName(path string) bool { return d.Replicate.MadeName(path) }

// make creates path with in.Data and in.Set in one go if it can, and
// otherwise in steps: a create that is not exclusive, a size change, a
// fragment over MaxCreateData, and a name the client no longer owns (the
// lease went with a brick's connection: another client could open the new
// file on a brick between its create and its write there).
func (d *Disperse) make(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	size := int64(len(in.Data))
	if _, owned := d.OwnsName(path); !owned || in.Flags&syscall.O_EXCL == 0 || in.Set.Valid&layer.SetSize != 0 ||
		d.g.FragmentLen(size) > layer.MaxCreateData {
		return d.makeInSteps(ctx, path, in)
	}
	frags, err := d.fragmentsOf(in.Data)
	if err != nil {
		return nil, layer.Attr{}, err
	}
	defer putBufs(frags)
	if size > 0 {
		ctx = layer.WithTxn(ctx, layer.Txn{SetSize: true, Size: uint64(size)})
	}
	flags := in.Flags &^ syscall.O_TRUNC // a new file: nothing to truncate
	in.Flags = brickFlags(flags)
	rf, a, err := d.Replicate.CreateEach(ctx, path, in, func(i int, in *layer.CreateIn) {
		in.Data = nil
		if frags != nil {
			in.Data = frags[i]
		}
	})
	if err != nil {
		return nil, a, err
	}
	f, _, err := d.newFile(ctx, rf, path, flags)
	if err != nil {
		return nil, layer.Attr{}, err
	}
	a, _ = d.scale(a, nil)
	return f, a, nil
}

// fragmentsOf encodes data, a new file's content from offset 0, into
// every brick's fragment (nil for no data); putBufs gives them back.
func (d *Disperse) fragmentsOf(data []byte) ([][]byte, error) {
	ws, size, err := d.g.PlanWrite(0, data, 0, nil)
	if err != nil || len(ws) == 0 {
		return nil, err
	}
	return d.records(ws, size)
}

// makeInSteps creates path, writes in.Data and makes the changes of
// in.Set, each in its round trip; an exclusive create that fails after
// making the file removes it (as a brick's make does).
func (d *Disperse) makeInSteps(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	data, set := in.Data, in.Set
	in.Data, in.Set = nil, layer.SetattrIn{}
	f, a, err := d.Create(ctx, path, in)
	if err != nil {
		return nil, a, err
	}
	if a, err = layer.Fill(ctx, f, data, set, a); err != nil {
		f.Release(context.WithoutCancel(ctx))
		if in.Flags&syscall.O_EXCL != 0 {
			if uerr := d.Unlink(context.WithoutCancel(ctx), path); uerr != nil {
				d.log.Warn("a file made in steps that failed is left behind", "path", path, "err", err, "unlink", uerr)
			}
		}
		return nil, layer.Attr{}, err
	}
	return f, a, nil
}
