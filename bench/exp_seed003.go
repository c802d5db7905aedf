package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// Seed 003 compared EOS and GlusterFS on three layouts (distributed,
// replicated, RAID6-like erasure coding: GlusterFS disperse 4+2) with fio:
// block sizes 4K..1024K, 1..128 threads, iodepth 32, read / write /
// randread / randwrite, 6 GB working set, 180 s per point.
//
// Here the same matrix, sized for a 2-core machine shared with others:
// each point is one fio run of `threads` jobs (fio's numjobs) on files of
// 256 MiB in all (64 MiB with --quick) split between the jobs, so every
// point touches the same working set, for 10 s (3 s with --quick), with
// libaio and O_DIRECT where the target takes them (psync through the page
// cache otherwise; the report says which). Files are laid out once per
// thread count and shared by every pattern and block size. --fio-corners
// (and --quick) keep the corners of the matrix: 4k and 1m × 1 and 4
// threads × write and randread.
func seed003() Experiment {
	return Experiment{
		Name:  "seed003",
		Title: "fio: layout × pattern × block size × threads (bandwidth, IOPS, mean and p99 latency)",
		Paper: "fio bs 4K..1024K × threads 1..128 × read/write/randread/randwrite, iodepth 32, 6 GB, 180 s, " +
			"on distributed, replicated and EC 4+2 layouts: write ceilings set by the layout (EC ≤ 800, replica ≤ 200, " +
			"distributed ≤ 1200 MB/s on a 1175 MB/s link); GlusterFS flat across threads, better on random I/O",
		Run: runSeed003,
	}
}

// fioMatrix is the set of points measured on every target and layout.
type fioMatrix struct {
	Layouts  []Layout
	Patterns []string // the order they run in: writes first lay the files out
	BS       []string
	Threads  []int
	Runtime  time.Duration
	TotalMiB int // working set of one point, split between its jobs
	Reps     int
}

// seed003Matrix is the matrix of a run: the full one; only its corners
// (corners: 4k and 1m × 1 and 4 threads × write and randread) at full
// size and runtime; or, with quick, the corners shorter and smaller.
func seed003Matrix(quick, corners bool, reps int) fioMatrix {
	m := fioMatrix{
		Layouts: []Layout{
			{Kind: "distribute", Bricks: 4},
			{Kind: "replicate", Bricks: 3, Replica: 3},
			{Kind: "disperse", Bricks: 6, Redundancy: 2},
		},
		Patterns: []string{"write", "read", "randwrite", "randread"},
		BS:       []string{"4k", "16k", "64k", "256k", "1m"},
		Threads:  []int{1, 4, 16},
		Runtime:  10 * time.Second,
		TotalMiB: 256,
		Reps:     1, // a point is already the mean of thousands of I/Os over 10 s
	}
	if quick || corners {
		m.Patterns = []string{"write", "randread"}
		m.BS = []string{"4k", "1m"}
		m.Threads = []int{1, 4}
	}
	if quick {
		m.Runtime = 3 * time.Second
		m.TotalMiB = 64
		m.Reps = min(max(reps, 1), 3)
	}
	return m
}

// points is the number of fio runs on one target and layout.
func (m fioMatrix) points() int { return len(m.Patterns) * len(m.BS) * len(m.Threads) * m.Reps }

func runSeed003(ctx context.Context, r *Runner) error {
	m := seed003Matrix(r.Quick, r.FioCorners, r.Reps)
	m.Layouts = r.layouts(m.Layouts...)
	if err := ensureTool(ctx, "fio", "fio"); err != nil {
		for _, t := range r.Targets {
			for _, l := range m.Layouts {
				r.Fail(t.Name(), l, Unsupported("fio is not available: %v", err))
			}
		}
		return nil
	}
	r.Note("", "", "%d points per target and layout: patterns %v × bs %v × threads %v × %d repetition(s), %s each, iodepth 32, %d MiB working set per point",
		m.points(), m.Patterns, m.BS, m.Threads, m.Reps, m.Runtime, m.TotalMiB)
	return eachLayout(ctx, r, m.Layouts, SetupOptions{}, func(ctx context.Context, t Target, l Layout, mnt Mount) error {
		return m.runOn(ctx, r, t.Name(), labelFor(t.Name(), l), mnt.Dir())
	})
}

// runOn measures every point of the matrix in dir and records bandwidth,
// IOPS and latencies. The first point settles the engine (libaio with
// O_DIRECT, or psync) for the rest.
func (m fioMatrix) runOn(ctx context.Context, r *Runner, target, layout, dir string) error {
	var engine fioEngine
	version := ""
	for _, threads := range m.Threads {
		for _, pattern := range m.Patterns {
			for _, bs := range m.BS {
				for rep := 1; rep <= m.Reps; rep++ {
					j := fioJob{Dir: filepath.Join(dir, fmt.Sprintf("fio-t%d", threads)), Pattern: pattern, BS: bs,
						Jobs: threads, SizeMiB: max(m.TotalMiB/threads, 1), Runtime: m.Runtime, IODepth: 32}
					res, err := runFioAdapt(ctx, j, &engine)
					if err != nil {
						return err
					}
					version = res.Version
					recordFio(r, target, layout, j, rep, res)
				}
			}
		}
	}
	r.Note(target, layout, "%s, %s", version, engine)
	return nil
}

func recordFio(r *Runner, target, layout string, j fioJob, rep int, res fioResult) {
	params := fmt.Sprintf("bs=%s pattern=%s threads=%d", j.BS, j.Pattern, j.Jobs)
	for _, v := range []struct {
		metric, unit string
		value        float64
	}{
		{"bandwidth", "MB/s", res.BandwidthMBps},
		{"IOPS", "IOPS", res.IOPS},
		{"mean latency", "ms", res.LatMeanMs},
		{"p99 latency", "ms", res.LatP99Ms},
	} {
		r.Record(Result{Target: target, Layout: layout, Params: params, Metric: v.metric,
			Value: v.value, Unit: v.unit, Repetition: rep})
	}
	r.Progress("  %s %s %s: %.1f MB/s, %.0f IOPS, mean %.2f ms, p99 %.2f ms",
		target, layout, params, res.BandwidthMBps, res.IOPS, res.LatMeanMs, res.LatP99Ms)
}
