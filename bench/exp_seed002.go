package bench

import "context"

func seed002() Experiment {
	return Experiment{Name: "seed002", Title: "TODO", Run: func(ctx context.Context, r *Runner) error {
		return Unsupported("not implemented yet")
	}}
}
