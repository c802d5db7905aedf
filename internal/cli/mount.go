package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/client"
	"github.com/mortarfs/mortar/fusebridge"
	"github.com/mortarfs/mortar/tlsconf"
	"github.com/mortarfs/mortar/volume"
)

// helperName is the name mount(8) runs for file system type "mortar".
const helperName = "mount.mortar"

// specTimeout bounds fetching a volume's spec at mount time.
const specTimeout = 30 * time.Second

// mountRequest is one mount to make, from `mortar mount` or mount.mortar.
type mountRequest struct {
	Source     string // SERVER:/NAME as given, shown in /proc/mounts
	Server     string // management address host:port
	Volume     string
	Mountpoint string // absolute
	Opts       mountOptions
	Foreground bool
	Fake       bool // check everything, mount nothing (mount -f)
	LogFile    string
}

func newMountCommand() *cobra.Command {
	var optLists []string
	var foreground bool
	var logFile string
	cmd := &cobra.Command{
		Use:   "mount [-o OPTIONS] [-f] SERVER:/VOLUME MOUNTPOINT",
		Short: "Mount a volume with FUSE",
		Long: `Mount a started volume at MOUNTPOINT. SERVER is the host (or host:port) of any
node of the cluster; the volume's layout is fetched from it.

The mount follows the changes of the volume — options set with "mortar volume
set", bricks added, removed or replaced, bricks that come back on new ports —
without being remounted: new operations use the new layout at once, files open
at the change finish on the old one, which is then freed. While the server is
unreachable (or the volume stopped), the mount goes on with the layout it has;
once a rebalance has moved on from that layout, the bricks refuse it new names
(creates, mkdirs, links and renames fail with EIO) until it reaches a node.
The kernel cache timeouts are those of mount time.

By default the mount runs in the background: the command returns once the
volume is mounted (or prints why it could not be), and the mount process logs
to --log-file (default /var/log/mortar/mount-VOLUME-MOUNTPOINT.log). With -f it
stays in the foreground and logs to stderr. Unmount with "umount MOUNTPOINT"
(or Ctrl-C / SIGTERM to the mount process).

` + mountOptionHelp + `

mount(8) and /etc/fstab can mount mortar volumes too, after "mortar install":
  mount -t mortar server1:/gv0 /mnt/gv0
  server1:/gv0  /mnt/gv0  mortar  defaults,_netdev  0 0`,
		Example: `  mortar mount localhost:/gv0 /mnt/gv0
  mortar mount -o attr-timeout=0,entry-timeout=0 -f server1:7420:/gv0 /mnt/gv0`,
		Args: usageArgs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := newMountRequest(args[0], args[1], optLists, false)
			if err != nil {
				return fmt.Errorf("mortar mount: %w", err)
			}
			req.Foreground = foreground
			if logFile != "" {
				req.LogFile = logFile
			}
			if err := runMount(req, cmd.ErrOrStderr()); err != nil {
				return fmt.Errorf("mortar mount: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&optLists, "options", "o", nil, "mount options, comma separated (see above)")
	f.BoolVarP(&foreground, "foreground", "f", false, "stay in the foreground, logging to stderr")
	f.StringVar(&logFile, "log-file", "", "log file of a background mount")
	return cmd
}

// mountHelperMain runs as mount.mortar, called by mount(8).
func mountHelperMain(args []string, stderr io.Writer) int {
	h, err := parseHelperArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", helperName, err)
		return 1
	}
	req, err := newMountRequest(h.Source, h.Dir, h.Options, h.Sloppy)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", helperName, err)
		return 1
	}
	req.Fake = h.Fake
	if h.Verbose && req.Opts.LogLevel == "" {
		req.Opts.LogLevel = "debug"
	}
	if err := runMount(req, stderr); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", helperName, err)
		return 32 // mount(8)'s "mount failure"
	}
	return 0
}

// newMountRequest checks the source, mountpoint and options of a mount.
func newMountRequest(source, dir string, optLists []string, sloppy bool) (mountRequest, error) {
	server, name, err := parseSource(source)
	if err != nil {
		return mountRequest{}, err
	}
	opts, err := parseMountOptions(optLists, sloppy)
	if err != nil {
		return mountRequest{}, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return mountRequest{}, fmt.Errorf("mountpoint %s: %w", dir, err)
	}
	req := mountRequest{Source: source, Server: server, Volume: name, Mountpoint: abs, Opts: opts}
	req.LogFile = opts.LogFile
	if req.LogFile == "" {
		req.LogFile = defaultMountLog(name, abs)
	}
	return req, nil
}

// runMount mounts in the foreground, or in a background process that
// reports back when the mount is live.
func runMount(req mountRequest, stderr io.Writer) error {
	if err := checkMountpoint(req.Mountpoint); err != nil {
		return err
	}
	if req.Fake {
		return nil
	}
	if ready, ok := daemonReadyPipe(); ok {
		return serveMountDaemon(req, ready)
	}
	if req.Foreground {
		level := req.Opts.LogLevel
		if level == "" {
			level = "info"
		}
		log, err := newLogger(stderr, level)
		if err != nil {
			return err
		}
		return mountAndServe(req, log, func(err error) {
			if err == nil {
				fmt.Fprintf(stderr, "mounted %s at %s (Ctrl-C to unmount)\n", req.Source, req.Mountpoint)
			}
		})
	}
	return startMountDaemon(req)
}

// checkMountpoint refuses a mountpoint that is not a usable directory.
func checkMountpoint(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, syscall.ENOTCONN):
		return fmt.Errorf("mountpoint %s: a previous mount died (transport endpoint is not connected); run \"umount %s\" first", dir, dir)
	case err != nil:
		return fmt.Errorf("mountpoint %w", err)
	case !st.IsDir():
		return fmt.Errorf("mountpoint %s is not a directory", dir)
	}
	return nil
}

// mountAndServe fetches the spec, builds the client graph, mounts it and
// serves until the mount goes away (umount) or SIGINT/SIGTERM unmounts it.
// ready is called once, with nil when the mount is live.
func mountAndServe(req mountRequest, log *slog.Logger, ready func(error)) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	mc, err := req.api()
	if err != nil {
		ready(err)
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), specTimeout)
	spec, err := mc.Spec(ctx, req.Volume)
	cancel()
	if err != nil {
		err = fmt.Errorf("volume %s on %s: %w", req.Volume, req.Server, err)
		ready(err)
		return err
	}
	srv, vol, err := mountSpec(spec, req, log)
	if err != nil {
		ready(err)
		return err
	}
	defer vol.Close()
	log.Info("mounted", "source", req.Source, "mountpoint", req.Mountpoint, "volume_id", spec.ID, "bricks", len(spec.Bricks),
		"spec_version", spec.Version, "follow", !req.Opts.NoFollow)
	ready(nil)
	serveUntilUnmounted(srv, sigs, req.Mountpoint, log)
	log.Info("unmounted", "mountpoint", req.Mountpoint)
	return nil
}

// mountSpec opens spec's volume (client.OpenSpec) and mounts it at
// req.Mountpoint. Unless -o no-follow, the mount then follows the
// volume's spec as req.Server publishes it. Close the returned volume
// after the file system is unmounted.
func mountSpec(spec volume.Spec, req mountRequest, log *slog.Logger) (*fuse.Server, *client.Volume, error) {
	id, err := req.identity()
	if err != nil {
		return nil, nil, err
	}
	// The kernel forgets what other clients change, when the volume's
	// features.cache-invalidation is on (now or after a volume set).
	kernel := fusebridge.NewNotifier()
	v, err := client.OpenSpec(spec, client.Options{Logger: log, Build: volume.BuildOptions{OnChange: kernel.Changed},
		KeyFile: req.Opts.KeyFile, TLS: id})
	if err != nil {
		return nil, nil, err
	}
	fo := fuseOptions(spec, req, log)
	fo.Notifier = kernel
	// Page caches kept across opens only while other clients' changes are
	// told (a later volume set does not change a mount's choice).
	fo.KeepCache = spec.ClientCache() && spec.Option(options.OptCacheInvalidation, "off") == "on"
	srv, err := fusebridge.Mount(req.Mountpoint, v.Layer(), fo)
	if err != nil {
		v.Close()
		return nil, nil, fmt.Errorf("mount %s at %s: %w", req.Source, req.Mountpoint, err)
	}
	if !req.Opts.NoFollow && req.Server != "" {
		mc, _ := req.api() // the identity loaded above
		v.Follow(mc, req.Volume)
	}
	return srv, v, nil
}

// identity is the TLS identity the mount presents (-o tls-dir, tls-name,
// else MORTAR_TLS_DIR, MORTAR_TLS_NAME), nil for a plain cluster.
func (req mountRequest) identity() (*tlsconf.Identity, error) {
	id, err := tlsconf.FromFlags(req.Opts.TLSDir, req.Opts.TLSName)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", req.Source, err)
	}
	return id, nil
}

// api returns a client of the management node the mount gets its spec
// from.
func (req mountRequest) api() (*api.Client, error) {
	id, err := req.identity()
	if err != nil {
		return nil, err
	}
	if id != nil {
		return api.NewTLSClient(req.Server, id), nil
	}
	secret, err := loadSecretFlag(req.Opts.SecretFile)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", req.Source, err)
	}
	return api.NewClient(req.Server).WithSecret(secret), nil
}

// fuseOptions takes the cache timeouts from -o, else from the volume's
// options; with performance.client-cache off, they are 0 unless set.
func fuseOptions(spec volume.Spec, req mountRequest, log *slog.Logger) fusebridge.Options {
	pick := func(o *time.Duration, key string, def time.Duration) time.Duration {
		if !spec.ClientCache() {
			def = 0
		}
		d := spec.DurationOption(key, def)
		if o != nil {
			d = *o
		}
		if d == 0 {
			return -1 // fusebridge: negative disables the cache, zero is its default
		}
		return d
	}
	return fusebridge.Options{
		FsName:          req.Source,
		AttrTimeout:     pick(req.Opts.AttrTimeout, options.OptAttrTimeout, time.Second),
		EntryTimeout:    pick(req.Opts.EntryTimeout, options.OptEntryTimeout, time.Second),
		NegativeTimeout: pick(req.Opts.NegativeTimeout, options.OptNegativeTimeout, 0),
		AllowOther:      os.Geteuid() == 0,
		Debug:           req.Opts.Debug,
		Logger:          log,
	}
}

// serveUntilUnmounted waits until the file system is unmounted; a signal
// unmounts it (a busy mount stays, and the next signal tries again).
func serveUntilUnmounted(srv *fuse.Server, sigs <-chan os.Signal, mountpoint string, log *slog.Logger) {
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			return
		case sig := <-sigs:
			log.Info("unmounting", "signal", sig.String(), "mountpoint", mountpoint)
			if err := srv.Unmount(); err != nil {
				log.Error("unmount failed; is the mount busy? send the signal again to retry", "mountpoint", mountpoint, "err", err)
			}
		}
	}
}

// unmountOnExit is for callers that own a mount in-process: it unmounts,
// retrying a busy mount a few times and detaching it lazily at last.
func unmountOnExit(srv *fuse.Server, mountpoint string, log *slog.Logger) {
	for i := 0; i < 5; i++ {
		err := srv.Unmount()
		if err == nil {
			return
		}
		log.Warn("unmount failed; retrying", "mountpoint", mountpoint, "err", err)
		time.Sleep(time.Second)
	}
	if err := syscall.Unmount(mountpoint, syscall.MNT_DETACH); err != nil {
		log.Error("lazy unmount failed", "mountpoint", mountpoint, "err", err)
	}
}
