package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// csvHeader is the tidy layout of results.csv: one measured value a row.
var csvHeader = []string{"experiment", "target", "layout", "params", "metric", "value", "unit", "repetition"}

// WriteCSV writes results as results.csv does.
func WriteCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, r := range results {
		rec := []string{r.Experiment, r.Target, r.Layout, r.Params, r.Metric,
			strconv.FormatFloat(r.Value, 'g', 6, 64), r.Unit, strconv.Itoa(r.Repetition)}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing results.csv: %w", err)
	}
	return nil
}

// ReadCSV reads results.csv back (tests, and comparing runs).
func ReadCSV(r io.Reader) ([]Result, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || len(recs[0]) != len(csvHeader) {
		return nil, fmt.Errorf("results.csv: want header %v", csvHeader)
	}
	var out []Result
	for i, rec := range recs[1:] {
		v, err := strconv.ParseFloat(rec[5], 64)
		if err != nil {
			return nil, fmt.Errorf("results.csv line %d: value: %w", i+2, err)
		}
		rep, err := strconv.Atoi(rec[7])
		if err != nil {
			return nil, fmt.Errorf("results.csv line %d: repetition: %w", i+2, err)
		}
		out = append(out, Result{Experiment: rec[0], Target: rec[1], Layout: rec[2], Params: rec[3],
			Metric: rec[4], Value: v, Unit: rec[6], Repetition: rep})
	}
	return out, nil
}
