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
	"strings"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/mgmt"
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
Then:        mortar server, mortar volume ..., mortar mount`,
		// Main prints errors; bad arguments get a one-line usage (usageArgs).
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.AddCommand(
		newServerCommand(),
		newBrickCommand(),
		newVolumeCommand(),
		newPeerCommand(),
		newPoolCommand(),
		newKeyCommand(),
		newMountCommand(),
		newDevCommand(),
		newBenchCommand(),
		newInstallCommand(),
		newTLSCommand(),
		newVersionCommand(),
	)
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print mortar's version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "mortar %s (%s, %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
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
	return fmt.Sprintf("localhost:%d", mgmt.DefaultPort)
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
