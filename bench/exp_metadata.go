package bench

import "context"

func metadata() Experiment {
	return Experiment{Name: "metadata", Title: "TODO", Run: func(ctx context.Context, r *Runner) error {
		return Unsupported("not implemented yet")
	}}
}
