package fusebridge

import (
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// xattrCapability holds file capabilities; the kernel reads it before every
// write.
const xattrCapability = "security.capability"

// aclPrefix names the POSIX ACL xattrs. mortar has no ACLs (the mount does
// not negotiate them), so they are refused here instead of costing a round
// trip to a brick that would refuse them too; `cp -a` tries one per file.
const aclPrefix = "system.posix_acl_"

// GetXAttr answers the size of the value for a zero-sized buffer (a size
// probe) and ERANGE with the size for a buffer too small.
func (b *bridge) GetXAttr(cancel <-chan struct{}, in *fuse.InHeader, name string, dest []byte) (uint32, fuse.Status) {
	if name == xattrCapability && !b.opts.FileCapabilities {
		return 0, fuse.ENODATA // see Options.FileCapabilities
	}
	if strings.HasPrefix(name, aclPrefix) {
		return 0, fuse.Status(syscall.EOPNOTSUPP)
	}
	p, err := b.nodes.pathOf(in.NodeId)
	if err != nil {
		return 0, errStatus(err)
	}
	v, err := b.top.Getxattr(b.ctx(), p, name)
	if err != nil {
		return 0, b.status("getxattr", p, err)
	}
	return sized(dest, v)
}

func (b *bridge) ListXAttr(cancel <-chan struct{}, in *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	p, err := b.nodes.pathOf(in.NodeId)
	if err != nil {
		return 0, errStatus(err)
	}
	names, err := b.top.Listxattr(b.ctx(), p)
	if err != nil {
		return 0, b.status("listxattr", p, err)
	}
	var list []byte
	for _, n := range names {
		list = append(list, n...)
		list = append(list, 0)
	}
	return sized(dest, list)
}

func sized(dest, v []byte) (uint32, fuse.Status) {
	switch {
	case len(dest) == 0:
		return uint32(len(v)), fuse.OK
	case len(dest) < len(v):
		return uint32(len(v)), fuse.ERANGE
	}
	return uint32(copy(dest, v)), fuse.OK
}

func (b *bridge) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, name string, data []byte) fuse.Status {
	if strings.HasPrefix(name, aclPrefix) {
		return fuse.Status(syscall.EOPNOTSUPP)
	}
	p, err := b.nodes.pathOf(in.NodeId)
	if err != nil {
		return errStatus(err)
	}
	if int(in.Size) < len(data) {
		data = data[:in.Size]
	}
	return b.status("setxattr", p, b.top.Setxattr(b.ctx(), p, name, data, in.Flags))
}

func (b *bridge) RemoveXAttr(cancel <-chan struct{}, in *fuse.InHeader, name string) fuse.Status {
	p, err := b.nodes.pathOf(in.NodeId)
	if err != nil {
		return errStatus(err)
	}
	return b.status("removexattr", p, b.top.Removexattr(b.ctx(), p, name))
}
