package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/mgmt"
	"github.com/mortarfs/mortar/tlsconf"
)

// newBrickCommand is `mortar brick`, the process that serves one brick.
// The node starts it (see mgmt.BrickArgs); it is hidden from help.
func newBrickCommand() *cobra.Command {
	var cfg mgmt.BrickConfig
	var logLevel string
	var readyFd int
	var authAllow, authReject string
	cmd := &cobra.Command{
		Use:   "brick --volume-id ID --brick-id ID --path DIR --listen ADDR [--arbiter | --disperse]",
		Short: "Serve one brick (started by mortar server, one process per brick)",
		Long: `Serve one brick of a volume on its own TCP port until SIGTERM or SIGINT.

"mortar server" runs one such process per brick of its started volumes (as
GlusterFS runs glusterfsd) and restarts them with "mortar volume start NAME
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
			if err := mgmt.RunBrick(ctx, cfg, ready); err != nil {
				return fmt.Errorf("mortar brick %s: %w", cfg.Path, err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Volume, "volume", "", "volume name (for logs)")
	f.StringVar(&cfg.VolumeID, "volume-id", "", "id of the volume the brick directory is marked with")
	f.StringVar(&cfg.BrickID, "brick-id", "", "id of the brick, as clients name it")
	f.StringVar(&cfg.Path, "path", "", "brick directory")
	f.StringVar(&cfg.Listen, "listen", "", "TCP address to serve on (port 0: any free port)")
	f.BoolVar(&cfg.Arbiter, "arbiter", false, "an arbiter brick: names and metadata, no file data")
	f.BoolVar(&cfg.Disperse, "disperse", false, "a brick of a disperse set: its files are fragments, their size kept apart")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.IntVar(&readyFd, "ready-fd", 0, "descriptor to report readiness on (0: none)")
	f.StringVar(&cfg.TLSDir, "tls-dir", "", "TLS directory (ca.pem, NAME.pem, NAME.key): serve TLS only")
	f.StringVar(&cfg.TLSName, "tls-name", "", "name of this node's certificate in --tls-dir")
	f.StringVar(&cfg.AuthFile, "auth-file", "", "file of the volume's access rules, read at every new connection")
	f.StringVar(&authAllow, "auth-allow", "", "fixed auth.allow: certificate names, addresses, CIDRs (comma list)")
	f.StringVar(&authReject, "auth-reject", "", "fixed auth.reject (same syntax; wins over --auth-allow)")
	f.IntVar(&cfg.MaxConnsPerClient, "max-conns-per-client", 0, "connections one client may hold (0: default, < 0: no limit)")
	for _, name := range []string{"volume-id", "brick-id", "path", "listen"} {
		cmd.MarkFlagRequired(name) //nolint:errcheck // the flags exist
	}
	return cmd
}
