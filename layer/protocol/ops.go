package protocol

import (
	"context"
	"fmt"
	"math"
	"syscall"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

var (
	_ layer.Layer      = (*Client)(nil)
	_ layer.DataLooker = (*Client)(nil)
)

// decoded turns a response decoding failure into EIO.
func decoded(d *wire.Dec) error {
	if err := d.Done(); err != nil {
		return fmt.Errorf("bad answer from brick: %v: %w", err, syscall.EIO)
	}
	return nil
}

func (c *Client) attrCall(ctx context.Context, req *wire.Request) (layer.Attr, error) {
	d, err := c.call(ctx, req)
	if err != nil {
		return layer.Attr{}, err
	}
	a := d.Attr()
	return a, decoded(d)
}

func (c *Client) noReply(ctx context.Context, req *wire.Request) error {
	_, err := c.call(ctx, req)
	return err
}

func (c *Client) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	return c.attrCall(ctx, &wire.Request{Op: wire.OpLookup, Path: path})
}

// LookupData asks the brick for the attributes and, for a regular file of
// at most limit bytes, the content (see layer.DataLooker). The brick caps
// max at 1 MiB.
func (c *Client) LookupData(ctx context.Context, path string, limit int) (layer.Attr, []byte, error) {
	return c.lookupData(ctx, path, limit, 0)
}

var _ layer.FragmentLooker = (*Client)(nil)

// LookupFragment is LookupData of the file as the brick holds it
// (layer.FragmentLooker).
func (c *Client) LookupFragment(ctx context.Context, path string, limit int) (layer.Attr, []byte, error) {
	return c.lookupData(ctx, path, limit, wire.LookupFragment)
}

func (c *Client) lookupData(ctx context.Context, path string, limit int, flags uint32) (layer.Attr, []byte, error) {
	d, err := c.call(ctx, &wire.Request{Op: wire.OpLookupData, Path: path, Max: uint32(min(max(limit, 0), math.MaxUint32)), Flags: flags})
	if err != nil {
		return layer.Attr{}, nil, err
	}
	a, data := d.LookupData()
	return a, data, decoded(d)
}

func (c *Client) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	return c.setattr(ctx, path, in)
}

func (c *Client) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	return c.attrCall(ctx, &wire.Request{Op: wire.OpMknod, Path: path, Owner: in.Owner,
		Mode: in.Mode, Rdev: in.Rdev, Linkto: in.Linkto})
}

func (c *Client) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	return c.mkdir(ctx, path, in)
}

func (c *Client) Symlink(ctx context.Context, path string, in layer.SymlinkIn) (layer.Attr, error) {
	return c.attrCall(ctx, &wire.Request{Op: wire.OpSymlink, Path: path, Owner: in.Owner, Target: in.Target})
}

func (c *Client) Readlink(ctx context.Context, path string) (string, error) {
	d, err := c.call(ctx, &wire.Request{Op: wire.OpReadlink, Path: path})
	if err != nil {
		return "", err
	}
	t := d.Str()
	return t, decoded(d)
}

func (c *Client) Unlink(ctx context.Context, path string) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpUnlink, Path: path})
}

// UnlinkData is Unlink, refused with EREMOTE for a pointer file
// (layer.DataUnlinker).
func (c *Client) UnlinkData(ctx context.Context, path string) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpUnlinkData, Path: path})
}

func (c *Client) Rmdir(ctx context.Context, path string) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpRmdir, Path: path})
}

func (c *Client) Rename(ctx context.Context, oldpath, newpath string, flags uint32) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpRename, Path: oldpath, Path2: newpath, Flags: flags})
}

// RenameSource is Rename naming the inode it moves (layer.SourceRenamer;
// a brick of protocol version 13).
func (c *Client) RenameSource(ctx context.Context, oldpath, newpath string, flags uint32, src layer.Gfid) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpRename, Path: oldpath, Path2: newpath, Flags: flags, Gfid: src})
}

func (c *Client) Link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	return c.attrCall(ctx, &wire.Request{Op: wire.OpLink, Path: oldpath, Path2: newpath})
}

func (c *Client) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, layer.Attr{}, err
	}
	req := &wire.Request{Op: wire.OpCreate, Path: path, Owner: in.Owner, Flags: in.Flags, Mode: in.Mode}
	if len(in.Data) > layer.MaxCreateData {
		return nil, layer.Attr{}, syscall.EINVAL
	}
	if len(in.Data) > 0 || in.Set.Valid != 0 {
		req.Op, req.Data, req.Setattr = wire.OpMake, in.Data, in.Set // made in one go
	}
	cl, err := c.roundTrip(ctx, s, req, nil, nil)
	if err == nil {
		d := wire.Dec{B: cl.payload}
		fh := d.U64()
		a := d.Attr()
		if err = decoded(&d); err == nil {
			s.named(req, nil)
			return c.newFile(s, fh, path, in.Flags), a, nil
		}
	}
	s.named(req, err)
	return nil, layer.Attr{}, err
}

func (c *Client) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	s, fh, err := c.open(ctx, path, flags)
	if err != nil {
		return nil, err
	}
	return c.newFile(s, fh, path, flags), nil
}

func (c *Client) open(ctx context.Context, path string, flags uint32) (*session, uint64, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, 0, err
	}
	cl, err := c.roundTrip(ctx, s, &wire.Request{Op: wire.OpOpen, Path: path, Flags: flags}, nil, nil)
	if err != nil {
		return nil, 0, err
	}
	d := wire.Dec{B: cl.payload}
	fh := d.U64()
	return s, fh, decoded(&d)
}

func (c *Client) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	d, err := c.call(ctx, &wire.Request{Op: wire.OpReaddir, Path: path, Cookie: cookie, Max: uint32(max), Flags: wire.ReaddirTargets})
	if err != nil {
		return layer.DirPage{}, err
	}
	p := d.DirPage(true)
	return p, decoded(d)
}

func (c *Client) Statfs(ctx context.Context, path string) (layer.Statfs, error) {
	d, err := c.call(ctx, &wire.Request{Op: wire.OpStatfs, Path: path})
	if err != nil {
		return layer.Statfs{}, err
	}
	st := d.Statfs()
	return st, decoded(d)
}

func (c *Client) Getxattr(ctx context.Context, path, name string) ([]byte, error) {
	d, err := c.call(ctx, &wire.Request{Op: wire.OpGetxattr, Path: path, Name: name})
	if err != nil {
		return nil, err
	}
	return d.B, nil
}

func (c *Client) Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpSetxattr, Path: path, Name: name, Value: value, Flags: flags})
}

func (c *Client) Listxattr(ctx context.Context, path string) ([]string, error) {
	d, err := c.call(ctx, &wire.Request{Op: wire.OpListxattr, Path: path})
	if err != nil {
		return nil, err
	}
	names := d.Strs()
	return names, decoded(d)
}

func (c *Client) Removexattr(ctx context.Context, path, name string) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpRemovexattr, Path: path, Name: name})
}
