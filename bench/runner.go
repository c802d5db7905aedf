package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Record adds a measured value of the running experiment.
func (r *Runner) Record(res Result) {
	res.Experiment = r.exp
	r.results = append(r.results, res)
}

// Fail records that the running experiment could not run on a target.
func (r *Runner) Fail(target string, layout Layout, err error) {
	r.failures = append(r.failures, Failure{Experiment: r.exp, Target: target, Layout: layout.String(), Err: err})
	r.Progress("  %s %s: %v", target, layout, err)
}

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
	for _, t := range r.Targets {
		if err := ctx.Err(); err != nil {
			return err
		}
		work := filepath.Join(r.Work, fmt.Sprintf("%s-%s-%d", r.exp, t.Name(), time.Now().UnixNano()))
		if err := os.MkdirAll(work, 0o755); err != nil {
			return err
		}
		r.Progress("%s on %s (%s)", r.exp, t.Name(), layout)
		err := r.runOne(ctx, t, work, layout, opts, fn)
		os.RemoveAll(work)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.Fail(t.Name(), layout, err)
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

// Results returns what was recorded, and the failures.
func (r *Runner) Results() ([]Result, []Failure) { return r.results, r.failures }

// IsUnsupported reports whether err says a target cannot do what was
// asked (as opposed to failing at it).
func IsUnsupported(err error) bool { return errors.Is(err, ErrUnsupported) }
