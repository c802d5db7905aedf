package protocol

import (
	"context"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

var _ layer.HealStore = (*Client)(nil)

// HealIndex lists the brick's heal index.
func (c *Client) HealIndex(ctx context.Context, after layer.Gfid, max int) ([]layer.HealEntry, error) {
	d, err := c.call(ctx, &wire.Request{Op: wire.OpHealIndex, Gfid: after, Max: uint32(max)})
	if err != nil {
		return nil, err
	}
	n := d.U32()
	var out []layer.HealEntry
	for i := uint32(0); i < n && d.Err == nil; i++ {
		out = append(out, layer.HealEntry{Gfid: d.Gfid(), Path: d.Str(), Pending: d.U64()})
	}
	return out, decoded(d)
}

// MarkPending adds mask to the pending marks of the inode at path.
func (c *Client) MarkPending(ctx context.Context, path string, g layer.Gfid, mask uint64) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpMarkPending, Path: path, Gfid: g, Pending: mask})
}

// ClearPending removes mask from the marks of the inode at path if it is
// unchanged since ctime.
func (c *Client) ClearPending(ctx context.Context, path string, g layer.Gfid, mask uint64, ctime layer.Timespec) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpClearPending, Path: path, Gfid: g, Pending: mask, Ctime: ctime})
}

// DropHealEntry removes the heal index entry of g if it still records
// path (any path if empty).
func (c *Client) DropHealEntry(ctx context.Context, g layer.Gfid, path string) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpDropHealEntry, Gfid: g, Path: path})
}

// Removed lists the brick's removal records of directory dir.
func (c *Client) Removed(ctx context.Context, dir string) ([]layer.Removal, error) {
	d, err := c.call(ctx, &wire.Request{Op: wire.OpRemoved, Path: dir})
	if err != nil {
		return nil, err
	}
	n := d.U32()
	var out []layer.Removal
	for i := uint32(0); i < n && d.Err == nil; i++ {
		out = append(out, layer.Removal{Gfid: d.Gfid(), Name: d.Str()})
	}
	return out, decoded(d)
}

var _ layer.EntryLocker = (*Client)(nil)

// LockEntries asks the brick to hold the names of dir still.
func (c *Client) LockEntries(ctx context.Context, dir string) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpEntrylk, Path: dir, Flags: wire.EntrylkLock})
}

// UnlockEntries lets the names of dir go.
func (c *Client) UnlockEntries(ctx context.Context, dir string) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpEntrylk, Path: dir, Flags: wire.EntrylkUnlock})
}

var _ layer.HealLeaser = (*Client)(nil)

// LeaseHeal takes the brick's heal lease (or keeps it).
func (c *Client) LeaseHeal(ctx context.Context) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpEntrylk, Path: "/", Flags: wire.EntrylkLease})
}

// UnleaseHeal lets the brick's heal lease go.
func (c *Client) UnleaseHeal(ctx context.Context) error {
	return c.noReply(ctx, &wire.Request{Op: wire.OpEntrylk, Path: "/", Flags: wire.EntrylkUnlease})
}
