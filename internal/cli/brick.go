package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mortarfs/mortar/mgmt/brickrun"
	"github.com/mortarfs/mortar/tlsconf"
)

// newBrickCommand is `mortar brick`, the process that serves one brick.
// The node starts it (see brickrun.Args); it is hidden from help.
func newBrickCommand() *cobra.Command {
	var cfg brickrun.Config
	var logLevel string
	var readyFd int
	var authAllow, authReject string
	cmd := &cobra.Command{
		Use:   "brick --volume-id ID --brick-id ID --path DIR --listen ADDR [--arbiter | --disperse]",
		Short: "Serve one brick (started by mortar server --brick-multiplex=false, one process per brick)",
		Long: `Serve one brick of a volume on its own TCP port until SIGTERM or SIGINT.

"mortar server --brick-multiplex=false" runs one such process per brick of
its started volumes (as GlusterFS runs glusterfsd; by default one "mortar
brick-host" serves them all) and restarts them with "mortar volume start NAME
force"; there is no need to run it by hand. Logs go to stderr, which the node
points at DATA/logs/bricks/. With --ready-fd, the brick writes "ok ADDR" (or
"error: WHY") on that descriptor once it listens (or cannot).

With --tls-dir and --tls-name the brick accepts only TLS 1.3 connections
with a client certificate of the cluster's CA (DIR/ca.pem), and presents
DIR/NAME.pem. --auth-file names the volume's access rules (auth.allow and
auth.reject lines), read again at every new connection; --auth-allow and
--auth-reject give fixed rules instead.`,
		Hidden: true,
		Args:   usageArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger(cmd.ErrOrStderr(), logLevel)
			if err != nil {
				return err
			}
			cfg.Logger = log.With("volume", cfg.Volume, "brick", cfg.BrickID)
			if cfg.Auth, err = tlsconf.ParseAuth(authAllow, authReject); err != nil {
				return err
			}
			var ready io.WriteCloser
			if readyFd > 0 {
				ready = os.NewFile(uintptr(readyFd), "mortar-brick-ready")
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if err := brickrun.Run(ctx, cfg, ready); err != nil {
				return fmt.Errorf("mortar brick %s: %w", cfg.Path, err)
			}
			return nil
		},
	}
	bf := brickFlags(cmd.Flags(), &cfg, &logLevel, &authAllow, &authReject)
	bf.IntVar(&readyFd, "ready-fd", 0, "descriptor to report readiness on (0: none)")
	for _, name := range []string{"volume-id", "brick-id", "path", "listen"} {
		cmd.MarkFlagRequired(name) //nolint:errcheck // the flags exist
	}
	return cmd
}

// brickFlags defines the flags of `mortar brick` that describe the brick
// on f (the brick host reads a brick's with them too) and returns f.
func brickFlags(f *pflag.FlagSet, cfg *brickrun.Config, logLevel, authAllow, authReject *string) *pflag.FlagSet {
	f.StringVar(&cfg.Volume, "volume", "", "volume name (for logs)")
	f.StringVar(&cfg.VolumeID, "volume-id", "", "id of the volume the brick directory is marked with")
	f.StringVar(&cfg.BrickID, "brick-id", "", "id of the brick, as clients name it")
	f.StringVar(&cfg.Path, "path", "", "brick directory")
	f.StringVar(&cfg.Listen, "listen", "", "TCP address to serve on (port 0: any free port)")
	f.BoolVar(&cfg.Arbiter, "arbiter", false, "an arbiter brick: names and metadata, no file data")
	f.BoolVar(&cfg.Disperse, "disperse", false, "a brick of a disperse set: its files are fragments, their size kept apart")
	f.BoolVar(&cfg.Replicated, "replicated", false, "a brick of a replicated set: files a client went away from with writes are marked for heal")
	f.StringVar(logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&cfg.TLSDir, "tls-dir", "", "TLS directory (ca.pem, NAME.pem, NAME.key): serve TLS only")
	f.StringVar(&cfg.TLSName, "tls-name", "", "name of this node's certificate in --tls-dir")
	f.StringVar(&cfg.AuthFile, "auth-file", "", "file of the volume's access rules, read at every new connection")
	f.StringVar(authAllow, "auth-allow", "", "fixed auth.allow: certificate names, addresses, CIDRs (comma list)")
	f.StringVar(authReject, "auth-reject", "", "fixed auth.reject (same syntax; wins over --auth-allow)")
	f.IntVar(&cfg.MaxConnsPerClient, "max-conns-per-client", 0, "connections one client may hold (0: default, < 0: no limit)")
	f.StringVar(&cfg.Reserve, "reserve", "", "space kept free for marks (storage.reserve): a percentage of the file system or a size such as 10GB (default 1%, at most 1 GiB)")
	f.StringVar(&cfg.ReserveFile, "reserve-file", "", "file of the volume's storage.reserve, applied again on SIGHUP (a change while the brick runs)")
	f.StringVar(&cfg.FenceFile, "fence-file", "", "file of the volume's layout fence (the oldest spec version whose clients may make names), applied again on SIGHUP")
	return f
}

// parseHostedBrick reads a brick's config from the flags of `mortar
// brick` for the brick host, with a logger appending to logPath.
func parseHostedBrick(args []string, logPath string) (brickrun.Config, io.Closer, error) {
	var cfg brickrun.Config
	var logLevel, authAllow, authReject string
	var readyFd int
	f := brickFlags(pflag.NewFlagSet("brick", pflag.ContinueOnError), &cfg, &logLevel, &authAllow, &authReject)
	f.IntVar(&readyFd, "ready-fd", 0, "unused in a brick host")
	f.SetOutput(io.Discard)
	if err := f.Parse(args); err != nil {
		return cfg, nil, err
	}
	if cfg.VolumeID == "" || cfg.BrickID == "" || cfg.Path == "" || cfg.Listen == "" {
		return cfg, nil, errors.New("--volume-id, --brick-id, --path and --listen are required")
	}
	var err error
	if cfg.Auth, err = tlsconf.ParseAuth(authAllow, authReject); err != nil {
		return cfg, nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return cfg, nil, fmt.Errorf("brick log: %w", err)
	}
	log, err := newLogger(logf, logLevel)
	if err != nil {
		logf.Close()
		return cfg, nil, err
	}
	cfg.Logger = log.With("volume", cfg.Volume, "brick", cfg.BrickID)
	return cfg, logf, nil
}

// newBrickHostCommand is `mortar brick-host`, the process that serves
// every brick of a node (mortar server's default, --brick-multiplex). The node starts it;
// it is hidden from help.
func newBrickHostCommand() *cobra.Command {
	var sock string
	var readyFd int
	cmd := &cobra.Command{
		Use:   "brick-host --socket PATH",
		Short: "Serve many bricks in one process (started by mortar server)",
		Long: `Serve the bricks a node asks for in this one process, each on its own TCP
port, until the node asks it to shut down, or SIGTERM.

"mortar server" (unless --brick-multiplex=false) starts it and drives it over
the unix socket --socket (made readable by its owner only), one connection
at a time, one JSON object per line: commands {"op":"start","id":N,"args":[the
flags of mortar brick],"log":FILE}, "stop", "kill", "recheck", "list" and
"shutdown"; events {"id":N,"addr":ADDR} once a brick listens, {"id":N,"err":WHY}
if it cannot, {"id":N,"exited":WHY} when it ends. The host goes on serving
when the node's connection ends: a node that restarts connects again, lists
the bricks and takes them over. Each brick logs to its own file, at the level
its flags give. With --ready-fd it writes "ok PATH" on that descriptor once
the socket listens. There is no need to run it by hand.`,
		Hidden: true,
		Args:   usageArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if sock == "" {
				return errors.New("mortar brick-host: --socket is required")
			}
			ctl, err := listenHostSocket(sock)
			if err != nil {
				return fmt.Errorf("mortar brick-host: %w", err)
			}
			defer os.Remove(sock)
			if readyFd > 0 {
				ready := os.NewFile(uintptr(readyFd), "mortar-brick-host-ready")
				fmt.Fprintf(ready, "ok %s\n", sock)
				ready.Close()
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if err := brickrun.RunHost(ctx, ctl, parseHostedBrick); err != nil {
				return fmt.Errorf("mortar brick-host: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&sock, "socket", "", "unix socket the node drives the host on")
	cmd.Flags().IntVar(&readyFd, "ready-fd", 0, "descriptor to say \"ok PATH\" on once the socket listens")
	return cmd
}

// listenHostSocket listens on the unix socket path, readable and writable
// by its owner only, replacing a stale one (a host that died).
func listenHostSocket(path string) (net.Listener, error) {
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("a brick host already serves %s", path)
	}
	os.Remove(path)
	old := syscall.Umask(0o077)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // removed by the host itself, not by a replaced listener
	return ln, nil
}
