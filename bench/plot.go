package bench

// writePlots draws PNG plots of the results into dir and returns their
// file names (relative to dir), for the report to link.
func writePlots(dir string, results []Result) ([]string, error) { return nil, nil }
