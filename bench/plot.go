package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Plots are drawn by gnuplot (Debian's gnuplot-nox, installed if missing)
// from a data file and a script generated here, both kept in plot-data/
// beside the PNGs so that a figure can be redrawn or restyled by hand
// (cd plot-data && gnuplot seed001.gp). Each
// point is the trimmed mean of its repetitions (min and max dropped from 5
// on) with an error bar from the lowest to the highest repetition.

// plotSpec is one PNG: panels in a grid.
type plotSpec struct {
	Name   string // file stem: <Name>.png, plot-data/<Name>.{dat,gp}
	Title  string
	Cols   int
	Panels []plotPanel
}

type plotPanel struct {
	Title, XLabel, YLabel string
	LogX, LogY            bool
	RefY                  float64 // a dashed reference line y = RefY (the link), 0 = none
	RefSlope              float64 // or y = RefSlope·x (n links), 0 = none
	RefLabel              string
	XStep                 float64 // x tics every XStep on a linear axis (counts), 0 = automatic
	Series                []plotSeries
}

type plotSeries struct {
	Name   string
	Points []plotPoint // by X
}

type plotPoint struct{ X, Mean, Min, Max float64 }

// writePlots draws PNG plots of the results into dir and returns their
// file names (relative to dir), for the report to link. With no result to
// plot it returns nothing; without gnuplot it returns the reason.
func writePlots(dir string, results []Result) ([]string, error) {
	specs := plotSpecs(results)
	if len(specs) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := ensureTool(ctx, "gnuplot", "gnuplot-nox"); err != nil {
		return nil, fmt.Errorf("no plots: %w", err)
	}
	pdir := filepath.Join(dir, "plot-data")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		return nil, err
	}
	var names []string
	var errs []error
	for _, s := range specs {
		if err := drawPlot(ctx, pdir, s); err != nil {
			errs = append(errs, fmt.Errorf("plot %s: %w", s.Name, err))
			continue
		}
		names = append(names, s.Name+".png")
	}
	return names, errors.Join(errs...)
}

// drawPlot writes <Name>.dat and <Name>.gp in dir and runs gnuplot
// there, which draws ../<Name>.png.
func drawPlot(ctx context.Context, dir string, s plotSpec) error {
	if err := os.WriteFile(filepath.Join(dir, s.Name+".dat"), plotData(s), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, s.Name+".gp"), []byte(plotScript(s)), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "gnuplot", s.Name+".gp")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gnuplot: %v: %s", err, shorten(strings.TrimSpace(string(out)), 400))
	}
	return nil
}

// plotData is every series of every panel as a gnuplot data block
// ("index" k in the script, in order): x, mean, min, max.
func plotData(s plotSpec) []byte {
	var b bytes.Buffer
	for pi, p := range s.Panels {
		for si, se := range p.Series {
			fmt.Fprintf(&b, "# panel %d %q, series %d %q: x mean min max\n", pi, p.Title, si, se.Name)
			for _, pt := range se.Points {
				fmt.Fprintf(&b, "%g %.6g %.6g %.6g\n", pt.X, pt.Mean, pt.Min, pt.Max)
			}
			b.WriteString("\n\n")
		}
	}
	return b.Bytes()
}

// plotScript is the gnuplot program drawing s from plotData's file.
func plotScript(s plotSpec) string {
	cols := max(s.Cols, 1)
	rows := (len(s.Panels) + cols - 1) / cols
	var b strings.Builder
	fmt.Fprintf(&b, "set terminal pngcairo noenhanced size %d,%d font 'sans,10'\n", 650*cols, 420*rows+40)
	fmt.Fprintf(&b, "set output %s\n", gpQuote("../"+s.Name+".png"))
	fmt.Fprintf(&b, "set multiplot layout %d,%d title %s font 'sans,12'\n", rows, cols, gpQuote(s.Title))
	b.WriteString("set grid\nset key outside right top vertical font 'sans,8' samplen 2\nset bars small\nset offsets graph 0.03, graph 0.03, 0, 0\n")
	index := 0
	for _, p := range s.Panels {
		fmt.Fprintf(&b, "set title %s\nset xlabel %s\nset ylabel %s\n", gpQuote(p.Title), gpQuote(p.XLabel), gpQuote(p.YLabel))
		b.WriteString(map[bool]string{true: "set logscale x 2\n", false: "unset logscale x\n"}[p.LogX])
		if p.XStep > 0 {
			fmt.Fprintf(&b, "set xtics %g\n", p.XStep)
		} else {
			b.WriteString("set xtics autofreq\n")
		}
		b.WriteString(map[bool]string{true: "set logscale y 10\n", false: "unset logscale y\nset yrange [0:*]\n"}[p.LogY])
		if p.LogY {
			b.WriteString("set yrange [*:*]\n")
		}
		var items []string
		for _, se := range p.Series {
			items = append(items, fmt.Sprintf("%s index %d using 1:2:3:4 with yerrorlines %s ps 0.8 title %s",
				gpQuote(s.Name+".dat"), index, seriesStyle(se.Name), gpQuote(se.Name)))
			index++
		}
		switch {
		case p.RefY > 0:
			items = append(items, fmt.Sprintf("%g with lines dt 2 lw 1 lc rgb 'black' title %s", p.RefY, gpQuote(p.RefLabel)))
		case p.RefSlope > 0:
			items = append(items, fmt.Sprintf("%g*x with lines dt 2 lw 1 lc rgb 'black' title %s", p.RefSlope, gpQuote(p.RefLabel)))
		}
		fmt.Fprintf(&b, "plot %s\n", strings.Join(items, ", \\\n     "))
	}
	b.WriteString("unset multiplot\n")
	return b.String()
}

// seriesStyle gives a series the same look in every plot: the colour says
// the target (local grey, FUSE passthrough purple, mortar red,
// mortar-distribute orange, GlusterFS blue), the point and dash the layout
// (distribute circle, replica square, disperse triangle).
func seriesStyle(name string) string {
	color := "'#2ca02c'"
	switch {
	case strings.HasPrefix(name, "local"):
		color = "'#7f7f7f'"
	case strings.HasPrefix(name, FUSEPassthrough):
		color = "'#9467bd'"
	case strings.HasPrefix(name, MortarDistribute):
		color = "'#ff7f0e'"
	case strings.HasPrefix(name, "mortar"):
		color = "'#d62728'"
	case strings.HasPrefix(name, "glusterfs"):
		color = "'#1f77b4'"
	}
	pt, dt := 7, 1
	switch {
	case strings.Contains(name, "replica"):
		pt, dt = 5, 2
	case strings.Contains(name, "disperse"):
		pt, dt = 9, 4
	}
	return fmt.Sprintf("lw 2 lc rgb %s pt %d dt %d", color, pt, dt)
}

// gpQuote quotes s as a gnuplot single-quoted string.
func gpQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// plotSpecs chooses the plots for the experiments present in results.
func plotSpecs(results []Result) []plotSpec {
	var specs []plotSpec
	for _, s := range []plotSpec{seed001Plot(results), seed003Plot(results, "bs"), seed003Plot(results, "threads"), seed004Plot(results)} {
		var panels []plotPanel
		for _, p := range s.Panels {
			if len(p.Series) > 0 {
				panels = append(panels, p)
			}
		}
		if s.Panels = panels; len(panels) > 0 {
			specs = append(specs, s)
		}
	}
	return specs
}

func seed001Plot(results []Result) plotSpec {
	s := plotSpec{Name: "seed001", Title: "seed 001: iozone-style throughput vs file size, 100 Mbit/s link, client caches off", Cols: 2}
	for _, op := range seed001Ops {
		p := plotPanel{Title: op, XLabel: "file size (MiB)", YLabel: "MB/s (log)", LogX: true, LogY: true,
			RefY: 12.5, RefLabel: "link 12.5 MB/s"}
		p.Series = collectSeries(results, plotSel{exp: "seed001", metric: op, unit: "MB/s", x: "size", xDiv: 1 << 20,
			name: targetName})
		s.Panels = append(s.Panels, p)
	}
	return s
}

// seed003Plot draws bandwidth against dim ("bs" or "threads"), one panel
// per pattern and per extreme of the other dimension.
func seed003Plot(results []Result, dim string) plotSpec {
	other, xlabel, xDiv := "threads", "block size (KiB)", 1024.0
	if dim == "threads" {
		other, xlabel, xDiv = "bs", "threads (fio numjobs)", 1
	}
	s := plotSpec{Name: "seed003_" + dim, Title: "seed 003: fio bandwidth vs " + strings.TrimSuffix(xlabel, " (KiB)"), Cols: 2}
	var patterns, others []string
	for _, r := range results {
		if r.Experiment == "seed003" && r.Metric == "bandwidth" {
			p := parseParams(r.Params)
			patterns = appendNew(patterns, p["pattern"])
			others = appendNew(others, p[other])
		}
	}
	sort.Slice(others, func(i, j int) bool { return paramNumber(others[i]) < paramNumber(others[j]) })
	if len(others) > 2 {
		others = []string{others[0], others[len(others)-1]}
	}
	for _, pat := range patterns {
		for _, o := range others {
			p := plotPanel{Title: fmt.Sprintf("%s, %s=%s", pat, other, o), XLabel: xlabel, YLabel: "MB/s (log)", LogX: true, LogY: true}
			p.Series = collectSeries(results, plotSel{exp: "seed003", metric: "bandwidth", unit: "MB/s", x: dim, xDiv: xDiv,
				match: map[string]string{"pattern": pat, other: o}, name: targetLayoutName})
			s.Panels = append(s.Panels, p)
		}
	}
	return s
}

func seed004Plot(results []Result) plotSpec {
	s := plotSpec{Name: "seed004", Title: "seed 004: aggregate throughput vs servers and vs clients", Cols: 2}
	for _, dim := range []string{"servers", "clients"} {
		for _, op := range []string{"write", "read"} {
			p := plotPanel{Title: op + " vs " + dim, XLabel: dim, YLabel: "aggregate MB/s", XStep: 1}
			if dim == "servers" {
				link := float64(seed004RateMbit) / 8
				p.RefSlope, p.RefLabel = link, fmt.Sprintf("n links × %g MB/s", link)
			}
			p.Series = collectSeries(results, plotSel{exp: "seed004", metric: op, unit: "MB/s", x: dim, xDiv: 1,
				name: targetName})
			s.Panels = append(s.Panels, p)
		}
	}
	return s
}

// targetName names a series by its target (experiments with one layout
// per target).
func targetName(r Result, _ map[string]string) string { return r.Target }

// targetLayoutName names a series by target and layout; the local disk
// (also through FUSE passthrough) has no layout.
func targetLayoutName(r Result, _ map[string]string) string {
	if onLocalDisk(r.Target) {
		return r.Target
	}
	return r.Target + " " + r.Layout
}

// plotSel picks the results of one panel: experiment, metric and unit,
// params that must match, the param on the x axis (divided by xDiv), and
// the series a result belongs to.
type plotSel struct {
	exp, metric, unit string
	match             map[string]string
	x                 string
	xDiv              float64
	name              func(Result, map[string]string) string
}

// collectSeries groups the selected results by series and x, in the order
// series first appear, and reduces each group's repetitions.
func collectSeries(results []Result, sel plotSel) []plotSeries {
	type key struct {
		series string
		x      float64
	}
	groups := map[key][]float64{}
	var order []string
	xs := map[string][]float64{}
	for _, r := range results {
		if r.Experiment != sel.exp || r.Metric != sel.metric || r.Unit != sel.unit {
			continue
		}
		p := parseParams(r.Params)
		if !matches(p, sel.match) {
			continue
		}
		xv, ok := p[sel.x]
		if !ok {
			continue
		}
		x := paramNumber(xv) / sel.xDiv
		name := sel.name(r, p)
		if _, seen := xs[name]; !seen {
			order = append(order, name)
		}
		k := key{name, x}
		if _, seen := groups[k]; !seen {
			xs[name] = append(xs[name], x)
		}
		groups[k] = append(groups[k], r.Value)
	}
	var out []plotSeries
	for _, name := range order {
		se := plotSeries{Name: name}
		slices.Sort(xs[name])
		for _, x := range xs[name] {
			v := groups[key{name, x}]
			se.Points = append(se.Points, plotPoint{X: x, Mean: repMean(v), Min: slices.Min(v), Max: slices.Max(v)})
		}
		out = append(out, se)
	}
	return out
}

func matches(p, want map[string]string) bool {
	for k, v := range want {
		if p[k] != v {
			return false
		}
	}
	return true
}

// repMean is the mean of a measurement's repetitions, trimmed of its min
// and max when there are 5 or more (seed 001's method).
func repMean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) >= 5 {
		s = s[1 : len(s)-1]
	}
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return sum / float64(len(s))
}

// parseParams splits "bs=4k pattern=read threads=4".
func parseParams(s string) map[string]string {
	p := map[string]string{}
	for _, f := range strings.Fields(s) {
		if k, v, ok := strings.Cut(f, "="); ok {
			p[k] = v
		}
	}
	return p
}

// paramNumber reads a parameter value as a number of units: plain
// numbers as they are; sizes ("4k", "1m", "16MiB") in bytes, binary.
func paramNumber(s string) float64 {
	l := strings.ToLower(s)
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}} {
		if strings.HasSuffix(l, u.suffix) {
			l, mult = strings.TrimSuffix(l, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(l, 64)
	if err != nil {
		return 0
	}
	return v * mult
}

func appendNew(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
