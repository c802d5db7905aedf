package bench

import "context"

func seed001() Experiment {
	return Experiment{Name: "seed001", Title: "TODO", Run: func(ctx context.Context, r *Runner) error {
		return Unsupported("not implemented yet")
	}}
}
