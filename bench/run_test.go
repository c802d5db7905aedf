package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTarget is a target for testing the run: a directory, or the errors
// it is told to give.
type fakeTarget struct {
	name       string
	availErr   error
	measureErr error
}

func (f *fakeTarget) Name() string                        { return f.name }
func (f *fakeTarget) Available(ctx context.Context) error { return f.availErr }
func (f *fakeTarget) Mount(ctx context.Context, work string, l Layout, o SetupOptions) (Mount, error) {
	return &localMount{dir: work, version: "fake"}, nil
}

// fakeExperiments: "fx" records one value per target (or fails on a
// target with measureErr); "fy" cannot run at all.
func fakeExperiments() []Experiment {
	fx := Experiment{Name: "fx", Title: "fake", Run: func(ctx context.Context, r *Runner) error {
		return r.Each(ctx, Layout{Kind: "distribute", Bricks: 3}, SetupOptions{}, func(ctx context.Context, t Target, m Mount) error {
			if err := t.(*fakeTarget).measureErr; err != nil {
				return err
			}
			r.Record(Result{Target: t.Name(), Layout: labelFor(t.Name(), Layout{Kind: "distribute", Bricks: 3}),
				Metric: "w", Value: 42, Unit: "MB/s", Repetition: 1})
			return nil
		})
	}}
	fy := Experiment{Name: "fy", Title: "broken", Run: func(ctx context.Context, r *Runner) error {
		return errors.New("the tool is missing")
	}}
	return []Experiment{fx, fy}
}

func testConfig(t *testing.T) *Config {
	cfg := &Config{Out: filepath.Join(t.TempDir(), "out"), Work: t.TempDir(), Bin: "/bin/true", Reps: 1}
	if err := cfg.defaults(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRunKeepsGoing: an unavailable target, a target failing to measure
// and an experiment that cannot run leave the other results, and all of
// them show in report.md; results.csv holds the measured rows.
func TestRunKeepsGoing(t *testing.T) {
	cfg := testConfig(t)
	targets := []Target{
		&fakeTarget{name: "local"},
		&fakeTarget{name: "mortar", measureErr: errors.New("mount died")},
		&fakeTarget{name: "glusterfs", availErr: errors.New("apt-get failed")},
	}
	if err := cfg.run(context.Background(), targets, fakeExperiments()); err != nil {
		t.Fatal(err)
	}
	report, err := os.ReadFile(filepath.Join(cfg.Out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| local | local disk | 42.0 |",
		"| mortar | distribute x3 [1] | failed |",
		"| glusterfs | — [2] | failed |",
		"mortar distribute x3: **failed**: mount died",
		"glusterfs: **failed**: target unavailable: apt-get failed",
		"**Did not run**: the tool is missing",
	} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q:\n%s", want, report)
		}
	}
	csv, err := os.ReadFile(filepath.Join(cfg.Out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(csv)); got != "experiment,target,layout,params,metric,value,unit,repetition\nfx,local,local disk,,w,42,MB/s,1" {
		t.Errorf("results.csv:\n%s", got)
	}
	if entries, _ := os.ReadDir(cfg.Work); len(entries) != 0 {
		t.Errorf("work directory not cleaned: %v", entries)
	}
}

func TestRunNothingMeasured(t *testing.T) {
	cfg := testConfig(t)
	err := cfg.run(context.Background(), []Target{&fakeTarget{name: "mortar", availErr: errors.New("no FUSE")}}, fakeExperiments())
	if !errors.Is(err, ErrNothingMeasured) {
		t.Fatalf("err = %v, want ErrNothingMeasured", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Out, "report.md")); err != nil {
		t.Fatalf("no report when nothing was measured: %v", err)
	}
}

func TestRunInterrupted(t *testing.T) {
	cfg := testConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := cfg.run(ctx, []Target{&fakeTarget{name: "local"}}, fakeExperiments())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
	report, _ := os.ReadFile(filepath.Join(cfg.Out, "report.md"))
	if !strings.Contains(string(report), "interrupted") {
		t.Errorf("report does not say it was interrupted:\n%s", report)
	}
}

func TestPickExperiments(t *testing.T) {
	if all, _ := pickExperiments(nil); len(all) != len(Experiments()) {
		t.Errorf("no names: %d experiments", len(all))
	}
	if got, err := pickExperiments([]string{"metadata", "seed002"}); err != nil || got[0].Name != "metadata" || got[1].Name != "seed002" {
		t.Errorf("picked %v, %v", got, err)
	}
	if _, err := pickExperiments([]string{"seed999"}); err == nil || !strings.Contains(err.Error(), "seed002") {
		t.Errorf("unknown experiment: %v", err)
	}
	cfg := Config{Targets: []string{"glusterfs", "local", FUSEPassthrough}}
	ts, err := cfg.makeTargets()
	if err != nil || len(ts) != 3 || ts[0].Name() != "local" || ts[1].Name() != FUSEPassthrough || ts[2].Name() != "glusterfs" {
		t.Errorf("targets %v, %v", ts, err)
	}
	cfg.Targets = []string{"glusterfs", MortarDistribute, "mortar"}
	ts, err = cfg.makeTargets()
	if err != nil || len(ts) != 3 || ts[0].Name() != "mortar" || ts[1].Name() != MortarDistribute || ts[2].Name() != "glusterfs" {
		t.Errorf("targets %v, %v", ts, err)
	}
	cfg.Targets = []string{"nfs"}
	if _, err := cfg.makeTargets(); err == nil {
		t.Error("unknown target accepted")
	}
}

// TestRunLayoutOverride: with Config.Layout (--disperse 6 --redundancy 2)
// an experiment's own layouts give way to it on every target, the
// mortar-distribute target measures distribute x6 on the same bricks, and
// the report has the ratios mortar / GlusterFS, mortar / local, mortar /
// FUSE passthrough and mortar / mortar-distribute side by side. Without the
// override mortar-distribute has no row (distribute layouts are the mortar
// target's).
func TestRunLayoutOverride(t *testing.T) {
	value := map[string]float64{"local": 400, FUSEPassthrough: 200, "mortar": 300, MortarDistribute: 600, "glusterfs": 50}
	exp := Experiment{Name: "fz", Title: "layouts", Run: func(ctx context.Context, r *Runner) error {
		return eachLayout(ctx, r, r.layouts(Layout{Kind: "distribute", Bricks: 3}), SetupOptions{},
			func(ctx context.Context, t Target, l Layout, m Mount) error {
				r.Record(Result{Target: t.Name(), Layout: labelFor(t.Name(), l), Metric: "dd write",
					Value: value[t.Name()], Unit: "MB/s", Repetition: 1})
				return nil
			})
	}}
	targets := func() []Target {
		var ts []Target
		for _, n := range TargetNames {
			ts = append(ts, &fakeTarget{name: n})
		}
		return ts
	}
	cfg := testConfig(t)
	cfg.Layout = &Layout{Kind: "disperse", Bricks: 6, Redundancy: 2}
	if err := cfg.run(context.Background(), targets(), []Experiment{exp}); err != nil {
		t.Fatal(err)
	}
	report, err := os.ReadFile(filepath.Join(cfg.Out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"| local | local disk | 400 |",
		"| fuse-passthrough | FUSE passthrough | 200 |",
		"| mortar | disperse 4+2 | 300 |",
		"| mortar-distribute | distribute x6 | 600 |",
		"| glusterfs | disperse 4+2 | 50.0 |",
		"| **mortar / GlusterFS** | disperse 4+2 vs disperse 4+2 | **6.00×** |",
		"| **mortar / local** | disperse 4+2 vs local disk | **0.75×** |",
		"| **mortar / FUSE passthrough** | disperse 4+2 vs FUSE passthrough | **1.50×** |",
		"| **mortar / mortar-distribute** | disperse 4+2 vs distribute x6 | **0.50×** |",
	}
	last := -1
	for _, w := range want {
		i := strings.Index(string(report), w)
		if i < 0 || i < last {
			t.Errorf("report lacks %q (or out of order):\n%s", w, report)
		}
		last = i
	}

	cfg = testConfig(t)
	if err := cfg.run(context.Background(), targets(), []Experiment{exp}); err != nil {
		t.Fatal(err)
	}
	report, _ = os.ReadFile(filepath.Join(cfg.Out, "report.md"))
	if strings.Contains(string(report), "mortar-distribute") || !strings.Contains(string(report), "| mortar | distribute x3 | 300 |") {
		t.Errorf("without an override mortar-distribute should have no row:\n%s", report)
	}
}
