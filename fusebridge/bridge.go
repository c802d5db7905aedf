// Package fusebridge exposes a layer stack to the kernel through FUSE.
package fusebridge

import (
	"log/slog"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/mortarfs/mortar/layer"
)

// Options tune a mount.
type Options struct {
	FsName          string // shown as the source in /proc/mounts, e.g. "host:/gv0"
	AttrTimeout     time.Duration
	EntryTimeout    time.Duration
	NegativeTimeout time.Duration
	AllowOther      bool
	Debug           bool
	Logger          *slog.Logger
}

// Mount mounts top at mountpoint and starts serving it. The returned
// server's Wait returns when the file system is unmounted.
func Mount(mountpoint string, top layer.Layer, opts Options) (*fuse.Server, error) { panic("TODO") }
