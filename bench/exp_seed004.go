package bench

import "context"

func seed004() Experiment {
	return Experiment{Name: "seed004", Title: "TODO", Run: func(ctx context.Context, r *Runner) error {
		return Unsupported("not implemented yet")
	}}
}
