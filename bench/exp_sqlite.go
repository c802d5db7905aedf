package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func sqliteTx() Experiment {
	return Experiment{
		Name:  "sqlite",
		Title: "fsync-heavy small transactions: SQLite in WAL mode, one row per commit",
		Paper: "no paper measured this; it is the workload behind the seeds' document stores and what " +
			"users of a distributed file system run on it anyway (a mail index, a CI cache, a small " +
			"application database): thousands of small commits, each a WAL append and an fsync.",
		Run: runSQLite,
	}
}

// sqliteCommits is how many single-row commits one run makes.
func sqliteCommits(quick bool) int {
	if quick {
		return 200
	}
	return 2000
}

func runSQLite(ctx context.Context, r *Runner) error {
	if err := ensureTool(ctx, "sqlite3", "sqlite3"); err != nil {
		return err
	}
	n := sqliteCommits(r.Quick)
	r.Note("", "", "one sqlite3 process: journal_mode=WAL, synchronous=FULL, a table of (id, 100 random bytes as hex); "+
		"%d INSERTs each in its own transaction (one WAL append and fsync per commit), then integrity_check; "+
		"commits per second of the whole run", n)
	layouts := r.layouts(Layout{Kind: "replicate", Bricks: 3, Replica: 3}, Layout{Kind: "disperse", Bricks: 6, Redundancy: 2})
	return eachLayout(ctx, r, layouts, SetupOptions{}, func(ctx context.Context, t Target, l Layout, m Mount) error {
		for rep := 1; rep <= r.Reps; rep++ {
			rate, err := sqliteRun(ctx, filepath.Join(m.Dir(), "db"+strconv.Itoa(rep)), n)
			if err != nil {
				return err
			}
			r.Record(Result{Target: t.Name(), Layout: labelFor(t.Name(), l), Metric: "commits",
				Value: rate, Unit: "ops/s", Repetition: rep})
			r.Progress("  %s %s #%d: %.0f commits/s", t.Name(), labelFor(t.Name(), l), rep, rate)
		}
		return nil
	})
}

// sqliteRun makes n single-row commits to a new WAL database in dir and
// returns commits per second; the database must then pass its integrity
// check with n rows.
func sqliteRun(ctx context.Context, dir string, n int) (float64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	var script strings.Builder
	script.WriteString("PRAGMA journal_mode=WAL;\nPRAGMA synchronous=FULL;\nCREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);\n")
	for range n {
		script.WriteString("INSERT INTO t(v) VALUES(hex(randomblob(100)));\n")
	}
	script.WriteString("PRAGMA integrity_check;\nSELECT count(*) FROM t;\n")
	cmd := exec.CommandContext(ctx, "sqlite3", filepath.Join(dir, "db.sqlite"))
	cmd.Stdin = strings.NewReader(script.String())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	secs := elapsedSince(start)
	if err != nil {
		return 0, fmt.Errorf("sqlite3: %v: %s", err, shorten(string(out), 300))
	}
	if got := strings.Fields(string(out)); len(got) != 3 || got[0] != "wal" || got[1] != "ok" || got[2] != strconv.Itoa(n) {
		return 0, fmt.Errorf("sqlite3 said %q; want wal, ok and %d rows", shorten(string(out), 300), n)
	}
	return float64(n) / secs, nil
}
