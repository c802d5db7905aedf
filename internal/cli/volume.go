package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/tlsconf"
)

// apiTimeout bounds one management request from the CLI.
const apiTimeout = 2 * time.Minute

// volumeCmd holds what every volume subcommand shares.
type volumeCmd struct {
	server          string
	tlsDir, tlsName string
	id              *tlsconf.Identity // loaded before the command runs; nil: plain
	secretFile      string
	secret          string // the cluster secret, loaded before the command runs
}

func (v *volumeCmd) client() *api.Client {
	if v.id != nil {
		return api.NewTLSClient(v.server, v.id)
	}
	return api.NewClient(v.server).WithSecret(v.secret)
}

// serverFlags adds --server, --tls-dir and --tls-name to cmd and its
// subcommands, and loads the TLS identity before any of them runs.
func (v *volumeCmd) serverFlags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&v.server, "server", defaultServer(), "management address of a mortar node, host[:port] (env "+serverEnv+")")
	f.StringVar(&v.tlsDir, "tls-dir", "", "TLS directory of a secured cluster (env "+tlsconf.EnvDir+"): ca.pem, NAME.pem, NAME.key")
	f.StringVar(&v.tlsName, "tls-name", "", "name of the certificate to present, in --tls-dir (env "+tlsconf.EnvName+"); changes need a node certificate")
	f.StringVar(&v.secretFile, "secret-file", "", "cluster secret (a copy of a node's DATA/secret) for a node on another machine (env "+api.SecretFileEnv+"); not needed on the node's own machine")
	cmd.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		id, err := tlsconf.FromFlags(v.tlsDir, v.tlsName)
		v.id = id
		if err != nil {
			return err
		}
		v.secret, err = loadSecretFlag(v.secretFile)
		return err
	}
}

// loadSecretFlag reads the cluster secret named by --secret-file or
// MORTAR_SECRET_FILE ("" if neither: enough for a node on this machine,
// which answers its loopback callers). Requests are signed with it (the
// secret itself is never sent) only where the operator says, never from a
// default place: a --server that is not a node of the cluster should not
// receive even a signature.
func loadSecretFlag(path string) (string, error) {
	if path == "" {
		path = os.Getenv(api.SecretFileEnv)
	}
	if path == "" {
		return "", nil
	}
	return api.ReadSecretFile(path)
}

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
	v.serverFlags(cmd)
	cmd.AddCommand(
		v.createCommand(),
		v.startCommand(),
		v.stopCommand(),
		v.deleteCommand(),
		v.infoCommand(),
		v.statusCommand(),
		v.listCommand(),
		v.setCommand(),
		v.getCommand(),
		v.resetCommand(),
		v.healCommand(),
		v.resetBrickCommand(),
		v.replaceBrickCommand(),
		v.addBrickCommand(),
		v.removeBrickCommand(),
		v.rebalanceCommand(),
	)
	return cmd
}

func (v *volumeCmd) createCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "create NAME [replica N [arbiter 1] | disperse [N] [disperse-data K] [redundancy M]] HOST:/PATH... [force]",
		Short: "Create a volume from bricks (directories on the nodes)",
		Long: `Create a volume from bricks. A brick is a directory on a node, written
host:/path. Files stay plain files in the brick directories (in a dispersed
volume, each brick holds a fragment of every file of its set).

Without a type keyword the volume is a "distribute" volume: it spreads files
over its bricks by the hash of their names. With "replica N" (2 to 16) every
file is kept on N bricks: consecutive bricks form replica sets of N (the
first N bricks are a set, the next N another, ...), and files are
distributed over the sets, so the brick count must be a multiple of N
("Distributed-Replicate" with more than one set). "replica 3 arbiter 1"
makes the third brick of every set an arbiter, which holds names and
metadata but no file data (GlusterFS's older spelling "replica 2 arbiter 1"
means the same).

With "disperse N redundancy M" every file is erasure-coded (Reed-Solomon)
over a disperse set of N bricks: each brick holds a fragment, N-M of them
enough to read the file back, so a set survives any M of its bricks down
and uses N/(N-M) times the file's size (1.5x for disperse 6 redundancy 2).
"disperse-data K redundancy M" is the same set of K+M bricks; "disperse"
without a count makes one set of all the bricks; redundancy defaults to a
third of the set (at least 1) and must stay below half of it. With a
multiple of N bricks, consecutive bricks form sets and files are distributed
over them ("Distributed-Disperse"). A data brick count (N-M) that is not a
power of two works, with a warning: most writes then need a
read-modify-write.

Put the bricks of a set on different machines once mortar has more than one
node.

NAME is 1 to 64 of letters, digits, '_', '.' and '-'. Every brick directory
must exist and must not belong to another volume; each is marked with the new
volume's id, on its node, before anything else changes. Refused even with
"force": system directories (/, /etc, /usr, /var, /home, /tmp, ... themselves,
also through a symlink), the node's data directory and anything in it, pseudo,
network and FUSE file systems (proc, sysfs, NFS, a mortar mount...), and file
systems without trusted xattrs. Refused unless "force" is given: a directory
that is not empty (its files would become the volume's), and a directory on
the root file system (the one "/" is on: a brick filling up would fill the
disk the machine runs from; give bricks a disk or partition of their own,
or say "force" on a one-disk machine). Every host must be a node of this
cluster (mortar peer probe adds one).

The volume is created stopped: start it with "mortar volume start".`,
		Example: `  mortar volume create gv0 server1:/data/b1 server1:/data/b2
  mortar volume create gv1 replica 3 server1:/data/r1 server1:/data/r2 server1:/data/r3
  mortar volume create gv2 replica 3 arbiter 1 server1:/data/a1 server1:/data/a2 server1:/data/a3
  mortar volume create ec0 disperse 6 redundancy 2 server1:/data/e{1..6}
  mortar volume create ec1 disperse-data 4 redundancy 2 server1:/data/f{1..12}
  mortar volume create scratch localhost:/srv/scratch force   # on the root file system`,
		Args: usageArgs(2, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := parseCreateArgs(args)
			if err != nil {
				return err
			}
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			vi, err := v.client().CreateVolume(ctx, req)
			if err != nil {
				return failed("create", req.Name, err)
			}
			for _, w := range vi.Warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "volume create: %s: warning: %s\n", req.Name, w)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "volume create: %s: success: please start the volume to access data\n", req.Name)
			return nil
		},
	}
}

func (v *volumeCmd) startCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "start NAME [force]",
		Short: "Start a volume: run its bricks so that clients can mount it",
		Long: `Start a volume: its nodes start a process for each of its bricks and clients
can mount it. It returns once every brick listens, or fails with the reason a
brick could not start (its directory is missing, belongs to another volume,
its port is taken, ...) and stops the others. A started volume is started
again when its node restarts.

A brick process that dies is not restarted by itself: "volume status" shows
it offline with its exit status. "start NAME force" starts the bricks of an
already started volume that are offline, on the ports they had; it reports
those that still fail and leaves the others running.`,
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
		Short: "Stop a volume: its brick processes stop (data stays)",
		Long: `Stop a volume: its brick processes stop (SIGTERM, then SIGKILL after 5
seconds), so mounts of it fail until it is started again. Data stays on the
bricks. ("force" is accepted for GlusterFS compatibility; mortar does not ask
for confirmation.)`,
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
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info [all|NAME] [--json]",
		Short: "Show a volume's configuration: type, id, status, bricks, options",
		Long: `Show a volume's configuration as GlusterFS does: type, id, status, the
number of bricks ("2 x 3 = 6": two replica sets of three; "2 x (4 + 2) =
12": two disperse sets of 4 data and 2 redundancy bricks), the bricks
(arbiters marked "(arbiter)") and the options set. --json prints the
management API's answer instead (an array for all volumes).`,
		Args: usageArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			var vols []api.VolumeInfo
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
				if asJSON {
					return printJSON(cmd.OutOrStdout(), vi)
				}
				vols = []api.VolumeInfo{vi}
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), vols)
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
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	return cmd
}

func (v *volumeCmd) statusCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [all|NAME] [--json]",
		Short: "Show whether a volume's bricks are online: port, process id, disk use",
		Long: `Show the live state of a volume's bricks as GlusterFS does: each brick's TCP
port, whether it is online, its process id, and its disk and inode use; then,
for a brick that is offline, why (it did not start, or its process ended with
this exit status). --json prints the management API's answer instead (an
array for all volumes).`,
		Args: usageArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			c := v.client()
			names := args
			all := len(args) == 0 || args[0] == "all"
			if all {
				vols, err := c.List(ctx)
				if err != nil {
					return failed("status", "", err)
				}
				names = nil
				for _, vi := range vols {
					names = append(names, vi.Name)
				}
				if len(names) == 0 && !asJSON {
					fmt.Fprintln(cmd.OutOrStdout(), "No volumes present")
				}
			}
			sts := []api.VolumeStatus{}
			for _, name := range names {
				st, err := c.Status(ctx, name)
				if err != nil {
					return failed("status", name, err)
				}
				sts = append(sts, st)
			}
			switch {
			case asJSON && all:
				return printJSON(cmd.OutOrStdout(), sts)
			case asJSON:
				return printJSON(cmd.OutOrStdout(), sts[0])
			}
			for _, st := range sts {
				printStatus(cmd.OutOrStdout(), st)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	return cmd
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
		Long: `Set a volume option. Mounted clients rebuild their layers with it at once;
the kernel's cache timeouts (performance.attr-, entry- and negative-timeout)
take effect when a client mounts.

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

func (v *volumeCmd) getCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME all|KEY",
		Short: "Show a volume's options: value, default, and whether it was set",
		Long: `Show the value of one option of a volume, or of all of them: the value
set with "volume set", or the default.`,
		Example: `  mortar volume get gv0 all
  mortar volume get gv0 network.ping-timeout`,
		Args: usageArgs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			vi, err := v.client().Info(ctx, args[0])
			if err != nil {
				return failed("get", args[0], err)
			}
			return printOptions(cmd.OutOrStdout(), vi.Options, args[1])
		},
	}
}

// printOptions writes the options of a volume (set holds those set), all
// of them or the one named key, as a table.
func printOptions(w io.Writer, set map[string]string, key string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Option\tValue\tSource")
	found := false
	for _, o := range options.Known() {
		if key != "all" && key != o.Key {
			continue
		}
		found = true
		value, source := o.Default, "default"
		if s, ok := set[o.Key]; ok {
			value, source = s, "set"
		}
		if value == "" {
			value = "(none)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", o.Key, value, source)
	}
	if !found {
		return fmt.Errorf("volume get: unknown option %q%s (mortar volume get NAME all lists them)", key, suggestOption(key))
	}
	return tw.Flush()
}

// suggestOption names the known option closest to key, if one is close.
func suggestOption(key string) string {
	for _, o := range options.Known() {
		if strings.HasSuffix(o.Key, "."+key) || strings.Contains(o.Key, key) && len(key) >= 4 {
			return fmt.Sprintf("; did you mean %s?", o.Key)
		}
	}
	return ""
}

func (v *volumeCmd) resetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "reset NAME [KEY]",
		Short: "Set a volume option, or all of them, back to the default",
		Long: `Set option KEY of volume NAME back to its default, or, without KEY, every
option of the volume, in one change that mounts follow. What "volume set"
refuses is refused here too (encryption cannot change after the first
start).`,
		Example: `  mortar volume reset gv0 network.ping-timeout
  mortar volume reset gv0`,
		Args: usageArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			key := ""
			if len(args) == 2 {
				key = args[1]
			}
			if _, err := v.client().Reset(ctx, args[0], key); err != nil {
				return failed("reset", args[0], err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "volume reset: success")
			return nil
		},
	}
}

// optionHelp lists the known volume options, one a line.
func optionHelp() string {
	var b strings.Builder
	width := 0
	for _, o := range options.Known() {
		width = max(width, len(o.Key))
	}
	for _, o := range options.Known() {
		def := "default " + o.Default
		if o.Default == "" {
			def = "no default"
		}
		fmt.Fprintf(&b, "  %-*s %s (%s)\n", width, o.Key, o.Description, def)
	}
	return b.String()
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
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
