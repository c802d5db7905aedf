package fusebridge

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/mortarfs/mortar/layer"
)

// Set-user-ID and set-group-ID bits (FUSE_HANDLE_KILLPRIV_V2): the kernel
// leaves clearing them to the bridge, flagging the writes, truncates and
// opens with O_TRUNC of callers without CAP_FSETID, and every chown. The
// bridge clears them as a local file system would, from the mode it last
// told the kernel (node.mode) — the mode the kernel itself would have
// judged by, without a round trip to fetch it: in the same SETATTR for a
// truncate or chown, and by a SETATTR after a write or an open only when
// the file has such bits.

// killed returns mode without the bits a write by an unprivileged caller
// clears (set-group-ID only with group execute: without, it marks
// mandatory locking), and whether that changed anything.
func killed(mode uint32) (uint32, bool) {
	m := mode & 07777
	if m&syscall.S_ISUID != 0 {
		m &^= syscall.S_ISUID
	}
	if m&(syscall.S_ISGID|syscall.S_IXGRP) == syscall.S_ISGID|syscall.S_IXGRP {
		m &^= syscall.S_ISGID
	}
	return m, m != mode&07777
}

// killIn adds the clearing to a SETATTR the kernel flagged, unless it
// sets the mode itself.
func killIn(s *layer.SetattrIn, in *fuse.SetAttrIn, n *node) {
	if in.Valid&fuse.FATTR_KILL_SUIDGID == 0 || s.Valid&layer.SetMode != 0 || n == nil {
		return
	}
	if m, kill := killed(n.mode.Load()); kill {
		s.Valid |= layer.SetMode
		s.Mode = m
	}
}

// killPriv clears the bits of the file open as f after a flagged write or
// truncating open, if it has them.
func (b *bridge) killPriv(n *node, f layer.File) error {
	m, kill := killed(n.mode.Load())
	if !kill {
		return nil
	}
	a, err := f.Setattr(context.Background(), layer.SetattrIn{Valid: layer.SetMode, Mode: m})
	if err == nil {
		n.mode.Store(a.Mode)
		b.touch(n)
	}
	return err
}
