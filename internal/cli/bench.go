package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/bench"
)

func newBenchCommand() *cobra.Command {
	var cfg bench.Config
	var targets, logLevel string
	var list bool
	cmd := &cobra.Command{
		Use:   "bench [--quick] [--targets mortar,local,glusterfs] [--out DIR] [--work DIR] [--reps N] [EXPERIMENT...]",
		Short: "Re-run the seed papers' experiments on mortar, the local disk and GlusterFS",
		Long: `Run the seed papers' experiments on mortar, the local file system and
GlusterFS, side by side in one run on this machine, with every target's bricks
under the same parent directory (--work, on one disk), and write a report:

  OUT/report.md     environment, one table per experiment with mortar / GlusterFS
                    and mortar / local ratios, n/a cells with their reasons
  OUT/results.csv   one measured value per row: experiment, target, layout,
                    params, metric, value, unit, repetition
  OUT/*.png         plots where a curve says more than a table

The suite sets every target up and tears it down itself: a mortar server and
volume from this binary, a directory on the local disk, and GlusterFS from
Debian's glusterfs-server (installed with apt-get if missing; glusterd started
if not running, and stopped at the end only then). A target that cannot be set
up is reported with the reason. No EXPERIMENT means all of them (see --list).

--quick is a smoke run of a few minutes (smaller sizes, one repetition): its
numbers show that everything works, not how fast. Needs root (mounts, caches).
Exits non-zero only if nothing at all could be measured (or on Ctrl-C, after
writing the partial report).`,
		Example: `  mortar bench --list
  mortar bench --quick --targets mortar,local
  mortar bench --out /tmp/report seed002 metadata`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if list {
				for _, e := range bench.Experiments() {
					fmt.Fprintf(cmd.OutOrStdout(), "%-9s %s\n", e.Name, e.Title)
				}
				return nil
			}
			log, err := newLogger(cmd.ErrOrStderr(), logLevel)
			if err != nil {
				return err
			}
			cfg.Log, cfg.Progress, cfg.Experiments = log, cmd.ErrOrStderr(), args
			if targets != "" {
				cfg.Targets = strings.Split(targets, ",")
			}
			cfg.Command = strings.Join(append([]string{"mortar"}, os.Args[1:]...), " ")
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := bench.Run(ctx, cfg); err != nil {
				if errors.Is(err, bench.ErrNothingMeasured) {
					return fmt.Errorf("mortar bench: %w (see %s/report.md)", err, cfg.Out)
				}
				return fmt.Errorf("mortar bench: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&list, "list", false, "list the experiments and exit")
	f.BoolVar(&cfg.Quick, "quick", false, "smoke run: smaller sizes, one repetition")
	f.StringVar(&targets, "targets", strings.Join(bench.TargetNames, ","), "comma-separated targets: local, mortar, glusterfs")
	f.StringVar(&cfg.Out, "out", "bench-out", "directory for report.md, results.csv and plots")
	f.StringVar(&cfg.Work, "work", "/var/tmp/mortar-bench", "parent directory of bricks, mounts and files (one disk)")
	f.IntVar(&cfg.Reps, "reps", 0, "repetitions of each measurement (default 3, 1 with --quick)")
	f.BoolVar(&cfg.GlusterStrictODirect, "gluster-strict-o-direct", false,
		"set performance.strict-o-direct on GlusterFS volumes, so that its O_DIRECT writes reach the bricks as mortar's do")
	f.StringVar(&cfg.Bin, "bin", "", "mortar binary to measure (default: this one)")
	f.StringVar(&logLevel, "log-level", "warn", "log level of stderr: debug, info, warn or error")
	return cmd
}
