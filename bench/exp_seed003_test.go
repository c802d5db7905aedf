package bench

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func TestSeed003Matrix(t *testing.T) {
	q := seed003Matrix(true, false, 5)
	// --quick: the corners {4k,1M} × {1,4 threads} × {randread, write}.
	if q.points() != 2*2*2*3 || q.Runtime != 3*time.Second || q.Reps != 3 {
		t.Errorf("quick matrix %+v: %d points", q, q.points())
	}
	f := seed003Matrix(false, false, 5)
	if len(f.Layouts) != 3 || f.Layouts[2].String() != "disperse 4+2" || f.Layouts[1].String() != "replica 3" {
		t.Errorf("layouts %v", f.Layouts)
	}
	if len(f.Patterns) != 4 || f.BS[0] != "4k" || f.BS[len(f.BS)-1] != "1m" || f.Reps != 1 {
		t.Errorf("full matrix %+v", f)
	}
	// --fio-corners: the quick run's points at the full run's size and runtime.
	c := seed003Matrix(false, true, 5)
	if c.points() != 2*2*2 || c.Runtime != f.Runtime || c.TotalMiB != f.TotalMiB ||
		!slices.Equal(c.Patterns, q.Patterns) || !slices.Equal(c.BS, q.BS) || !slices.Equal(c.Threads, q.Threads) {
		t.Errorf("corners matrix %+v: %d points", c, c.points())
	}
	if qc := seed003Matrix(true, true, 5); qc.points() != q.points() || qc.Runtime != q.Runtime {
		t.Errorf("--quick --fio-corners %+v, want the quick matrix", qc)
	}
}

// TestRunFioAdapt runs two one-second fio points in a temporary directory
// (skipped without fio): the first settles the engine, the second uses it.
func TestRunFioAdapt(t *testing.T) {
	if _, err := exec.LookPath("fio"); err != nil {
		t.Skip("fio is not installed")
	}
	dir := t.TempDir()
	var engine fioEngine
	for _, pattern := range []string{"write", "randread"} {
		j := fioJob{Dir: dir, Pattern: pattern, BS: "64k", Jobs: 2, SizeMiB: 4, Runtime: time.Second, IODepth: 4}
		res, err := runFioAdapt(context.Background(), j, &engine)
		if err != nil {
			t.Fatal(err)
		}
		if res.BandwidthMBps <= 0 || res.IOPS <= 0 || res.LatMeanMs <= 0 {
			t.Errorf("%s: %+v", pattern, res)
		}
	}
	if !engine.set || engine.name == "" {
		t.Errorf("engine not settled: %+v", engine)
	}
	t.Log(engine)
}
