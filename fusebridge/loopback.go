package fusebridge

import (
	"log/slog"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// MountLoopback mounts the directory dir at mountpoint through go-fuse's
// loopback file system (fs.NewLoopbackRoot), which does every operation on
// dir and nothing else, and starts serving it. It mounts with the kernel
// settings of Mount for the same opts (cache timeouts, 1 MiB requests and
// read-ahead, background requests, default_permissions, locks, allow_other
// if asked): what it measures is what the kernel's FUSE boundary alone
// costs, the ceiling any FUSE file system on this machine can reach,
// mortar's included.
//
// The kernel's FUSE passthrough (which hands the reads and writes of an
// open file to the backing file, bypassing the server) is turned off:
// mortar's data cannot take that path, so a ceiling with it would not be
// one. /proc/mounts shows the mount as fuse.passthrough, with dir as its
// source unless opts.FsName says otherwise. opts.FileCapabilities means
// nothing here: the loopback reads security.capability from dir.
func MountLoopback(dir, mountpoint string, opts Options) (*fuse.Server, error) {
	opts.setDefaults()
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		return nil, err
	}
	mo := opts.mountOptions()
	mo.Name = "passthrough"
	if opts.FsName == "" {
		mo.FsName = dir
	}
	mo.DisabledCapabilities |= fuse.CAP_PASSTHROUGH
	fo := &fs.Options{MountOptions: *mo,
		AttrTimeout: &opts.AttrTimeout, EntryTimeout: &opts.EntryTimeout, NegativeTimeout: &opts.NegativeTimeout,
		Logger: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn)} // go-fuse's "something seems off"
	return serve(fs.NewNodeFS(root, fo), mountpoint, &fo.MountOptions, opts)
}
