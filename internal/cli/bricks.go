package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/mgmt/api"
)

func (v *volumeCmd) replaceBrickCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "replace-brick NAME HOST:/OLD HOST:/NEW commit force",
		Short: "Replace a brick of a replicated or dispersed volume by an empty directory on any node",
		Long: `Replace a brick of a started replicated or dispersed volume, typically one
whose server died, by a new empty directory on any node of the cluster. The
old brick is stopped if its node answers (its directory is left as it is);
the volume uses the new directory from then on, in the same replica or
disperse set, and a full heal copies every file of the set to it
("mortar volume heal NAME info" shows the progress). Clients follow the
change without remounting.

The words "commit force" are required, as in GlusterFS (the only form of
replace-brick GlusterFS still supports); as there, they allow a new
directory on the root file system. The new directory must be empty all the
same, and is refused, before anything changes, where "volume create"
refuses a brick even with force. Distribute volumes are refused: their
bricks hold the only copy of their files (use add-brick, then
remove-brick).`,
		Example: `  mkdir /data/b9   # on server4, empty
  mortar volume replace-brick gv0 server3:/data/b3 server4:/data/b9 commit force`,
		Args: usageArgs(5, 5),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[3] != "commit" || args[4] != "force" {
				return fmt.Errorf("volume replace-brick: want \"commit force\" after the two bricks, not %q", args[3]+" "+args[4])
			}
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			if _, err := v.client().ReplaceBrick(ctx, args[0], api.ReplaceBrickRequest{Source: args[1], Destination: args[2], Force: true}); err != nil {
				return failed("replace-brick", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "volume replace-brick: success: %s replaces %s; a full heal is filling it (mortar volume heal %s info)\n", args[2], args[1], args[0])
			return nil
		},
	}
}

func (v *volumeCmd) addBrickCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "add-brick NAME HOST:/PATH... [force]",
		Short: "Add bricks (whole replica or disperse sets) to a volume",
		Long: `Add bricks to a volume, on any nodes of the cluster: one brick or more for a
distribute volume, whole sets for a replicated or dispersed one (as many
bricks as a set has, consecutive bricks forming a set). The new bricks start
at once on a started volume, but get no files until "mortar volume rebalance
NAME start" gives them their share of the names and moves the files that
belong there (clients follow without remounting). The new directories are
checked as "volume create" checks them: "force" allows directories that are
not empty or are on the root file system.`,
		Example: `  mortar volume add-brick gv0 server4:/data/b1
  mortar volume rebalance gv0 start`,
		Args: usageArgs(2, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, bricks := args[0], args[1:]
			force := bricks[len(bricks)-1] == "force"
			if force {
				bricks = bricks[:len(bricks)-1]
			}
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			if _, err := v.client().AddBrick(ctx, name, api.AddBrickRequest{Bricks: bricks, Force: force}); err != nil {
				return failed("add-brick", name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "volume add-brick: success (run \"mortar volume rebalance %s start\" to move files onto the new bricks)\n", name)
			return nil
		},
	}
}

func (v *volumeCmd) rebalanceCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rebalance NAME [fix-layout] start|stop|status [--json]",
		Short: "Spread a volume's files over its bricks after add-brick, online",
		Long: `Give the sets added by add-brick their share of the names and move the files
that belong there, while clients keep reading and writing them:

  1. fix-layout: every directory is made on the new sets (a crawl of
     directories only; applications are not stalled);
  2. the new layout takes effect: each old set hands each new one an equal
     share of its hash ranges, so only the files that must move do; clients
     follow it at once and find the files not moved yet where they were;
     then the bricks refuse new names to clients still on the old layout
     (cut off from the cluster), which would make them where nobody looks;
  3. every node moves the misplaced files of the sets whose first brick it
     serves, in parallel; a file being written is copied again, and its
     writers wait only for the final switch; a node that restarts resumes
     from its checkpoint;
  4. once every file is in place, the old layout is forgotten.

"fix-layout start" runs only steps 1 and 2: new files go to the new sets,
old files stay where they are (still found). "stop" stops the moves (files
moved stay moved, the others are still found); "start" again resumes.
"status" shows each node's files moved, bytes, files scanned, failures,
skipped files (changing too fast, or on a set with a brick down), run time
and an estimate of the time left. Files with several hard links are not
moved (a pointer to them is made instead).`,
		Example: `  mortar volume rebalance gv0 start
  mortar volume rebalance gv0 status`,
		Args: usageArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, rest := args[0], args[1:]
			fix := rest[0] == "fix-layout"
			if fix {
				rest = rest[1:]
			}
			if len(rest) != 1 {
				return fmt.Errorf("volume rebalance: want start, stop or status after the volume name")
			}
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			c := v.client()
			var rs api.RebalanceStatus
			var err error
			switch rest[0] {
			case "start", "stop":
				rs, err = c.Rebalance(ctx, name, api.RebalanceRequest{Action: rest[0], FixLayout: fix})
			case "status":
				rs, err = c.RebalanceStatus(ctx, name)
			default:
				return fmt.Errorf("volume rebalance: unknown action %q (start, stop or status)", rest[0])
			}
			if err != nil {
				return failed("rebalance", name, err)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), rs)
			}
			printRebalance(cmd.OutOrStdout(), "rebalance", rs)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	return cmd
}

func (v *volumeCmd) removeBrickCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "remove-brick NAME HOST:/PATH... start|stop|status|commit [force]",
		Short: "Drain bricks (whole sets) of their files, then remove them from a volume",
		Long: `Remove bricks from a volume without losing files, in two steps, as GlusterFS
does: "start" moves every file off the bricks (whole sets: every brick of a
replica or disperse set) onto the others while clients keep using them;
"status" shows the progress; "commit", once the drain has completed with
nothing left behind, removes the bricks from the volume (their directories
keep only empty directories). "stop" stops the drain; "start" again resumes
it. "commit force" removes the bricks even without a drain: their files stay
in the removed directories and leave the volume.`,
		Example: `  mortar volume remove-brick gv0 server2:/data/b1 start
  mortar volume remove-brick gv0 server2:/data/b1 status
  mortar volume remove-brick gv0 server2:/data/b1 commit`,
		Args: usageArgs(3, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, rest := args[0], args[1:]
			force := rest[len(rest)-1] == "force"
			if force {
				rest = rest[:len(rest)-1]
			}
			if len(rest) < 2 {
				return fmt.Errorf("volume remove-brick: want bricks, then start, stop, status or commit")
			}
			action, bricks := rest[len(rest)-1], rest[:len(rest)-1]
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			c := v.client()
			var rs api.RebalanceStatus
			var err error
			switch action {
			case "start", "stop", "commit":
				rs, err = c.RemoveBrick(ctx, name, api.RemoveBrickRequest{Action: action, Bricks: bricks, Force: force})
			case "status":
				rs, err = c.RebalanceStatus(ctx, name)
			default:
				return fmt.Errorf("volume remove-brick: unknown action %q (start, stop, status or commit)", action)
			}
			if err != nil {
				return failed("remove-brick", name, err)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), rs)
			}
			if action == "commit" {
				fmt.Fprintf(cmd.OutOrStdout(), "volume remove-brick commit: success: %d brick(s) removed from %s\n", len(bricks), name)
				return nil
			}
			printRebalance(cmd.OutOrStdout(), "remove-brick", rs)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	return cmd
}

// printRebalance prints a task's status as GlusterFS's rebalance status.
func printRebalance(w io.Writer, op string, rs api.RebalanceStatus) {
	if rs.Task == nil {
		fmt.Fprintf(w, "volume %s: %s: no rebalance or remove-brick has run\n", op, rs.Name)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "Node\tRebalanced-files\tsize\tscanned\tfailures\tskipped\tstatus\trun time in h:m:s\tscanned/s\tETA")
	for _, p := range rs.Nodes {
		eta := "-"
		if p.Status == api.TaskRunning && p.ETA >= 0 {
			eta = hms(p.ETA)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%.0f\t%s\n", hostOf(p.Host), p.Moved, bytesIEC(p.Bytes), p.Scanned, p.Failed, p.Skipped, p.Status, hms(p.Elapsed), p.Rate, eta)
	}
	tw.Flush()
	fmt.Fprintf(w, "volume %s: %s: %s %s (started %s)\n", op, rs.Name, rs.Task.Kind, rs.Task.Status, rs.Task.Started.Local().Format(time.DateTime))
	if rs.Task.Error != "" {
		fmt.Fprintf(w, "%s\n", rs.Task.Error)
	}
	for _, p := range rs.Nodes {
		for _, e := range p.Errors {
			fmt.Fprintf(w, "%s: %s\n", hostOf(p.Host), e)
		}
		if p.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", hostOf(p.Host), p.Error)
		}
	}
}

// hms formats seconds as h:mm:ss.
func hms(sec float64) string {
	s := int64(sec)
	return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
}
