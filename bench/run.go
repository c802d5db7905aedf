package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config is a run of the suite.
type Config struct {
	Experiments []string // names (Experiments()); none = all
	Targets     []string // TargetNames; none = DefaultTargets
	Out         string   // report.md, results.csv and plots go here
	Work        string   // parent directory of bricks, mounts and files
	Quick       bool     // smoke run: smaller sizes, one repetition
	Reps        int      // repetitions (0: 3, or 1 with Quick)
	Bin         string   // mortar binary (default: this executable)
	Log         *slog.Logger
	Progress    io.Writer // progress lines; nil = none
	Command     string    // the command line, for the report header
	// GlusterStrictODirect sets performance.strict-o-direct on every
	// GlusterFS volume (like-for-like O_DIRECT).
	GlusterStrictODirect bool
	// Layout, if set, is the volume layout of the loopback experiments
	// (seed000, seed002, seed003, metadata) in place of their own.
	Layout *Layout
	// FioCorners: seed003 measures only the corners of its matrix.
	FioCorners bool
	// FS, if set ("xfs", "ext4"), makes a file system of that type in a
	// file under Work for the run, and puts every target in it (loopfs.go).
	FS string
}

// TargetNames are the targets in the order the suite runs them.
// fuse-passthrough is the local disk through a FUSE loopback mount (the
// FUSE ceiling). mortar-distribute is mortar with a distribute volume over
// the bricks a replicated or dispersed layout would have (it measures
// nothing for distribute layouts, which the mortar target has already).
var TargetNames = []string{"local", FUSEPassthrough, "mortar", MortarDistribute, "glusterfs"}

// DefaultTargets are the targets of a run that names none.
var DefaultTargets = []string{"local", FUSEPassthrough, "mortar", "glusterfs"}

// MortarDistribute is the name of the target measuring mortar's
// distribute volume on the bricks of the redundant layouts.
const MortarDistribute = "mortar-distribute"

// ErrNothingMeasured is returned by Run when no value at all was measured.
var ErrNothingMeasured = errors.New("nothing could be measured")

// Run runs the chosen experiments on the chosen targets and writes the
// report, the CSV and the plots to cfg.Out, also after a failure or an
// interruption (with what was measured until then). It returns an error
// when the configuration is wrong, the output cannot be written, ctx
// ended, or nothing at all could be measured.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	exps, err := pickExperiments(cfg.Experiments)
	if err != nil {
		return err
	}
	targets, err := cfg.makeTargets()
	if err != nil {
		return err
	}
	return cfg.run(ctx, targets, exps)
}

// run is Run with the targets and experiments chosen.
func (cfg *Config) run(ctx context.Context, targets []Target, exps []Experiment) error {
	parent := cfg.Work
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	var loop *loopFS
	if cfg.FS != "" {
		var err error
		if loop, err = makeLoopFS(parent, cfg.FS); err != nil {
			return err
		}
		defer loop.close()
		parent = loop.dir
	}
	work := filepath.Join(parent, fmt.Sprintf("run-%d", os.Getpid()))
	if err := os.MkdirAll(work, 0o755); err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	defer func() {
		unmountUnder(work)
		os.RemoveAll(work)
	}()
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	r := &Runner{Work: work, Quick: cfg.Quick, Reps: cfg.Reps, Layout: cfg.Layout, FioCorners: cfg.FioCorners,
		Log: cfg.Log, Out: cfg.Progress, started: time.Now()}
	for _, t := range targets {
		if g, ok := t.(*glusterTarget); ok {
			g.progress = r.Progress
		}
	}
	env := collectEnv(parent)
	if loop != nil {
		env.LocalFS = loop.describe()
	}
	defer closeTargets(targets, cfg.Log)
	r.Targets = checkTargets(ctx, r, targets, exps, &env)
	for _, e := range exps {
		if ctx.Err() != nil {
			break
		}
		r.exp = e.Name
		r.Progress("== %s: %s", e.Name, e.Title)
		if err := e.Run(ctx, r); err != nil && ctx.Err() == nil {
			r.failures = append(r.failures, Failure{Experiment: e.Name, Target: "all", Err: err})
			r.Progress("  %s did not run: %v", e.Name, err)
		}
	}
	env.Duration = time.Since(r.started)
	env.Load = fmt.Sprintf("%s at the start, %s at the end (%d cores)", env.Load, loadAvg(), env.Cores)
	env.Command = cfg.Command
	if werr := writeOutputs(cfg.Out, r, exps, env, ctx.Err() != nil); werr != nil {
		return werr
	}
	r.Progress("report: %s", filepath.Join(cfg.Out, "report.md"))
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted (partial report written): %w", ctx.Err())
	}
	if len(r.results) == 0 {
		return ErrNothingMeasured
	}
	return nil
}

func (cfg *Config) defaults() error {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Reps <= 0 {
		cfg.Reps = 3
		if cfg.Quick {
			cfg.Reps = 1
		}
	}
	if cfg.Out == "" {
		cfg.Out = "bench-out"
	}
	if cfg.Work == "" {
		cfg.Work = "/var/tmp/mortar-bench"
	}
	if len(cfg.Targets) == 0 {
		cfg.Targets = DefaultTargets
	}
	if cfg.Bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding the mortar binary: %w", err)
		}
		cfg.Bin = exe
	}
	var err error
	for _, p := range []*string{&cfg.Out, &cfg.Work, &cfg.Bin} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	return nil
}

func pickExperiments(names []string) ([]Experiment, error) {
	all := Experiments()
	if len(names) == 0 {
		return all, nil
	}
	var out []Experiment
	for _, n := range names {
		found := false
		for _, e := range all {
			if e.Name == n {
				out, found = append(out, e), true
			}
		}
		if !found {
			var known []string
			for _, e := range all {
				known = append(known, e.Name)
			}
			return nil, fmt.Errorf("unknown experiment %q (known: %s)", n, strings.Join(known, ", "))
		}
	}
	return out, nil
}

// makeTargets builds the named targets, in the suite's order.
func (cfg *Config) makeTargets() ([]Target, error) {
	want := map[string]bool{}
	for _, n := range cfg.Targets {
		found := false
		for _, k := range TargetNames {
			found = found || k == n
		}
		if !found {
			return nil, fmt.Errorf("unknown target %q (known: %s)", n, strings.Join(TargetNames, ", "))
		}
		want[n] = true
	}
	var ts []Target
	for _, n := range TargetNames {
		switch {
		case !want[n]:
		case n == "local":
			ts = append(ts, NewLocalTarget())
		case n == FUSEPassthrough:
			ts = append(ts, NewPassthroughTarget(cfg.Bin))
		case n == "mortar":
			ts = append(ts, NewMortarTarget(cfg.Bin, cfg.Log))
		case n == MortarDistribute:
			ts = append(ts, NewMortarDistributeTarget(cfg.Bin, cfg.Log))
		case n == "glusterfs":
			g := NewGlusterTarget(cfg.Log, nil)
			if cfg.GlusterStrictODirect {
				StrictODirect(g)
			}
			ts = append(ts, g)
		}
	}
	return ts, nil
}

// checkTargets returns the available targets; an unavailable one gets a
// failure in every experiment, so each table shows it and why.
func checkTargets(ctx context.Context, r *Runner, targets []Target, exps []Experiment, env *Env) []Target {
	var ok []Target
	env.GlusterFS = "not measured in this run"
	for _, t := range targets {
		r.Progress("checking %s", t.Name())
		err := t.Available(ctx)
		switch v := t.(type) {
		case *mortarTarget:
			env.Mortar = v.version
		case *passthroughTarget:
			env.Passthrough = v.version
			if err != nil {
				env.Passthrough = "unavailable: " + err.Error()
			}
		case *glusterTarget:
			env.GlusterFS = v.version
			if err != nil {
				env.GlusterFS = "unavailable: " + err.Error()
			}
		}
		if err == nil {
			ok = append(ok, t)
			continue
		}
		r.Progress("  %s is unavailable: %v", t.Name(), err)
		for _, e := range exps {
			r.failures = append(r.failures, Failure{Experiment: e.Name, Target: t.Name(),
				Err: fmt.Errorf("target unavailable: %w", err)})
		}
	}
	return ok
}

// closeTargets ends what targets keep for the whole run (GlusterFS: the
// glusterd the suite started).
func closeTargets(targets []Target, log *slog.Logger) {
	for _, t := range targets {
		if c, ok := t.(io.Closer); ok {
			if err := c.Close(); err != nil {
				log.Warn("closing target", "target", t.Name(), "err", err)
			}
		}
	}
}

// writeOutputs writes results.csv, the plots and report.md.
func writeOutputs(out string, r *Runner, exps []Experiment, env Env, interrupted bool) error {
	f, err := os.Create(filepath.Join(out, "results.csv"))
	if err != nil {
		return err
	}
	if err := WriteCSV(f, r.results); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	plots, perr := writePlots(out, r.results)
	env.Reps = r.Reps
	env.Quick = r.Quick
	in := ReportInput{Env: env, Experiments: exps, Results: r.results, Failures: r.failures,
		Notes: r.notes, Plots: plots, PlotErr: perr, Interrupted: interrupted}
	return os.WriteFile(filepath.Join(out, "report.md"), []byte(Report(in)), 0o644)
}
