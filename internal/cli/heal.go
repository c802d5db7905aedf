package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/mgmt/api"
)

// What a `volume heal` command line asks for.
const (
	healIndex      = "index"            // NAME
	healFull       = "full"             // NAME full
	healInfo       = "info"             // NAME info
	healInfoSplit  = "info split-brain" // NAME info split-brain
	healResolve    = "split-brain"      // NAME split-brain POLICY ...
	healWait       = "wait"             // NAME wait [--timeout DURATION]
	healUsageShort = "usage: mortar volume heal NAME [full | info [split-brain] | wait [--timeout DURATION] | split-brain (latest-mtime PATH | bigger-file PATH | source-brick HOST:/BRICK [PATH])]"
)

// healWaitPoll is how often heal wait asks the node.
const healWaitPoll = 50 * time.Millisecond

// healWaitSettle is how long heal wait sees the volume safe, at every
// look, before it says so: the node's view covers its heal daemon, not the
// mounts. A mount in use redials a returned brick before its next
// operation, at most every 100 ms; until it has, its writes are recorded
// as to heal (not safe). Saying yes at once could let the next brick go
// while a mount still reaches only one brick of three (seen as EROFS and
// EIO in the rolling-restart test).
const healWaitSettle = 300 * time.Millisecond

// healArgs is a parsed `volume heal` command line.
type healArgs struct {
	name string
	op   string
	req  api.SplitBrainRequest // for healResolve
}

// parseHealArgs parses GlusterFS's volume heal syntax:
//
//	NAME
//	NAME full
//	NAME info [split-brain]
//	NAME wait
//	NAME split-brain latest-mtime PATH
//	NAME split-brain bigger-file PATH
//	NAME split-brain source-brick HOST:/BRICK [PATH]
func parseHealArgs(args []string) (healArgs, error) {
	if len(args) == 0 {
		return healArgs{}, fmt.Errorf("%s", healUsageShort)
	}
	h := healArgs{name: args[0], op: healIndex}
	rest := args[1:]
	bad := func(why string) (healArgs, error) {
		return healArgs{}, fmt.Errorf("volume heal: %s\n%s", why, healUsageShort)
	}
	if len(rest) == 0 {
		return h, nil
	}
	switch rest[0] {
	case "full":
		h.op = healFull
		if len(rest) > 1 {
			return bad(fmt.Sprintf("unexpected argument %q after full", rest[1]))
		}
	case "info":
		h.op = healInfo
		switch {
		case len(rest) == 2 && rest[1] == "split-brain":
			h.op = healInfoSplit
		case len(rest) > 1:
			return bad(fmt.Sprintf("unknown heal info %q (only \"info\" and \"info split-brain\" exist)", strings.Join(rest[1:], " ")))
		}
	case "wait":
		h.op = healWait
		if len(rest) > 1 {
			return bad(fmt.Sprintf("unexpected argument %q after wait", rest[1]))
		}
	case "split-brain":
		h.op = healResolve
		return parseResolveArgs(h, rest[1:], bad)
	default:
		return bad(fmt.Sprintf("unknown heal command %q", rest[0]))
	}
	return h, nil
}

// parseResolveArgs parses what follows "split-brain".
func parseResolveArgs(h healArgs, args []string, bad func(string) (healArgs, error)) (healArgs, error) {
	if len(args) == 0 {
		return bad("split-brain needs a policy: latest-mtime, bigger-file or source-brick")
	}
	h.req.Policy = args[0]
	args = args[1:]
	switch h.req.Policy {
	case api.PolicyLatestMtime, api.PolicyBiggerFile:
		if len(args) != 1 {
			return bad(fmt.Sprintf("split-brain %s takes the PATH of one file, from the volume's root", h.req.Policy))
		}
		h.req.Path = args[0]
	case api.PolicySourceBrick:
		if len(args) < 1 || len(args) > 2 {
			return bad("split-brain source-brick takes HOST:/BRICK and an optional PATH")
		}
		if !strings.Contains(args[0], ":") {
			return bad(fmt.Sprintf("%q is not a brick; write it HOST:/BRICK", args[0]))
		}
		h.req.Source = args[0]
		if len(args) == 2 {
			h.req.Path = args[1]
		}
	default:
		return bad(fmt.Sprintf("unknown split-brain policy %q (latest-mtime, bigger-file or source-brick)", h.req.Policy))
	}
	return h, nil
}

func (v *volumeCmd) healCommand() *cobra.Command {
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "heal NAME [full | info [split-brain] | wait [--timeout DURATION] | split-brain POLICY ...] [--json]",
		Short: "Heal a replicated or dispersed volume, or show what it has to heal",
		Long: `Self-heal of a replicated or dispersed volume. While a brick is down, the
bricks of its replica or disperse set that get the changes it misses record
them; every node runs a heal daemon per started replicated or dispersed
volume which, every cluster.heal-interval seconds (default 2), brings the
bricks that missed changes up to date once they are back: copies for a
replica set; for a disperse set, names and metadata are copied and each
file's fragment is rebuilt from the fragments of the other bricks. With
cluster.self-heal-daemon off it heals only when asked (heal NAME, heal NAME
full).

  heal NAME                   heal what the bricks record now, without waiting
                              for the daemon's next scan
  heal NAME full              crawl every set from the root and repair
                              names missing on some copies, and differing types and
                              gfids, also where nothing recorded them (a
                              replaced disk); contents and metadata are copied
                              where marks say a copy is behind. It runs in the
                              background: watch it with "heal NAME info"
  heal NAME info              per brick: whether it is connected, the number
                              of entries it records as needing heal ("-" when
                              it cannot be asked) and their paths; then what
                              the daemon healed, failed, is healing, and how
                              many files are in split-brain, the data it
                              wrote and at what rate since it started, the
                              state of the last full heal (inodes looked at
                              so far), and whether a brick may be taken down
                              now ("Safe to take a brick down")
  heal NAME info split-brain  per brick, the files in split-brain
  heal NAME wait              wait until a brick may be taken down: every
                              brick online and connected, nothing to heal or
                              being healed, nothing in split-brain, no full
                              heal running, at every look for 0.3 s (time
                              for mounts to reconnect). Exits 0 then; after --timeout
                              (default 10m) exits 1 saying what is missing
  --json                      (with info) print the management API's answer

Rolling restart (upgrading a replicated or dispersed volume's nodes without
downtime), one brick at a time: stop or kill the brick (or its node), upgrade,
"mortar volume start NAME force", then "mortar volume heal NAME wait" before
the next brick. Taking the next brick down sooner can leave a replica set
without quorum (writes fail with EROFS) or with a single good copy.

A file is in split-brain when its copies blame each other (possible with
cluster.quorum-type none): it cannot be read until resolved, by hand or with
cluster.favorite-child-policy:

  heal NAME split-brain latest-mtime PATH           the newest copy wins
  heal NAME split-brain bigger-file PATH            the biggest copy wins
  heal NAME split-brain source-brick HOST:/BRICK [PATH]
                       the copy on that brick wins, for PATH or, without it,
                       for every file in split-brain in the brick's set

PATH is the file's path from the volume's root (/dir/file). Split-brains of
a dispersed volume are listed by "info split-brain" but cannot be resolved
this way: no single brick holds a copy of a file there.`,
		Example: `  mortar volume heal gv0
  mortar volume heal gv0 full
  mortar volume heal gv0 info
  mortar volume heal gv0 info split-brain --json
  mortar volume heal gv0 wait --timeout 5m
  mortar volume heal gv0 split-brain source-brick server1:/data/b2 /dir/file`,
		Args: usageArgs(1, 5),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := parseHealArgs(args)
			if err != nil {
				return err
			}
			if asJSON && h.op != healInfo && h.op != healInfoSplit {
				return fmt.Errorf("volume heal: --json goes with info and info split-brain")
			}
			if cmd.Flags().Changed("timeout") && h.op != healWait {
				return fmt.Errorf("volume heal: --timeout goes with wait")
			}
			if h.op == healWait {
				if err := v.waitHealed(cmd.Context(), cmd.OutOrStdout(), h.name, timeout); err != nil {
					return failed("heal", h.name, err)
				}
				return nil
			}
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			if err := v.runHeal(ctx, cmd.OutOrStdout(), h, asJSON); err != nil {
				return failed("heal", h.name, err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "with info: print the API's JSON")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "with wait: how long to wait")
	return cmd
}

// waitHealed asks the node for heal info until a brick may be taken down,
// or fails after timeout saying why not.
func (v *volumeCmd) waitHealed(ctx context.Context, w io.Writer, name string, timeout time.Duration) error {
	if timeout <= 0 {
		return fmt.Errorf("--timeout must be positive")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := v.client()
	why := "no answer from the node yet"
	var safeSince time.Time // zero: not safe at the last look
	for {
		actx, acancel := context.WithTimeout(ctx, apiTimeout)
		hi, err := c.HealInfo(actx, name)
		acancel()
		switch {
		case err != nil:
			why, safeSince = err.Error(), time.Time{}
		case hi.Safe && safeSince.IsZero():
			safeSince = time.Now()
			why = "safe only just now (mounts may not have reconnected)"
		case hi.Safe && time.Since(safeSince) >= healWaitSettle:
			fmt.Fprintf(w, "Safe to take a brick down: yes (waited %s)\n", ago(time.Since(start)))
			return nil
		case !hi.Safe:
			why, safeSince = hi.Unsafe, time.Time{}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not safe to take a brick down after %s: %s", ago(time.Since(start)), why)
		case <-time.After(healWaitPoll):
		}
	}
}

// runHeal does what h asks and prints the answer.
func (v *volumeCmd) runHeal(ctx context.Context, w io.Writer, h healArgs, asJSON bool) error {
	c := v.client()
	switch h.op {
	case healIndex:
		if err := c.Heal(ctx, h.name); err != nil {
			return err
		}
		fmt.Fprintf(w, "Launching heal operation to perform index self heal on volume %s has been successful\nUse heal info commands to check status.\n", h.name)
	case healFull:
		fh, err := c.HealFull(ctx, h.name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "Launching heal operation to perform full self heal on volume %s has been successful\n", h.name)
		if fh.Again {
			fmt.Fprintf(w, "A full heal started at %s is running; another crawl follows it.\n", clock(fh.Started))
		}
		fmt.Fprintln(w, "Use heal info commands to check status.")
	case healInfo:
		hi, err := c.HealInfo(ctx, h.name)
		return show(w, hi, err, asJSON, func(hi api.HealInfo) { printHealInfo(w, hi, time.Now()) })
	case healInfoSplit:
		sb, err := c.SplitBrain(ctx, h.name)
		return show(w, sb, err, asJSON, func(sb api.SplitBrainInfo) {
			printHealBricks(w, sb.Bricks, "Number of entries in split-brain")
		})
	case healResolve:
		paths, err := c.ResolveSplitBrain(ctx, h.name, h.req)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintf(w, "Healed %s.\n", p)
		}
	}
	return nil
}

// show prints an API answer v (unless err) as JSON or with text.
func show[T any](w io.Writer, v T, err error, asJSON bool, text func(T)) error {
	switch {
	case err != nil:
		return err
	case asJSON:
		return printJSON(w, v)
	}
	text(v)
	return nil
}

// printHealInfo prints heal info as GlusterFS does, then the daemon's
// progress.
func printHealInfo(w io.Writer, hi api.HealInfo, now time.Time) {
	printHealBricks(w, hi.Bricks, "Number of entries")
	fmt.Fprintf(w, "Healed: %d, failed: %d, in progress: %d, in split-brain: %d\n", hi.Healed, hi.Failed, hi.InProgress, hi.SplitBrain)
	if !hi.Since.IsZero() {
		took := now.Sub(hi.Since)
		fmt.Fprintf(w, "Data healed: %s since %s (%s/s)\n", bytesIEC(hi.HealedBytes), clock(hi.Since),
			bytesIEC(uint64(float64(hi.HealedBytes)/max(took.Seconds(), 1))))
	}
	if !hi.LastScan.IsZero() {
		fmt.Fprintf(w, "Last index scan: %s ago\n", ago(now.Sub(hi.LastScan)))
	}
	switch f := hi.Full; {
	case f == nil:
	case f.Running && f.Again:
		fmt.Fprintf(w, "Full heal: running since %s, %d inodes looked at; another crawl follows\n", clock(f.Started), f.Looked)
	case f.Running:
		fmt.Fprintf(w, "Full heal: running since %s, %d inodes looked at\n", clock(f.Started), f.Looked)
	case f.Error != "":
		fmt.Fprintf(w, "Full heal: finished at %s with errors: %s\n", clock(f.Finished), f.Error)
	default:
		fmt.Fprintf(w, "Full heal: finished at %s, took %s, %d inodes looked at\n", clock(f.Finished), ago(f.Finished.Sub(f.Started)), f.Looked)
	}
	if safe, why := hi.SafeToTakeDown(); safe {
		fmt.Fprintln(w, "Safe to take a brick down: yes")
	} else {
		fmt.Fprintf(w, "Safe to take a brick down: no: %s\n", why)
	}
}

// printHealBricks prints each brick's entries under a count line titled
// count ("-" when the brick could not be asked).
func printHealBricks(w io.Writer, bricks []api.HealBrick, count string) {
	for _, b := range bricks {
		fmt.Fprintf(w, "Brick %s\n", b.Name)
		switch {
		case !b.Online:
			fmt.Fprintf(w, "Status: Transport endpoint is not connected\n%s: -\n", count)
		case b.Error != "":
			fmt.Fprintf(w, "Status: %s\n%s: -\n", b.Error, count)
		default:
			fmt.Fprintf(w, "Status: Connected\n%s: %d\n", count, b.Entries)
			for _, p := range b.Paths {
				fmt.Fprintln(w, p)
			}
			if more := b.Entries - len(b.Paths); more > 0 {
				fmt.Fprintf(w, "... and %d more\n", more)
			}
		}
		fmt.Fprintln(w)
	}
}

// clock writes a time of day in local time.
func clock(t time.Time) string { return t.Local().Format("15:04:05") }

// ago writes a duration rounded for people.
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func (v *volumeCmd) resetBrickCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "reset-brick NAME HOST:/BRICK",
		Short: "Rebuild a brick of a replicated or dispersed volume whose disk was replaced",
		Long: `Rebuild a brick of a started replicated or dispersed volume after its disk
failed and was replaced. Mount the new disk, create the brick's directory
again, empty, at the same path, then run reset-brick: it marks the directory
as the volume's brick again, records on the other bricks of its set that it
misses everything, starts it again on its port and starts a full heal, which
copies every file to it, or rebuilds its fragment of every file for a
disperse set ("mortar volume heal NAME info" shows the progress).

The directory must exist and be empty: reset-brick never deletes anything,
and refuses a directory that holds files (a brick whose data is intact only
needs "mortar volume start NAME force"). Distribute volumes are refused: their
bricks hold the only copy of their files. At least one other data brick of
a replica set must be up; of a disperse set, as many other bricks as it has
data bricks (4 for disperse 6 redundancy 2). (GlusterFS's reset-brick takes "start" and "commit"
steps; mortar's does both at once, for the same brick.)`,
		Example: `  mkdir /data/b2   # on the new disk
  mortar volume reset-brick gv0 server1:/data/b2`,
		Args: usageArgs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			if _, err := v.client().ResetBrick(ctx, args[0], args[1]); err != nil {
				return failed("reset-brick", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "volume reset-brick: success: %s is a brick of %s again; a full heal is rebuilding it (mortar volume heal %s info)\n", args[1], args[0], args[0])
			return nil
		},
	}
}
