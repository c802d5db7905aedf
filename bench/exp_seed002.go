package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func seed002() Experiment {
	return Experiment{
		Name:  "seed002",
		Title: "Small files and 1 GiB dd on a replicated volume, bricks on one host (paper 002)",
		Paper: "2000 tiny files written with a shell `echo >` loop and read with `cat` (ops/s); " +
			"1 GiB `dd bs=1M` with `oflag=direct` / `iflag=direct` (MB/s); GlusterFS replica 3, " +
			"three bricks on one VM, against the local ext4.",
		Run: runSeed002,
	}
}

// seed002Sizes are the sizes of a run: the paper's, or smaller for --quick.
func seed002Sizes(quick bool) (files, ddMiB int) {
	if quick {
		return 200, 64
	}
	return 2000, 1024
}

func runSeed002(ctx context.Context, r *Runner) error {
	files, ddMiB := seed002Sizes(r.Quick)
	r.Note("", "", "small files: %d files, `for i in $(seq 1 %d); do echo \"hello_$i\" > file_$i; done`, "+
		"then the same loop with `cat file_$i > /dev/null` right after (warm, as in the paper); "+
		"ops/s = files / wall time of the loop", files, files)
	r.Note("", "", "dd: %d MiB, `dd if=/dev/zero bs=1M oflag=direct conv=fsync`, then caches dropped and "+
		"`dd of=/dev/null bs=1M iflag=direct`; MB/s = bytes / seconds (10^6) from dd's own line", ddMiB)
	layouts := r.layouts(Layout{Kind: "replicate", Bricks: 3, Replica: 3}, Layout{Kind: "distribute", Bricks: 3})
	return eachLayout(ctx, r, layouts, SetupOptions{}, func(ctx context.Context, t Target, l Layout, m Mount) error {
		rec := func(rep int, metric, unit string, v float64) {
			r.Record(Result{Target: t.Name(), Layout: labelFor(t.Name(), l), Metric: metric, Value: v, Unit: unit, Repetition: rep})
			r.Progress("  %s %s #%d: %s %.1f %s", t.Name(), labelFor(t.Name(), l), rep, metric, v, unit)
		}
		for rep := 1; rep <= r.Reps; rep++ {
			w, rd, err := smallFileRates(ctx, filepath.Join(m.Dir(), "small"+strconv.Itoa(rep)), files)
			if err != nil {
				return err
			}
			rec(rep, "small files write", "ops/s", w)
			rec(rep, "small files read", "ops/s", rd)
			w, rd, err = ddRates(ctx, filepath.Join(m.Dir(), "dd"+strconv.Itoa(rep)), ddMiB)
			if err != nil {
				return err
			}
			rec(rep, "dd write", "MB/s", w)
			rec(rep, "dd read", "MB/s", rd)
		}
		return nil
	})
}

// smallFileRates writes n tiny files in dir with a shell echo loop, reads
// them back with a cat loop, and returns both rates in files per second.
func smallFileRates(ctx context.Context, dir string, n int) (write, read float64, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	wd, err := timeShell(ctx, dir, fmt.Sprintf(`for i in $(seq 1 %d); do echo "hello_$i" > file_$i; done`, n))
	if err != nil {
		return 0, 0, fmt.Errorf("small files write: %w", err)
	}
	rd, err := timeShell(ctx, dir, fmt.Sprintf(`for i in $(seq 1 %d); do cat file_$i > /dev/null; done`, n))
	if err != nil {
		return 0, 0, fmt.Errorf("small files read: %w", err)
	}
	return float64(n) / wd.Seconds(), float64(n) / rd.Seconds(), nil
}

// ddRates writes a file of mib MiB with O_DIRECT and reads it back with
// O_DIRECT after dropping caches; MB/s as dd measured them.
func ddRates(ctx context.Context, file string, mib int) (write, read float64, err error) {
	defer os.Remove(file)
	if err := DropCaches(ctx); err != nil {
		return 0, 0, err
	}
	out, err := execOut(ctx, "dd", "if=/dev/zero", "of="+file, "bs=1M", "count="+strconv.Itoa(mib), "oflag=direct", "conv=fsync")
	if err != nil {
		return 0, 0, fmt.Errorf("dd write: %w", err)
	}
	if write, err = parseDD(out); err != nil {
		return 0, 0, fmt.Errorf("dd write: %w", err)
	}
	if err := DropCaches(ctx); err != nil {
		return 0, 0, err
	}
	out, err = execOut(ctx, "dd", "if="+file, "of=/dev/null", "bs=1M", "iflag=direct")
	if err != nil {
		return 0, 0, fmt.Errorf("dd read: %w", err)
	}
	if read, err = parseDD(out); err != nil {
		return 0, 0, fmt.Errorf("dd read: %w", err)
	}
	return write, read, nil
}

// parseDD returns the rate in MB/s (10^6 bytes) of GNU dd's summary, e.g.
//
//	1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.2345 s, 870 MB/s
//
// computed from the byte count and seconds (more digits than the rate dd
// prints); if the seconds cannot be read, the printed rate and its unit
// (B/s, kB/s, MB/s, GB/s, and the binary KiB/s ... forms) are used. A
// "dd: ..." error line or a missing summary is an error.
func parseDD(out string) (float64, error) {
	var summary string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "dd: ") {
			return 0, fmt.Errorf("dd failed: %s", strings.TrimPrefix(line, "dd: "))
		}
		if strings.Contains(line, " copied, ") {
			summary = line
		}
	}
	if summary == "" {
		return 0, fmt.Errorf("no summary line in dd's output %q", shorten(out, 200))
	}
	f := strings.Fields(summary)
	bytes, berr := strconv.ParseFloat(f[0], 64)
	if berr == nil && bytes == 0 {
		return 0, fmt.Errorf("dd copied nothing: %q", summary)
	}
	_, tail, _ := strings.Cut(summary, " copied, ")
	parts := strings.Split(tail, ", ")
	if len(parts) != 2 {
		return 0, fmt.Errorf("cannot read dd's summary %q", summary)
	}
	if secs, err := strconv.ParseFloat(strings.TrimSuffix(parts[0], " s"), 64); err == nil && berr == nil && secs > 0 {
		return bytes / secs / 1e6, nil
	}
	return parseRate(parts[1])
}

// rateUnits are dd's rate units in MB/s.
var rateUnits = map[string]float64{
	"B/s": 1e-6, "kB/s": 1e-3, "MB/s": 1, "GB/s": 1e3, "TB/s": 1e6,
	"KiB/s": 1024 / 1e6, "MiB/s": 1 << 20 / 1e6, "GiB/s": 1 << 30 / 1e6,
}

func parseRate(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, fmt.Errorf("cannot read dd's rate %q", s)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	mult, ok := rateUnits[f[1]]
	if err != nil || !ok {
		return 0, fmt.Errorf("cannot read dd's rate %q", s)
	}
	return v * mult, nil
}

// elapsedSince is time.Since in seconds; a tiny helper for the
// experiments that time Go loops.
func elapsedSince(start time.Time) float64 { return time.Since(start).Seconds() }
