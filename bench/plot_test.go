package bench

import (
	"bytes"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// loadResults reads testdata/plot_results.csv: the results.csv of a real
// run, `mortar bench --quick seed001 seed003 seed004`, on all three targets.
func loadResults(t *testing.T) []Result {
	t.Helper()
	f, err := os.Open("testdata/plot_results.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []Result
	for _, row := range rows[1:] {
		v, err := strconv.ParseFloat(row[5], 64)
		if err != nil {
			t.Fatal(err)
		}
		rep, _ := strconv.Atoi(row[7])
		out = append(out, Result{Experiment: row[0], Target: row[1], Layout: row[2], Params: row[3],
			Metric: row[4], Value: v, Unit: row[6], Repetition: rep})
	}
	return out
}

func TestRepMean(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{1, 2, 6}, 3},                // under 5: plain mean
		{[]float64{100, 2, 3, 4, 0}, 3},        // 5: min and max dropped
		{[]float64{5, 1, 9, 5, 5, 5, 50}, 5.8}, // 1 and 50 dropped
	} {
		if got := repMean(c.in); !near(got, c.want) {
			t.Errorf("repMean(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestParamNumber(t *testing.T) {
	for s, want := range map[string]float64{"4k": 4096, "1m": 1 << 20, "16MiB": 16 << 20, "4": 4, "x": 0, "256KiB": 256 << 10} {
		if got := paramNumber(s); got != want {
			t.Errorf("paramNumber(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestPlotSpecsRecorded(t *testing.T) {
	specs := plotSpecs(loadResults(t))
	byName := map[string]plotSpec{}
	for _, s := range specs {
		byName[s.Name] = s
	}
	s1, ok := byName["seed001"]
	if !ok || len(s1.Panels) != 4 || s1.Panels[0].Title != "write" || s1.Panels[0].RefY != 12.5 {
		t.Fatalf("seed001 plot: %+v", s1)
	}
	if names := seriesNames(s1.Panels[0]); names != "local,mortar,glusterfs" {
		t.Errorf("seed001 series %s", names)
	}
	local := s1.Panels[0].Series[0]
	if local.Name != "local" || len(local.Points) != 3 || local.Points[0].X != 2 || local.Points[2].X != 64 {
		t.Errorf("seed001 local series: %+v", local)
	}
	for _, pt := range local.Points {
		if !(pt.Min <= pt.Mean && pt.Mean <= pt.Max) {
			t.Errorf("point %+v: mean outside min..max", pt)
		}
	}
	bs := byName["seed003_bs"]
	if len(bs.Panels) != 4 || bs.Panels[0].Title != "write, threads=1" {
		t.Errorf("seed003_bs panels: %+v", bs.Panels)
	}
	if names := seriesNames(bs.Panels[0]); names != "local,mortar distribute x4,glusterfs distribute x4,glusterfs replica 3,glusterfs disperse 4+2" {
		t.Errorf("seed003 series %s", names)
	}
	if p := bs.Panels[0].Series[0].Points; len(p) != 2 || p[0].X != 4 || p[1].X != 1024 {
		t.Errorf("seed003 block sizes in KiB: %+v", p)
	}
	if th := byName["seed003_threads"]; len(th.Panels) != 4 || th.Panels[0].Series[0].Points[1].X != 4 {
		t.Errorf("seed003_threads: %+v", th.Panels)
	}
	s4 := byName["seed004"]
	if len(s4.Panels) != 4 || s4.Panels[3].Title != "read vs clients" || s4.Panels[0].RefSlope != 25 {
		t.Fatalf("seed004: %+v", s4.Panels)
	}
	// mortar has one server only (n/a beyond): one point; GlusterFS three.
	if names := seriesNames(s4.Panels[0]); names != "mortar,glusterfs" ||
		len(s4.Panels[0].Series[0].Points) != 1 || len(s4.Panels[0].Series[1].Points) != 3 {
		t.Errorf("seed004 servers: %+v", s4.Panels[0].Series)
	}
}

func seriesNames(p plotPanel) string {
	var n []string
	for _, s := range p.Series {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

func TestSeriesStyle(t *testing.T) {
	if a, b := seriesStyle("mortar"), seriesStyle("mortar distribute x4"); a != b {
		t.Errorf("mortar looks different in two plots: %q %q", a, b)
	}
	if seriesStyle("glusterfs replica 3") == seriesStyle("glusterfs disperse 4+2") {
		t.Error("two GlusterFS layouts look the same")
	}
	if seriesStyle("local") == seriesStyle("mortar") {
		t.Error("local and mortar look the same")
	}
	for _, other := range []string{"local", "mortar", "glusterfs"} {
		if seriesStyle(FUSEPassthrough) == seriesStyle(other) {
			t.Errorf("%s and %s look the same", FUSEPassthrough, other)
		}
	}
	if seriesStyle("mortar distribute x6") == seriesStyle(MortarDistribute+" distribute x6") {
		t.Error("mortar and mortar-distribute look the same")
	}
}

func TestPlotScriptAndData(t *testing.T) {
	s := plotSpec{Name: "x", Title: "it's a test", Cols: 2, Panels: []plotPanel{
		{Title: "a", XLabel: "size", YLabel: "MB/s", LogX: true, RefY: 12.5, RefLabel: "link", Series: []plotSeries{
			{Name: "mortar", Points: []plotPoint{{2, 10, 9, 11}, {4, 11, 10, 12}}},
			{Name: "glusterfs", Points: []plotPoint{{2, 5, 5, 5}}},
		}},
		{Title: "b", XStep: 1, RefSlope: 25, RefLabel: "n links", Series: []plotSeries{{Name: "local", Points: []plotPoint{{1, 1, 1, 1}}}}},
	}}
	data := string(plotData(s))
	if blocks := strings.Count(data, "# panel"); blocks != 3 {
		t.Errorf("%d data blocks, want 3:\n%s", blocks, data)
	}
	if !strings.Contains(data, "4 11 10 12\n") {
		t.Errorf("data:\n%s", data)
	}
	script := plotScript(s)
	for _, want := range []string{"set output '../x.png'", "'it''s a test'", "set multiplot layout 1,2",
		"index 0 using 1:2:3:4", "index 1 using", "index 2 using", "12.5 with lines", "25*x with lines",
		"set logscale x 2", "set xtics 1", "unset multiplot"} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
}

// TestWritePlots draws the recorded results with gnuplot (skipped without
// it) and checks the files are PNGs.
func TestWritePlots(t *testing.T) {
	if _, err := exec.LookPath("gnuplot"); err != nil {
		t.Skip("gnuplot is not installed")
	}
	dir := t.TempDir()
	names, err := writePlots(dir, loadResults(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 4 {
		t.Errorf("plots %v", names)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%v)", n, err)
		}
	}
	if names, err := writePlots(dir, nil); names != nil || err != nil {
		t.Errorf("no results: %v %v", names, err)
	}
}
