package bench

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite bench/testdata/*.golden.md")

// recordedInput is a report input made of a recorded run's results
// (testdata/results_quick.csv: a --quick run on this machine) and the
// failures, notes and environment such a run has.
func recordedInput(t *testing.T) ReportInput {
	f, err := os.Open(filepath.Join("testdata", "results_quick.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	results, err := ReadCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	var exps []Experiment
	for _, e := range Experiments() {
		if e.Name == "seed002" || e.Name == "seed000" || e.Name == "metadata" {
			exps = append(exps, e)
		}
	}
	exps = append(exps, Experiment{Name: "fio", Title: "an experiment that could not run", Paper: "fio"})
	return ReportInput{
		Env: Env{Date: time.Date(2026, 11, 22, 7, 1, 0, 0, time.UTC), Duration: 45 * time.Second,
			CPU: "AMD EPYC", Cores: 2, Kernel: "6.18.44", LocalFS: "ext4 on /dev/vda", Work: "/var/tmp/mortar-bench",
			Mortar: "mortar dev, commit f27978ef5b90", GlusterFS: "glusterfs 10.3", Quick: true, Reps: 1,
			Command: "mortar bench --quick seed002 seed000 metadata fio", Load: "1.0 0.5 0.2 at the start, 2.0 1.0 0.5 at the end (2 cores)"},
		Experiments: exps,
		Results:     results,
		Failures: []Failure{
			{Experiment: "seed002", Target: "mortar", Layout: "replica 3", Err: fmt.Errorf("set-up: %w", Unsupported("replicate volumes are not implemented yet (issue 4)"))},
			{Experiment: "seed000", Target: "local", Layout: "local disk", Params: "encryption=on", Err: Unsupported("the local disk is not encrypted here (the baseline)")},
			{Experiment: "seed000", Target: "mortar", Layout: "distribute x3", Params: "encryption=on", Err: Unsupported("encryption at rest is not implemented yet (issue 7)")},
			{Experiment: "seed000", Target: "glusterfs", Layout: "distribute x3", Params: "encryption=on", Err: Unsupported("GlusterFS 10 has no encryption translator")},
			{Experiment: "metadata", Target: "glusterfs", Layout: "distribute x3", Err: errors.New("tear-down: gluster --mode=script volume stop mbench-1-3: exit status 1")},
			{Experiment: "fio", Target: "all", Err: errors.New("fio is missing")},
		},
		Notes: []Note{
			{Experiment: "seed002", Text: "small files: 200 files"},
			{Experiment: "seed002", Target: "mortar", Text: "distribute only"},
		},
		Plots: []string{"fio_bs.png", "overview.png"},
	}
}

// TestReportGolden renders the recorded run and compares it with
// testdata/report.golden.md (go test ./bench -run Golden -update-golden
// rewrites it; read the diff).
func TestReportGolden(t *testing.T) {
	got := Report(recordedInput(t))
	golden := filepath.Join("testdata", "report.golden.md")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("report differs from %s (rerun with -update-golden and read the diff):\n%s", golden, got)
	}
}

// TestReportTable checks the arithmetic and the n/a / failed cells on a
// small hand-made input.
func TestReportTable(t *testing.T) {
	res := func(target, layout, metric string, v float64, rep int) Result {
		return Result{Experiment: "x", Target: target, Layout: layout, Metric: metric, Value: v, Unit: "MB/s", Repetition: rep}
	}
	in := ReportInput{
		Experiments: []Experiment{{Name: "x", Title: "X"}},
		Results: []Result{
			res("glusterfs", "replica 3", "w", 10, 1),
			res("glusterfs", "distribute x3", "w", 40, 1), res("glusterfs", "distribute x3", "w", 60, 2),
			res("mortar", "distribute x3", "w", 100, 1), res("mortar", "distribute x3", "w", 200, 2),
			res("local", "local disk", "w", 300, 1), res("local", "local disk", "w", 300, 2),
			res("mortar", "distribute x3", "r", 7, 1),
		},
		Failures: []Failure{
			{Experiment: "x", Target: "mortar", Layout: "replica 3", Err: Unsupported("no replicas")},
			{Experiment: "x", Target: "nfs", Err: errors.New("target unavailable: no server")},
		},
	}
	got := Report(in)
	for _, want := range []string{
		"| mortar | distribute x3 | 150 (100–200) | 7.00 |",
		"| glusterfs | distribute x3 | 50.0 (40.0–60.0) | — |",
		"| **mortar / GlusterFS** | distribute x3 vs distribute x3 | **3.00×** | — |",
		"| **mortar / local** | distribute x3 vs local disk | **0.50×** | — |",
		"| mortar | replica 3 [1] | n/a | n/a |",
		"| nfs | — [2] | failed | failed |",
		"[1] mortar replica 3: n/a, no replicas",
		"[2] nfs: **failed**: target unavailable: no server",
		"Cells: mean (min–max) of 2 repetitions.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "| mortar | replica 3") > strings.Index(got, "| mortar | distribute x3") {
		t.Errorf("replica row should come before distribute:\n%s", got)
	}
}

func TestCSVRoundTrip(t *testing.T) {
	in := []Result{
		{Experiment: "seed002", Target: "mortar", Layout: "distribute x3", Metric: "dd write", Value: 332.123456, Unit: "MB/s", Repetition: 1},
		{Experiment: "seed003", Target: "glusterfs", Layout: "replica 3", Params: "bs=4k threads=8", Metric: "p99, latency", Value: 0.25, Unit: "ms", Repetition: 2},
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, in); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if lines[0] != "experiment,target,layout,params,metric,value,unit,repetition" || len(lines) != 3 {
		t.Fatalf("csv:\n%s", buf.String())
	}
	if lines[2] != `seed003,glusterfs,replica 3,bs=4k threads=8,"p99, latency",0.25,ms,2` {
		t.Errorf("quoted line: %s", lines[2])
	}
	out, err := ReadCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Value != 332.123 || out[1] != in[1] {
		t.Errorf("round trip: %+v", out)
	}
}

func TestTrimmedMean(t *testing.T) {
	var a agg
	for _, v := range []float64{1, 2, 3} {
		a.add(v)
	}
	if a.mean() != 2 {
		t.Fatalf("plain mean of 3 values: %v", a.mean())
	}
	for _, v := range []float64{4, 100} {
		a.add(v)
	}
	if a.mean() != 3 || a.min != 1 || a.max != 100 {
		t.Fatalf("trimmed mean of 1..4,100: %v (min %v max %v), want 3", a.mean(), a.min, a.max)
	}
}

// TestReportSameBricks: each replicated or dispersed mortar row is
// compared with mortar-distribute on as many bricks (seed003's default
// layouts give mortar-distribute two rows); a distribute row is not.
func TestReportSameBricks(t *testing.T) {
	res := func(target, layout string, v float64) Result {
		return Result{Experiment: "x", Target: target, Layout: layout, Metric: "w", Value: v, Unit: "MB/s", Repetition: 1}
	}
	got := Report(ReportInput{
		Experiments: []Experiment{{Name: "x", Title: "X"}},
		Results: []Result{
			res("mortar", "distribute x4", 400), res("mortar", "replica 3", 100), res("mortar", "disperse 4+2", 300),
			res(MortarDistribute, "distribute x3", 500), res(MortarDistribute, "distribute x6", 600),
		},
	})
	for _, want := range []string{
		"| **mortar / mortar-distribute** | replica 3 vs distribute x3 | **0.20×** |",
		"| **mortar / mortar-distribute** | disperse 4+2 vs distribute x6 | **0.50×** |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "distribute x4 vs") {
		t.Errorf("a distribute row compared with mortar-distribute:\n%s", got)
	}
	if i, j := strings.Index(got, "| mortar | disperse"), strings.Index(got, "| mortar-distribute |"); i < 0 || j < i {
		t.Errorf("mortar-distribute rows should follow mortar's:\n%s", got)
	}
	for label, n := range map[string]int{"disperse 4+2": 6, "replica 3": 3, "distribute x4": 4, "local disk": 0} {
		if got := labelBricks(label); got != n {
			t.Errorf("labelBricks(%q) = %d, want %d", label, got, n)
		}
	}
}
