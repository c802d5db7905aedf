package cli

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume"
)

// printInfo prints a volume the way `gluster volume info` does.
func printInfo(w io.Writer, vi api.VolumeInfo) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Volume Name: %s\n", vi.Name)
	fmt.Fprintf(w, "Type: %s\n", typeName(vi))
	fmt.Fprintf(w, "Volume ID: %s\n", vi.ID)
	fmt.Fprintf(w, "Status: %s\n", title(vi.Status))
	fmt.Fprintf(w, "Number of Bricks: %s\n", brickCount(vi))
	fmt.Fprintf(w, "Transport-type: tcp\n")
	fmt.Fprintf(w, "Bricks:\n")
	for i, b := range vi.Bricks {
		arbiter := ""
		if b.Arbiter {
			arbiter = " (arbiter)"
		}
		fmt.Fprintf(w, "Brick%d: %s%s\n", i+1, b.Name(), arbiter)
	}
	if len(vi.Options) > 0 {
		fmt.Fprintf(w, "Options Reconfigured:\n")
		keys := make([]string, 0, len(vi.Options))
		for k := range vi.Options {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "%s: %s\n", k, vi.Options[k])
		}
	}
}

// typeName names a volume's type as GlusterFS does: Distribute,
// Replicate (one replica set), Distributed-Replicate, Disperse (one
// disperse set), Distributed-Disperse.
func typeName(vi api.VolumeInfo) string {
	switch {
	case vi.Type == volume.Replicate && vi.Replica > 0 && len(vi.Bricks) > vi.Replica:
		return "Distributed-Replicate"
	case vi.Type == volume.Disperse && vi.Disperse > 0 && len(vi.Bricks) > vi.Disperse:
		return "Distributed-Disperse"
	}
	return title(vi.Type)
}

// brickCount writes the number of bricks as GlusterFS does: "6" for
// distribute, "2 x 3 = 6" for replica sets, "2 x (2 + 1) = 6" with
// arbiters, "2 x (4 + 2) = 12" for disperse sets of 4 data and 2
// redundancy bricks.
func brickCount(vi api.VolumeInfo) string {
	n := len(vi.Bricks)
	if vi.Type == volume.Disperse && vi.Disperse > 0 {
		return fmt.Sprintf("%d x (%d + %d) = %d", n/vi.Disperse, vi.Disperse-vi.Redundancy, vi.Redundancy, n)
	}
	if vi.Type != volume.Replicate || vi.Replica == 0 {
		return strconv.Itoa(n)
	}
	if slices.ContainsFunc(vi.Bricks, func(b api.BrickInfo) bool { return b.Arbiter }) {
		return fmt.Sprintf("%d x (%d + 1) = %d", n/vi.Replica, vi.Replica-1, n)
	}
	return fmt.Sprintf("%d x %d = %d", n/vi.Replica, vi.Replica, n)
}

// printStatus prints a volume's bricks the way `gluster volume status`
// does, with disk use added.
func printStatus(w io.Writer, st api.VolumeStatus) {
	fmt.Fprintf(w, "Status of volume: %s (%s)\n", st.Name, st.Status)
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "Mortar process\tTCP Port\tOnline\tPid\tDisk Free\tDisk Total\tInodes Free")
	var problems []string
	for _, b := range st.Bricks {
		online := "N"
		if b.Online {
			online = "Y"
		}
		free, total, inodes := "N/A", "N/A", "N/A"
		if b.Disk != nil {
			free, total, inodes = bytesIEC(b.Disk.Avail), bytesIEC(b.Disk.Total), count(b.Disk.InodesFree)
		}
		fmt.Fprintf(tw, "Brick %s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Name(), orNA(b.Port), online, orNA(b.PID), free, total, inodes)
		if b.Error != "" {
			problems = append(problems, fmt.Sprintf("Brick %s: %s", b.Name(), b.Error))
		}
	}
	tw.Flush()
	header, rows, _ := strings.Cut(table.String(), "\n")
	fmt.Fprintf(w, "%s\n%s\n%s", header, strings.Repeat("-", len(strings.TrimRight(header, " "))), rows)
	for _, p := range problems {
		fmt.Fprintln(w, p)
	}
	fmt.Fprintln(w)
}

// orNA writes n, or N/A for 0 (a port never chosen, no process).
func orNA(n int) string {
	if n == 0 {
		return "N/A"
	}
	return strconv.Itoa(n)
}

// title makes "distribute" "Distribute".
func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// bytesIEC formats n bytes as 1.5GiB.
func bytesIEC(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// count formats a count as 1.2M.
func count(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fG", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprintf("%d", n)
}
