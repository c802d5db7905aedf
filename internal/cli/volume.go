package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/mgmt"
)

// apiTimeout bounds one management request from the CLI.
const apiTimeout = 2 * time.Minute

// volumeCmd holds what every volume subcommand shares.
type volumeCmd struct {
	server string
}

func (v *volumeCmd) client() *mgmt.Client { return mgmt.NewClient(v.server) }

func (v *volumeCmd) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), apiTimeout)
}

// failed formats an error the way GlusterFS's CLI does:
// "volume start: gv0: failed: <why>".
func failed(op, name string, err error) error {
	if name == "" {
		return fmt.Errorf("volume %s: failed: %w", op, err)
	}
	return fmt.Errorf("volume %s: %s: failed: %w", op, name, err)
}

func newVolumeCommand() *cobra.Command {
	v := &volumeCmd{}
	cmd := &cobra.Command{
		Use:   "volume",
		Short: "Create, start, stop, delete, inspect and tune volumes",
		Long: `Manage volumes through a mortar node's management API (--server, default
` + defaultServer() + `; the environment variable ` + serverEnv + ` sets the default).

The syntax follows GlusterFS's gluster CLI.`,
	}
	cmd.PersistentFlags().StringVar(&v.server, "server", defaultServer(), "management address of a mortar node, host[:port] (env "+serverEnv+")")
	cmd.AddCommand(
		v.createCommand(),
		v.startCommand(),
		v.stopCommand(),
		v.deleteCommand(),
		v.infoCommand(),
		v.statusCommand(),
		v.listCommand(),
		v.setCommand(),
	)
	return cmd
}

func (v *volumeCmd) createCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "create NAME [replica N] [arbiter N] [disperse N] [redundancy N] HOST:/PATH... [force]",
		Short: "Create a volume from bricks (directories on the nodes)",
		Long: `Create a volume from bricks. A brick is a directory on a node, written
host:/path; the volume spreads files over its bricks by the hash of their names
(a "distribute" volume). Files stay plain files in the brick directories.

NAME is 1 to 64 of letters, digits, '_', '.' and '-'. Every brick directory
must exist and must not belong to another volume; each is marked with the new
volume's id. A brick at the root of the root file system is refused unless
"force" is given. Every host must be this cluster's node (peer probe, to add
other machines, is not supported yet).

The keywords replica, arbiter, disperse, disperse-data and redundancy are
GlusterFS's; mortar refuses them until it has replicated and dispersed
volumes. The volume is created stopped: start it with "mortar volume start".`,
		Example: `  mortar volume create gv0 server1:/data/b1 server1:/data/b2
  mortar volume create scratch localhost:/srv/scratch`,
		Args: usageArgs(2, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := parseCreateArgs(args)
			if err != nil {
				return err
			}
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			if _, err := v.client().CreateVolume(ctx, req); err != nil {
				return failed("create", req.Name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "volume create: %s: success: please start the volume to access data\n", req.Name)
			return nil
		},
	}
}

func (v *volumeCmd) startCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "start NAME [force]",
		Short: "Start a volume: serve its bricks so that clients can mount it",
		Long: `Start a volume: its nodes serve its bricks and clients can mount it. A
started volume is started again when its node restarts. With "force", start
the bricks of an already started volume that are offline.`,
		Args: usageArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			force, err := forceArg(args)
			if err != nil {
				return err
			}
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			if _, err := v.client().Start(ctx, args[0], force); err != nil {
				return failed("start", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "volume start: %s: success\n", args[0])
			return nil
		},
	}
}

func (v *volumeCmd) stopCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stop NAME [force]",
		Short: "Stop a volume: its bricks stop serving (data stays)",
		Long: `Stop a volume: its bricks stop serving, so mounts of it fail until it is
started again. Data stays on the bricks. ("force" is accepted for GlusterFS
compatibility; mortar does not ask for confirmation.)`,
		Args: usageArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := forceArg(args); err != nil {
				return err
			}
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			if _, err := v.client().Stop(ctx, args[0]); err != nil {
				return failed("stop", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "volume stop: %s: success\n", args[0])
			return nil
		},
	}
}

func (v *volumeCmd) deleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a stopped volume (the files on its bricks stay)",
		Long: `Delete a stopped volume. The volume is forgotten and its brick directories
lose the volume mark, so they can be used again; the files in them stay.`,
		Args: usageArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			if err := v.client().Delete(ctx, args[0]); err != nil {
				return failed("delete", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "volume delete: %s: success\n", args[0])
			return nil
		},
	}
}

func (v *volumeCmd) infoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "info [all|NAME]",
		Short: "Show a volume's configuration: type, id, status, bricks, options",
		Args:  usageArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			var vols []mgmt.VolumeInfo
			if len(args) == 0 || args[0] == "all" {
				var err error
				if vols, err = v.client().List(ctx); err != nil {
					return failed("info", "", err)
				}
			} else {
				vi, err := v.client().Info(ctx, args[0])
				if err != nil {
					return failed("info", args[0], err)
				}
				vols = []mgmt.VolumeInfo{vi}
			}
			if len(vols) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "No volumes present")
			}
			for _, vi := range vols {
				printInfo(cmd.OutOrStdout(), vi)
			}
			return nil
		},
	}
}

func (v *volumeCmd) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status [all|NAME]",
		Short: "Show whether a volume's bricks are online, and their disk use",
		Args:  usageArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			c := v.client()
			names := args
			if len(args) == 0 || args[0] == "all" {
				vols, err := c.List(ctx)
				if err != nil {
					return failed("status", "", err)
				}
				names = nil
				for _, vi := range vols {
					names = append(names, vi.Name)
				}
				if len(names) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "No volumes present")
				}
			}
			for _, name := range names {
				st, err := c.Status(ctx, name)
				if err != nil {
					return failed("status", name, err)
				}
				printStatus(cmd.OutOrStdout(), st)
			}
			return nil
		},
	}
}

func (v *volumeCmd) listCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the names of all volumes",
		Args:  usageArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			vols, err := v.client().List(ctx)
			if err != nil {
				return failed("list", "", err)
			}
			if len(vols) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "No volumes present in cluster")
			}
			for _, vi := range vols {
				fmt.Fprintln(cmd.OutOrStdout(), vi.Name)
			}
			return nil
		},
	}
}

func (v *volumeCmd) setCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "set NAME KEY VALUE",
		Short: "Set a volume option",
		Long: `Set a volume option. Clients pick up the new value when they mount.

Known options:
` + optionHelp(),
		Example: `  mortar volume set gv0 performance.attr-timeout 5`,
		Args:    usageArgs(3, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			if _, err := v.client().Set(ctx, args[0], args[1], args[2]); err != nil {
				return failed("set", args[0], err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "volume set: success")
			return nil
		},
	}
}

// optionHelp lists the known volume options, one a line.
func optionHelp() string {
	var b strings.Builder
	for _, o := range mgmt.KnownOptions() {
		fmt.Fprintf(&b, "  %-30s %s (default %s)\n", o.Key, o.Description, o.Default)
	}
	return b.String()
}

// forceArg reports whether the optional second argument is "force".
func forceArg(args []string) (bool, error) {
	if len(args) < 2 {
		return false, nil
	}
	if args[1] != "force" {
		return false, fmt.Errorf("unexpected argument %q (only \"force\" may follow the volume name)", args[1])
	}
	return true, nil
}
