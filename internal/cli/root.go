// Package cli is the mortar command line: the server daemon, volume
// management, mounting (also as mount(8)'s helper mount.mortar), and the
// one-command development cluster. cmd/mortar only calls Main.
package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/mgmt/api"
)

// Version is mortar's version, set at build time with
// -ldflags "-X github.com/mortarfs/mortar/internal/cli.Version=...".
var Version = "dev"

// serverEnv names the environment variable that sets --server.
const serverEnv = "MORTAR_SERVER"

// Main runs the command line in args (args[0] is the program name) and
// returns the exit status.
func Main(args []string) int {
	if filepath.Base(args[0]) == helperName {
		return mountHelperMain(args[1:], os.Stderr)
	}
	root := NewRootCommand()
	root.SetArgs(args[1:])
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// NewRootCommand returns the `mortar` command with every subcommand.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "mortar",
		Short: "mortar, a distributed file system",
		Long: `mortar pools directories of one or more machines ("bricks") into volumes
that clients mount with FUSE.

Start here:  mortar dev       (a volume on this machine, mounted, in one command)
Then:        mortar server, mortar volume ..., mortar mount

Exit status: 0 when the command did what was asked; 1 otherwise (a refusal,
an error, bad arguments, an unknown or missing subcommand), with the reason
on stderr.`,
		// Main prints errors; bad arguments get a one-line usage (usageArgs).
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.AddCommand(
		newServerCommand(),
		newBrickCommand(),
		newBrickHostCommand(),
		newVolumeCommand(),
		newPeerCommand(),
		newPoolCommand(),
		newKeyCommand(),
		newMountCommand(),
		newDevCommand(),
		newBenchCommand(),
		newPassthroughCommand(),
		newInstallCommand(),
		newTLSCommand(),
		newVersionCommand(),
	)
	strictGroups(root)
	return root
}

// strictGroups makes every command that only groups others (volume, peer,
// volume heal, ...) fail on what is not one of its subcommands, with
// cobra's suggestion, instead of printing its help and succeeding: a
// script must not take "mortar volume lst" for a success. Run alone, a
// group prints its help and fails too (it did nothing).
func strictGroups(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		strictGroups(c)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2 // cobra sets it for the root only
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			cmd.SetOut(cmd.ErrOrStderr())
			cmd.Help() //nolint:errcheck // best effort; the error below says it all
			return fmt.Errorf("%s: a subcommand is required (see above)", cmd.CommandPath())
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		return fmt.Errorf("%s\nRun '%s --help' for usage.", msg, cmd.CommandPath())
	}
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print mortar's version and the source revision it was built from",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			info, _ := debug.ReadBuildInfo()
			fmt.Fprintln(cmd.OutOrStdout(), versionLine(Version, info))
		},
	}
}

// versionLine says which mortar this is: the version set at build time
// (-ldflags -X ...cli.Version=), else the module's, and the VCS revision,
// its time and whether the tree had changes, as the go command embeds them.
func versionLine(version string, info *debug.BuildInfo) string {
	var b strings.Builder
	b.WriteString("mortar ")
	if version == "dev" && info != nil && info.Main.Version != "" {
		version = info.Main.Version
	}
	b.WriteString(version)
	vcs := map[string]string{}
	if info != nil {
		for _, s := range info.Settings {
			vcs[s.Key] = s.Value
		}
	}
	if rev := vcs["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, " rev %s", rev)
		if t := vcs["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " %s", t)
		}
		if vcs["vcs.modified"] == "true" {
			b.WriteString(" modified")
		}
	} else {
		// go build stamps none with -buildvcs=false, outside a git checkout
		// and in a git worktree (its .git is a file).
		b.WriteString(" (no revision: the build carries no VCS information)")
	}
	fmt.Fprintf(&b, ", %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}

// newLogger returns a text logger writing to w at the named level.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("bad log level %q (want debug, info, warn or error)", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// defaultServer is the management address the volume commands talk to
// unless told otherwise.
func defaultServer() string {
	if s := os.Getenv(serverEnv); s != "" {
		return s
	}
	return fmt.Sprintf("localhost:%d", api.DefaultPort)
}

// usageArgs returns an argument check that accepts min to max arguments
// (max < 0: any number) and otherwise explains the usage.
func usageArgs(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return fmt.Errorf("usage: %s\nRun '%s --help' for more.", strings.TrimSuffix(cmd.UseLine(), " [flags]"), cmd.CommandPath())
		}
		return nil
	}
}
