package bench

import "context"

func seed003() Experiment {
	return Experiment{Name: "seed003", Title: "TODO", Run: func(ctx context.Context, r *Runner) error {
		return Unsupported("not implemented yet")
	}}
}
