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
	"github.com/mortarfs/mortar/mgmt"
)

func newBenchCommand() *cobra.Command {
	var cfg bench.Config
	var targets, logLevel string
	var list bool
	var lf layoutFlags
	cmd := &cobra.Command{
		Use: "bench [--quick] [--targets local,fuse-passthrough,mortar,mortar-distribute,glusterfs] [--replica N | --disperse N [--redundancy M]] " +
			"[--fio-corners] [--out DIR] [--work DIR] [--fs xfs|ext4] [--reps N] [EXPERIMENT...]",
		Short: "Re-run the seed papers' experiments on mortar, the local disk, FUSE passthrough and GlusterFS",
		Long: `Run the seed papers' experiments on mortar, the local file system, the local
file system through FUSE passthrough and GlusterFS, side by side in one run on
this machine, with every target's bricks under the same parent directory
(--work, on one disk), and write a report:

  OUT/report.md     environment, one table per experiment with mortar / GlusterFS,
                    mortar / local and mortar / FUSE passthrough ratios, n/a
                    cells with their reasons
  OUT/results.csv   one measured value per row: experiment, target, layout,
                    params, metric, value, unit, repetition
  OUT/*.png         plots where a curve says more than a table

The suite sets every target up and tears it down itself: a mortar server and
volume from this binary, a directory on the local disk, another directory
mounted through "mortar passthrough" (fuse-passthrough: go-fuse's loopback file
system with mortar's kernel settings, so FUSE and nothing else: the ceiling any
FUSE file system, mortar included, can reach on this machine; like the local
disk, it has no layouts, servers or network), and GlusterFS
from Debian's glusterfs-server (installed with apt-get if missing; glusterd
started if not running, and stopped at the end only then). A target that
cannot be set up is reported with the reason. No EXPERIMENT means all of them
(see --list).

Each experiment has its own volume layouts (seed002: replica 3 and
distribute x3; seed003: distribute x4, replica 3 and disperse 4+2; seed000
and metadata: distribute x3; sqlite: replica 3 and disperse 4+2). --replica
N, or --disperse N with --redundancy M, replaces them in those five experiments with one layout, the same for
mortar and GlusterFS ("volume create ... disperse 6 redundancy 2" over six
bricks); seed001 and seed004 keep theirs (distribute over servers). The
mortar-distribute target (not run unless named in --targets) is mortar with
a distribute volume on the same bricks as each replicated or dispersed
layout (distribute x6 for disperse 4+2), so the report also shows mortar /
mortar-distribute: what the redundancy costs mortar. --fio-corners keeps
seed003's corners (4k and 1m x 1 and 4 threads x write and randread) at
full size and runtime.

--fs xfs (or ext4) makes a file system of that type in a sparse file under
--work, loop-mounted for the run, and puts every target in it: bricks on
the file system GlusterFS recommends for them, whatever the machine's own
is. A root ext4 without a journal (some VMs) makes every create scan the
inodes freed in the last seconds, so a target measured right after
another's removals pays for them: its create and untar figures then say
more about the order of the run than about the targets.

--quick is a smoke run of a few minutes (smaller sizes, one repetition;
seed003 its corners, shorter): its numbers show that everything works, not
how fast. Needs root (mounts, caches). Exits non-zero only if nothing at all
could be measured (or on Ctrl-C, after writing the partial report).`,
		Example: `  mortar bench --list
  mortar bench --quick --targets mortar,local
  mortar bench --quick --targets local,fuse-passthrough,mortar metadata
  mortar bench --out /tmp/report seed002 metadata
  mortar bench --fs xfs --reps 2 seed002 metadata
  mortar bench --disperse 6 --redundancy 2 --fio-corners \
      --targets local,mortar,mortar-distribute,glusterfs seed002 seed003`,
		// Experiment names are checked before anything starts.
		Args: func(cmd *cobra.Command, args []string) error {
			known := map[string]bool{}
			for _, e := range bench.Experiments() {
				known[e.Name] = true
			}
			for _, a := range args {
				if !known[a] {
					return fmt.Errorf("mortar bench: unknown experiment %q (mortar bench --list shows them)", a)
				}
			}
			return nil
		},
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
			if cfg.Layout, err = benchLayout(lf); err != nil {
				return fmt.Errorf("mortar bench: %w", err)
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
	f.StringVar(&targets, "targets", strings.Join(bench.DefaultTargets, ","),
		"comma-separated targets: "+strings.Join(bench.TargetNames, ", "))
	f.IntVar(&lf.replica, "replica", 0, "seed000, seed002, seed003, metadata: a replica N volume instead of the experiments' own layouts")
	f.IntVar(&lf.disperse, "disperse", 0, "seed000, seed002, seed003, metadata: a dispersed volume of N bricks instead (not with --replica)")
	f.IntVar(&lf.redundancy, "redundancy", 0, "with --disperse: bricks of the N that may be lost (default: a third of N, at least 1)")
	f.BoolVar(&cfg.FioCorners, "fio-corners", false, "seed003: only the corners of the fio matrix (4k, 1m x 1, 4 threads x write, randread), full size")
	f.StringVar(&cfg.Out, "out", "bench-out", "directory for report.md, results.csv and plots")
	f.StringVar(&cfg.Work, "work", "/var/tmp/mortar-bench", "parent directory of bricks, mounts and files (one disk)")
	f.StringVar(&cfg.FS, "fs", "", "make a file system of this type ("+strings.Join(bench.FileSystems, " or ")+
		") in a file under --work, loop-mounted, and run every target in it (the brick file system GlusterFS recommends is xfs)")
	f.IntVar(&cfg.Reps, "reps", 0, "repetitions of each measurement (default 3, 1 with --quick)")
	f.BoolVar(&cfg.GlusterStrictODirect, "gluster-strict-o-direct", false,
		"set performance.strict-o-direct on GlusterFS volumes, so that its O_DIRECT writes reach the bricks as mortar's do")
	f.StringVar(&cfg.Bin, "bin", "", "mortar binary to measure (default: this one)")
	f.StringVar(&logLevel, "log-level", "warn", "log level of stderr: debug, info, warn or error")
	return cmd
}

// layoutFlags are bench's --replica, --disperse and --redundancy.
type layoutFlags struct{ replica, disperse, redundancy int }

// benchLayout is the layout the flags ask for, nil for none (each
// experiment's own): replica N over N bricks, or disperse N redundancy M
// over N bricks (M by default as mortar and GlusterFS choose it).
func benchLayout(f layoutFlags) (*bench.Layout, error) {
	switch {
	case f.replica < 0 || f.disperse < 0 || f.redundancy < 0:
		return nil, fmt.Errorf("--replica, --disperse and --redundancy take positive counts")
	case f.replica > 0 && (f.disperse > 0 || f.redundancy > 0):
		return nil, fmt.Errorf("--replica and --disperse/--redundancy: a volume is either replicated or dispersed")
	case f.replica == 1:
		return nil, fmt.Errorf("--replica 1 is a distribute volume; replica needs 2 or more")
	case f.replica > 1:
		return &bench.Layout{Kind: "replicate", Bricks: f.replica, Replica: f.replica}, nil
	case f.redundancy > 0 && f.disperse == 0:
		return nil, fmt.Errorf("--redundancy %d needs --disperse N", f.redundancy)
	case f.disperse == 0:
		return nil, nil
	}
	if f.redundancy == 0 {
		f.redundancy = mgmt.DefaultRedundancy(f.disperse)
	}
	if f.disperse < 3 || 2*f.redundancy >= f.disperse {
		return nil, fmt.Errorf("--disperse %d --redundancy %d: the redundancy must be at least 1 and below half of the set", f.disperse, f.redundancy)
	}
	return &bench.Layout{Kind: "disperse", Bricks: f.disperse, Redundancy: f.redundancy}, nil
}
