package cli

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/fusebridge"
)

func newPassthroughCommand() *cobra.Command {
	var noCache bool
	cmd := &cobra.Command{
		Use:   "passthrough [--no-cache] DIR MOUNTPOINT",
		Short: "Mount a local directory through a plain FUSE loopback, to measure the FUSE ceiling",
		Long: `Mount the local directory DIR at MOUNTPOINT through go-fuse's loopback file
system, which does each operation on DIR and nothing else, and serve it in the
foreground until SIGINT or SIGTERM (then unmount) or until it is unmounted.

It is for measuring what the kernel's FUSE boundary alone costs on this
machine: the ceiling any FUSE file system, mortar included, can reach over the
same disk. "mortar bench" runs it as its fuse-passthrough target. It mounts
with the kernel settings of "mortar mount": attribute and entry cache 1 s, no
negative cache, reads and writes of up to 1 MiB, 1 MiB read-ahead, 64
background requests, default_permissions, locks, allow_other as root. The
kernel's FUSE passthrough (reads and writes of an open file handed to the
backing file, bypassing the server) stays off: mortar's data cannot take that
path.

It logs to stderr. Mounting needs root (other users: fusermount, from fuse3).`,
		Example: `  mortar passthrough /var/tmp/data /mnt/pass &
  fio --directory=/mnt/pass ...; kill %1`,
		Args: usageArgs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runPassthrough(cmd, args[0], args[1], noCache); err != nil {
				return fmt.Errorf("mortar passthrough: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noCache, "no-cache", false,
		"kernel attribute, entry and negative caches off (as mount -o attr-timeout=0,entry-timeout=0,negative-timeout=0)")
	return cmd
}

// runPassthrough mounts dir at mountpoint and serves it until a signal or
// an unmount.
func runPassthrough(cmd *cobra.Command, dir, mountpoint string, noCache bool) error {
	dir, mountpoint, err := passthroughDirs(dir, mountpoint)
	if err != nil {
		return err
	}
	log, err := newLogger(cmd.ErrOrStderr(), "info")
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	opts := fusebridge.Options{AttrTimeout: time.Second, EntryTimeout: time.Second, NegativeTimeout: -1,
		AllowOther: os.Geteuid() == 0, Logger: log}
	if noCache {
		opts.AttrTimeout, opts.EntryTimeout = -1, -1 // fusebridge: negative is none
	}
	srv, err := fusebridge.MountLoopback(dir, mountpoint, opts)
	if err != nil {
		return fmt.Errorf("mount %s at %s: %w", dir, mountpoint, err)
	}
	log.Info("mounted", "dir", dir, "mountpoint", mountpoint, "no_cache", noCache)
	serveUntilUnmounted(srv, sigs, mountpoint, log)
	log.Info("unmounted", "mountpoint", mountpoint)
	return nil
}

// passthroughDirs makes dir and mountpoint absolute and checks them: both
// existing directories, neither inside the other (the loopback reaches dir
// by path: through its own mount, it would call itself).
func passthroughDirs(dir, mountpoint string) (string, string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	if mountpoint, err = filepath.Abs(mountpoint); err != nil {
		return "", "", err
	}
	if st, err := os.Stat(dir); err != nil {
		return "", "", err
	} else if !st.IsDir() {
		return "", "", fmt.Errorf("%s is not a directory", dir)
	}
	if err := checkMountpoint(mountpoint); err != nil {
		return "", "", err
	}
	if within(dir, mountpoint) || within(mountpoint, dir) {
		return "", "", fmt.Errorf("%s and %s: neither may be inside the other", dir, mountpoint)
	}
	return dir, mountpoint, nil
}

// within reports whether path is dir or below it (both clean and
// absolute).
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
