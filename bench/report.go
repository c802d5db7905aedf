package bench

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// ReportInput is everything report.md is made from; Report is a pure
// function of it, so it is tested on recorded results.
type ReportInput struct {
	Env         Env
	Experiments []Experiment // in run order (Run is not used)
	Results     []Result
	Failures    []Failure
	Notes       []Note
	Plots       []string // PNG files in the output directory
	PlotErr     error    // why plots are missing, if they are
	Interrupted bool     // the run was stopped before its end
}

// Report renders report.md: the environment header, then per experiment
// what the paper measured, a table (rows target × layout [× params],
// columns the metrics as "mean (min–max)"), ratio rows mortar / GlusterFS,
// mortar / local and mortar / FUSE passthrough, footnotes for n/a and failed cells, notes and plots.
func Report(in ReportInput) string {
	var b strings.Builder
	writeEnv(&b, in)
	used := map[string]bool{}
	for _, e := range in.Experiments {
		writeSection(&b, e, in, used)
	}
	var rest []string
	for _, p := range in.Plots {
		if !used[p] {
			rest = append(rest, p)
		}
	}
	if len(rest) > 0 {
		b.WriteString("## Other plots\n\n")
		for _, p := range rest {
			fmt.Fprintf(&b, "![%s](%s)\n\n", p, p)
		}
	}
	if in.PlotErr != nil {
		fmt.Fprintf(&b, "Plots could not all be drawn: %v\n", in.PlotErr)
	}
	return b.String()
}

func writeEnv(b *strings.Builder, in ReportInput) {
	e := in.Env
	b.WriteString("# mortar benchmark report\n\n")
	if in.Interrupted {
		b.WriteString("**The run was interrupted: the tables hold what was measured until then.**\n\n")
	}
	mode := "full"
	if e.Quick {
		mode = "quick (smaller sizes: a smoke run, not a measurement to quote)"
	}
	rows := [][2]string{
		{"date", e.Date.UTC().Format("2006-01-02 15:04 UTC")},
		{"CPU", fmt.Sprintf("%s, %d cores", e.CPU, e.Cores)},
		{"kernel", e.Kernel},
		{"disk (bricks, local and passthrough targets)", fmt.Sprintf("%s, under %s", e.LocalFS, e.Work)},
		{"mortar", e.Mortar},
		{"FUSE passthrough", e.Passthrough},
		{"GlusterFS", e.GlusterFS},
		{"run", fmt.Sprintf("%s, %d repetition(s), %s", mode, e.Reps, e.Duration.Round(1e9))},
		{"load average (1 5 15 min)", e.Load},
	}
	if e.Command != "" {
		rows = append(rows, [2]string{"command", "`" + e.Command + "`"})
	}
	b.WriteString("| | |\n|---|---|\n")
	for _, r := range rows {
		if r[1] != "" {
			fmt.Fprintf(b, "| %s | %s |\n", r[0], r[1])
		}
	}
	b.WriteString("\nEvery number below was measured in this run, on this machine; all targets' bricks are " +
		"directories under the same parent on the same disk. Cells are mean (min–max) over the repetitions; " +
		"with 5 or more repetitions the mean leaves out the lowest and the highest value (trimmed mean). " +
		"Ratios divide mortar's mean by the other target's: above 1 means mortar's figure is higher " +
		"(better for ops/s and MB/s, worse for seconds).\n\n")
}

func writeSection(b *strings.Builder, e Experiment, in ReportInput, usedPlots map[string]bool) {
	fmt.Fprintf(b, "## %s: %s\n\n", e.Name, e.Title)
	if e.Paper != "" {
		fmt.Fprintf(b, "What the paper measured: %s\n\n", e.Paper)
	}
	for _, f := range in.Failures {
		if f.Experiment == e.Name && (f.Target == "" || f.Target == "all") {
			fmt.Fprintf(b, "**Did not run**: %v\n\n", f.Err)
		}
	}
	t := buildTable(e.Name, in.Results, in.Failures)
	switch {
	case len(t.metrics) > 0:
		t.write(b)
	case len(t.footnotes) > 0:
		b.WriteString("No results:\n\n")
		for _, f := range t.footnotes {
			b.WriteString("- " + f + "\n")
		}
		b.WriteString("\n")
	default:
		b.WriteString("No results.\n\n")
	}
	var notes []string
	for _, n := range in.Notes {
		if n.Experiment != e.Name {
			continue
		}
		who := strings.TrimSpace(n.Target + " " + n.Layout)
		if who != "" {
			who += ": "
		}
		notes = append(notes, "- "+who+n.Text)
	}
	if len(notes) > 0 {
		b.WriteString("How it was measured:\n\n" + strings.Join(notes, "\n") + "\n\n")
	}
	for _, p := range in.Plots {
		if strings.HasPrefix(p, e.Name) {
			fmt.Fprintf(b, "![%s](%s)\n\n", p, p)
			usedPlots[p] = true
		}
	}
}

type rowKey struct{ target, layout, params string }

type agg struct {
	sum, min, max float64
	n             int
}

func (a *agg) add(v float64) {
	if a.n == 0 || v < a.min {
		a.min = v
	}
	if a.n == 0 || v > a.max {
		a.max = v
	}
	a.sum += v
	a.n++
}

// trimFrom is the repetition count from which the mean drops the lowest
// and the highest value (a trimmed mean, as seed 001's authors used).
const trimFrom = 5

func (a *agg) mean() float64 {
	if a.n >= trimFrom {
		return (a.sum - a.min - a.max) / float64(a.n-2)
	}
	return a.sum / float64(a.n)
}

// table is one experiment's results arranged for the report.
type table struct {
	rows      []rowKey
	metrics   []string
	units     map[string]string
	cells     map[rowKey]map[string]*agg
	marks     map[rowKey][]int // footnote numbers of a row's failures
	na        map[rowKey]bool  // every failure of the row is "unsupported"
	footnotes []string
	maxN      int
	hasParams bool
}

// targetRank orders rows: the baseline, FUSE passthrough, mortar,
// mortar-distribute, GlusterFS, then others.
func targetRank(t string) int {
	for i, name := range TargetNames {
		if t == name {
			return i
		}
	}
	return len(TargetNames)
}

// layoutRank orders a target's rows: replica, disperse, distribute (the
// papers' layouts first, the like-for-like one last, above the ratios).
func layoutRank(l string) int {
	for i, p := range []string{"replica", "disperse", "distribute"} {
		if strings.HasPrefix(l, p) {
			return i
		}
	}
	return 3
}

func buildTable(exp string, results []Result, failures []Failure) *table {
	t := &table{units: map[string]string{}, cells: map[rowKey]map[string]*agg{},
		marks: map[rowKey][]int{}, na: map[rowKey]bool{}}
	seen := map[rowKey]int{}
	rowFails := map[rowKey][]Failure{}
	addRow := func(k rowKey) {
		if _, ok := seen[k]; !ok {
			seen[k] = len(seen)
			t.rows = append(t.rows, k)
			t.cells[k] = map[string]*agg{}
			t.hasParams = t.hasParams || k.params != ""
		}
	}
	for _, r := range results {
		if r.Experiment != exp {
			continue
		}
		k := rowKey{r.Target, r.Layout, r.Params}
		addRow(k)
		if _, ok := t.units[r.Metric]; !ok {
			t.metrics = append(t.metrics, r.Metric)
			t.units[r.Metric] = r.Unit
		}
		a := t.cells[k][r.Metric]
		if a == nil {
			a = &agg{}
			t.cells[k][r.Metric] = a
		}
		a.add(r.Value)
		t.maxN = max(t.maxN, a.n)
	}
	for _, f := range failures {
		if f.Experiment != exp || f.Target == "" || f.Target == "all" {
			continue
		}
		k := rowKey{f.Target, f.Layout, f.Params}
		addRow(k)
		if _, ok := t.na[k]; !ok {
			t.na[k] = true
		}
		t.na[k] = t.na[k] && IsUnsupported(f.Err)
		rowFails[k] = append(rowFails[k], f)
	}
	t.sortRows(seen)
	for _, k := range t.rows { // footnotes numbered in row order
		for _, f := range rowFails[k] {
			t.footnotes = append(t.footnotes, footnote(f))
			t.marks[k] = append(t.marks[k], len(t.footnotes))
		}
	}
	return t
}

// footnote says why a row has no (or not all) values.
func footnote(f Failure) string {
	who := strings.TrimSpace(strings.Join([]string{f.Target, f.Layout, f.Params}, " "))
	msg := f.Err.Error()
	if IsUnsupported(f.Err) {
		if i := strings.Index(msg, ErrUnsupported.Error()+": "); i >= 0 {
			msg = msg[i+len(ErrUnsupported.Error())+2:]
		}
		return fmt.Sprintf("%s: n/a, %s", who, msg)
	}
	return fmt.Sprintf("%s: **failed**: %s", who, msg)
}

// sortRows orders rows by parameter group (first seen first), then target
// rank, then first appearance.
func (t *table) sortRows(seen map[rowKey]int) {
	group := map[string]int{}
	for _, k := range t.rows {
		if _, ok := group[k.params]; !ok {
			group[k.params] = len(group)
		}
	}
	sort.SliceStable(t.rows, func(i, j int) bool {
		a, b := t.rows[i], t.rows[j]
		if group[a.params] != group[b.params] {
			return group[a.params] < group[b.params]
		}
		if targetRank(a.target) != targetRank(b.target) {
			return targetRank(a.target) < targetRank(b.target)
		}
		if layoutRank(a.layout) != layoutRank(b.layout) {
			return layoutRank(a.layout) < layoutRank(b.layout)
		}
		return seen[a] < seen[b]
	})
}

func (t *table) write(b *strings.Builder) {
	head := []string{"target", "layout"}
	if t.hasParams {
		head = append(head, "params")
	}
	for _, m := range t.metrics {
		head = append(head, fmt.Sprintf("%s (%s)", m, t.units[m]))
	}
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for i := range head {
		if i < len(head)-len(t.metrics) {
			b.WriteString("---|")
		} else {
			b.WriteString("---:|")
		}
	}
	b.WriteString("\n")
	for i, k := range t.rows {
		b.WriteString(t.rowLine(k))
		if i == len(t.rows)-1 || t.rows[i+1].params != k.params {
			for _, line := range t.ratioLines(k.params) {
				b.WriteString(line)
			}
		}
	}
	b.WriteString("\n")
	for i, f := range t.footnotes {
		fmt.Fprintf(b, "[%d] %s  \n", i+1, f)
	}
	if len(t.footnotes) > 0 {
		b.WriteString("\n")
	}
	var tail []string
	if t.maxN > 1 {
		tail = append(tail, fmt.Sprintf("Cells: mean (min–max) of %d repetitions.", t.maxN))
	}
	for _, u := range t.units {
		if u == "s" {
			tail = append(tail, "For times (s), a ratio below 1 means mortar is faster.")
			break
		}
	}
	if len(tail) > 0 {
		b.WriteString(strings.Join(tail, " ") + "\n\n")
	}
}

func (t *table) rowLine(k rowKey) string {
	marks := ""
	for _, m := range t.marks[k] {
		marks += fmt.Sprintf(" [%d]", m)
	}
	layout := k.layout
	if layout == "" {
		layout = "—"
	}
	cols := []string{k.target, layout + marks}
	if t.hasParams {
		cols = append(cols, k.params)
	}
	for _, m := range t.metrics {
		cols = append(cols, t.cell(k, m))
	}
	return "| " + strings.Join(cols, " | ") + " |\n"
}

func (t *table) cell(k rowKey, metric string) string {
	a := t.cells[k][metric]
	switch {
	case a != nil && a.n > 1:
		return fmt.Sprintf("%s (%s–%s)", fmtNum(a.mean()), fmtNum(a.min), fmtNum(a.max))
	case a != nil:
		return fmtNum(a.mean())
	case len(t.marks[k]) == 0:
		return "—"
	case t.na[k]:
		return "n/a"
	}
	return "failed"
}

// ratioLines are the "mortar / GlusterFS", "mortar / local", "mortar /
// FUSE passthrough" and "mortar / mortar-distribute" rows of a parameter
// group: for every mortar row with values, against GlusterFS of the same
// layout (else GlusterFS distribute), against the local disk, against the
// local disk through FUSE passthrough (the FUSE ceiling), and (replicated
// and dispersed rows) against mortar's distribute volume on the same
// bricks.
func (t *table) ratioLines(params string) []string {
	var lines []string
	for _, m := range t.rows {
		if m.params != params || m.target != "mortar" || len(t.cells[m]) == 0 {
			continue
		}
		if g, ok := t.comparable(m, "glusterfs"); ok {
			lines = append(lines, t.ratioLine("mortar / GlusterFS", m, g))
		}
		if l, ok := t.comparable(m, "local"); ok {
			lines = append(lines, t.ratioLine("mortar / local", m, l))
		}
		if p, ok := t.comparable(m, FUSEPassthrough); ok {
			lines = append(lines, t.ratioLine("mortar / FUSE passthrough", m, p))
		}
		if d, ok := t.sameBricksRow(m); ok {
			lines = append(lines, t.ratioLine("mortar / "+MortarDistribute, m, d))
		}
	}
	return lines
}

// sameBricksRow finds the mortar-distribute row to compare the
// replicated or dispersed mortar row m with: the one on as many bricks,
// else the only one.
func (t *table) sameBricksRow(m rowKey) (rowKey, bool) {
	if strings.HasPrefix(m.layout, "distribute") {
		return rowKey{}, false
	}
	var found []rowKey
	for _, k := range t.rows {
		if k.params != m.params || k.target != MortarDistribute || len(t.cells[k]) == 0 {
			continue
		}
		if n := labelBricks(m.layout); n > 0 && k.layout == fmt.Sprintf("distribute x%d", n) {
			return k, true
		}
		found = append(found, k)
	}
	if len(found) == 1 {
		return found[0], true
	}
	return rowKey{}, false
}

// labelBricks is the number of bricks of a layout label (Layout.String):
// "disperse 4+2" 6, "replica 3" 3, "distribute x4" 4; 0 if it is none of
// those.
func labelBricks(label string) int {
	var a, b int
	if n, _ := fmt.Sscanf(label, "disperse %d+%d", &a, &b); n == 2 {
		return a + b
	}
	if n, _ := fmt.Sscanf(label, "replica %d", &a); n == 1 {
		return a
	}
	if n, _ := fmt.Sscanf(label, "distribute x%d", &a); n == 1 {
		return a
	}
	return 0
}

// comparable finds other's row to compare mortar row m with.
func (t *table) comparable(m rowKey, other string) (rowKey, bool) {
	var fallback *rowKey
	for i, k := range t.rows {
		if k.params != m.params || k.target != other || len(t.cells[k]) == 0 {
			continue
		}
		if k.layout == m.layout {
			return k, true
		}
		if fallback == nil && (onLocalDisk(other) || strings.HasPrefix(k.layout, "distribute")) {
			fallback = &t.rows[i]
		}
	}
	if fallback != nil {
		return *fallback, true
	}
	return rowKey{}, false
}

func (t *table) ratioLine(label string, m, o rowKey) string {
	cols := []string{"**" + label + "**", m.layout + " vs " + o.layout}
	if t.hasParams {
		cols = append(cols, m.params)
	}
	for _, metric := range t.metrics {
		a, b := t.cells[m][metric], t.cells[o][metric]
		if a == nil || b == nil || b.mean() == 0 {
			cols = append(cols, "—")
			continue
		}
		cols = append(cols, fmt.Sprintf("**%.2f×**", a.mean()/b.mean()))
	}
	return "| " + strings.Join(cols, " | ") + " |\n"
}

// fmtNum prints about three significant digits, whole numbers from 100.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a == 0:
		return "0"
	}
	return fmt.Sprintf("%.3g", v)
}
