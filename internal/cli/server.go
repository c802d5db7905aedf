package cli

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/mgmt"
	"github.com/mortarfs/mortar/tlsconf"
)

func newServerCommand() *cobra.Command {
	var cfg mgmt.Config
	var logLevel, tlsDir, tlsName string
	cmd := &cobra.Command{
		Use:   "server [--data DIR] [--listen ADDR] [--advertise HOST:PORT]",
		Short: "Run this machine's mortar node (management daemon and bricks) in the foreground",
		Long: `Run this machine's mortar node in the foreground until SIGINT or SIGTERM.

The node keeps the cluster state (volumes, bricks, options) in --data, serves
the management API that the "mortar volume" commands and clients use on
--listen (default ` + mgmt.DefaultListen + `: this machine only), and runs the bricks of started
volumes, each on a TCP port of its own on the --listen host, chosen free when
the brick first starts and kept from then on. "mortar volume status" shows
each brick's port and process id. A brick that dies stays offline until
"mortar volume start NAME force"; the node starts the bricks of started
volumes (on the same ports) when it starts.

By default every brick of the node is served by one process, "mortar
brick-host" (GlusterFS's cluster.brick-multiplex): fewer processes compete
for the CPU, which makes small-file work 15-20 % faster on a 2-core machine
(docs/PERFORMANCE.md), but the bricks fail together: a killed host takes
them all offline. The host outlives the server (as GlusterFS's bricks
outlive glusterd): a server that is killed, stopped or upgraded leaves its
bricks serving, and takes them over when it starts again (bricks whose
flags changed meanwhile are started anew, and every brick is if the new
version speaks another wire protocol; a taken-over brick keeps its log
level and its TLS certificate until it restarts). --keep-bricks=false stops
the bricks with the server and kills them with it. --brick-multiplex=false
runs one process per brick instead (as GlusterFS's glusterfsd), so that one
can fail alone; those die with the server.

--advertise is the address others use to reach this node; by default it is
derived from --listen and the machine's host name or addresses.

Nothing listens beyond loopback unless --listen names another address
(e.g. --listen 10.0.0.5:7420, or 0.0.0.0:7420 for every interface); the
bricks and Raft then listen on that host too. A node answers callers on
other machines only when they prove they may:
  - without TLS, with the cluster secret (DATA/secret, 0600, made at the
    first start and handed to nodes that join by "peer probe"): other nodes
    sign their requests with it, the CLI with --secret-file or
    MORTAR_SECRET_FILE, and a mount with -o secret-file, or else its address
    must be named by the volume's auth.allow. Bricks admit only clients holding the volume's own
    secret, handed out with the volume's spec, and check auth.allow and
    auth.reject by address. Requests and handshakes prove the secrets
    without carrying them: requests are signed with the cluster secret,
    and Raft and the bricks challenge callers to prove theirs. But the
    traffic is in clear (data, specs, and the cluster state, which holds
    the volumes' secrets) and can be altered in the middle: on a network
    you do not trust, use TLS.
  - with TLS (below), with certificates of the cluster's CA.
Root on this machine (loopback, or one of its own addresses) may administer
it without a secret; other users of this machine may not.

A new node is a cluster of its own; "mortar peer probe HOST" run on a node of
a cluster adds the node at HOST to it. The cluster state is replicated with
Raft between the nodes on a second port, --raft-listen (default: the --listen
host with the API's port + 1, 7421), kept once chosen: the other nodes know
the node by it.

With --tls-dir and --tls-name (a node certificate made with "mortar tls
issue --node"), every connection of the node is TLS 1.3 with client
certificates of the cluster's CA: its API, Raft, node to node, and its
bricks, which check each client against the volume's auth.allow and
auth.reject. Every node of a cluster must run with TLS, or none.

Logs go to stderr (--log-level debug|info|warn|error); each brick logs to
DATA/logs/bricks/PATH.log at the same level (a brick host's own messages go
to DATA/logs/bricks/brick-host.log).`,
		Example: `  mortar server --data /var/lib/mortar                  # this machine only
  mortar server --data /srv/mortar --listen 10.0.0.5:7420`,
		Args: usageArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger(os.Stderr, logLevel)
			if err != nil {
				return err
			}
			cfg.Logger = log
			cfg.BrickLogLevel = logLevel
			if cfg.TLS, err = tlsconf.FromFlags(tlsDir, tlsName); err != nil {
				return fmt.Errorf("mortar server: %w", err)
			}
			if cfg.BrickExec, err = os.Executable(); err != nil {
				return fmt.Errorf("mortar server: find own executable (to run bricks): %w", err)
			}
			return runServer(cmd, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data", "/var/lib/mortar", "directory for the node's state")
	f.StringVar(&cfg.Listen, "listen", mgmt.DefaultListen, "TCP address of the management API; bricks listen on its host")
	f.StringVar(&cfg.Advertise, "advertise", "", "host:port others use to reach this node (default: derived)")
	f.StringVar(&cfg.RaftListen, "raft-listen", "", "TCP address of the node's Raft traffic (default: the --listen host, API port + 1)")
	f.StringVar(&tlsDir, "tls-dir", "", "TLS directory (ca.pem, NAME.pem, NAME.key; env "+tlsconf.EnvDir+"): secure every connection of the node and its bricks")
	f.StringVar(&tlsName, "tls-name", "", "name of this node's certificate in --tls-dir (env "+tlsconf.EnvName+")")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.BoolVar(&cfg.BrickMultiplex, "brick-multiplex", true, "serve every brick of the node in one process (=false: one process per brick, which fail alone)")
	f.BoolVar(&cfg.KeepBricks, "keep-bricks", true, "with --brick-multiplex: the bricks go on serving when the server stops or dies, and a server starting takes them over (=false: they stop with it)")
	return cmd
}

func runServer(cmd *cobra.Command, cfg mgmt.Config) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	n, err := mgmt.Start(cfg)
	if err != nil {
		return fmt.Errorf("mortar server: %w", err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "mortar server: node %s listening on %s, advertised as %s, state in %s\n",
		n.ID(), n.ListenAddr(), n.Addr(), cfg.DataDir)
	if !n.LoopbackOnly() && cfg.TLS == nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "mortar server: listening beyond loopback without TLS: callers on other machines need the cluster secret (%s), which they prove without sending it, but the traffic itself is in clear and can be altered in the middle; use --tls-dir on a network you do not trust\n",
			filepath.Join(cfg.DataDir, "secret"))
	}
	sig := <-sigs
	cfg.Logger.Info("shutting down", "signal", sig.String())
	if err := n.Close(); err != nil {
		return fmt.Errorf("mortar server: shutdown: %w", err)
	}
	return nil
}
