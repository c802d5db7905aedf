package bench

import "context"

func seed000() Experiment {
	return Experiment{Name: "seed000", Title: "TODO", Run: func(ctx context.Context, r *Runner) error {
		return Unsupported("not implemented yet")
	}}
}
