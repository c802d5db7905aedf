package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Record adds a measured value of the running experiment.
func (r *Runner) Record(res Result) {
	res.Experiment = r.exp
	r.results = append(r.results, res)
}

// Fail records that the running experiment could not run on a target.
func (r *Runner) Fail(target string, layout Layout, err error) {
	r.FailParams(target, layout, "", err)
}

// FailParams records that the running experiment could not run on a
// target for one set of parameters (a row of the report with params).
func (r *Runner) FailParams(target string, layout Layout, params string, err error) {
	if !measures(target, layout) {
		return
	}
	f := Failure{Experiment: r.exp, Target: target, Layout: labelFor(target, layout), Params: params, Err: err}
	r.failures = append(r.failures, f)
	r.Progress("  %s: %v", strings.TrimSpace(target+" "+f.Layout+" "+params), err)
}

// Note adds a line to the running experiment's section of the report;
// target and layout may be empty.
func (r *Runner) Note(target, layout, format string, args ...any) {
	n := Note{Experiment: r.exp, Target: target, Layout: layout, Text: fmt.Sprintf(format, args...)}
	r.notes = append(r.notes, n)
	r.Progress("  note: %s", n.Text)
}

// Notes returns the notes every experiment added, in order.
func (r *Runner) Notes() []Note { return r.notes }

// Progress prints a line for the person watching.
func (r *Runner) Progress(format string, args ...any) {
	if r.Out != nil {
		fmt.Fprintf(r.Out, "[%6.1fs] %s\n", time.Since(r.started).Seconds(), fmt.Sprintf(format, args...))
	}
}

// Each sets up every target with layout in turn, runs fn on its mount and
// tears it down. A target that fails to set up or to run is recorded as a
// failure and the others go on; Each returns an error only if ctx ends.
func (r *Runner) Each(ctx context.Context, layout Layout, opts SetupOptions,
	fn func(ctx context.Context, t Target, m Mount) error) error {
	return r.EachParams(ctx, layout, "", opts, fn)
}

// EachParams is Each for one point of an experiment's parameters (the
// row a failure is shown in: "servers=3"). A target that does not measure
// the layout (mortar-distribute on a distribute layout) is left out.
func (r *Runner) EachParams(ctx context.Context, layout Layout, params string, opts SetupOptions,
	fn func(ctx context.Context, t Target, m Mount) error) error {
	for _, t := range r.Targets {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !measures(t.Name(), layout) {
			continue
		}
		work := filepath.Join(r.Work, fmt.Sprintf("%s-%s-%d", r.exp, t.Name(), time.Now().UnixNano()))
		if err := os.MkdirAll(work, 0o755); err != nil {
			return err
		}
		r.Progress("%s on %s (%s)", r.exp, t.Name(), labelFor(t.Name(), layout))
		err := r.runOne(ctx, t, work, layout, opts, fn)
		os.RemoveAll(work)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.FailParams(t.Name(), layout, params, err)
		}
	}
	return nil
}

func (r *Runner) runOne(ctx context.Context, t Target, work string, layout Layout, opts SetupOptions,
	fn func(ctx context.Context, t Target, m Mount) error) error {
	m, err := t.Mount(ctx, work, layout, opts)
	if err != nil {
		return fmt.Errorf("set-up: %w", err)
	}
	if r.versions == nil {
		r.versions = map[string]string{}
	}
	r.versions[t.Name()] = m.Version()
	err = fn(ctx, t, m)
	if cerr := m.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("tear-down: %w", cerr)
	}
	return err
}

// layouts are the volume layouts of a loopback experiment: its own, or
// the one the run asks for (--replica, --disperse).
func (r *Runner) layouts(own ...Layout) []Layout {
	if r.Layout != nil {
		return []Layout{*r.Layout}
	}
	return own
}

// Results returns what was recorded, and the failures.
func (r *Runner) Results() ([]Result, []Failure) { return r.results, r.failures }

// IsUnsupported reports whether err says a target cannot do what was
// asked (as opposed to failing at it).
func IsUnsupported(err error) bool { return errors.Is(err, ErrUnsupported) }
