package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func seed000() Experiment {
	return Experiment{
		Name:  "seed000",
		Title: "200 files of 1 MB written and read, encryption off and on (paper 000)",
		Paper: "200 identical ~1 MB files (195 MB) written then read as a batch, elapsed seconds, " +
			"with encryption off and on; a 3-node GlusterFS against an HTTP object store.",
		Run: runSeed000,
	}
}

func runSeed000(ctx context.Context, r *Runner) error {
	n := 200
	if r.Quick {
		n = 50
	}
	const size = 1 << 20
	content := make([]byte, size)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	for i := range content {
		content[i] = byte(rng.Uint32())
	}
	r.Note("", "", "%d files of %d bytes (one random content, made once per run; every file the same, as in the paper), "+
		"written from Go (create, write, close) followed by one sync(2), then read back after dropping caches; "+
		"seconds for the whole batch", n, size)
	r.Note("", "", "encryption=on: mortar's client-side crypt layer (AES-256-GCM in 64 KiB blocks, a key per file "+
		"wrapped by the volume key, given to the mount with -o key-file); local and GlusterFS have none, the rows say why")
	layout := r.layouts(Layout{Kind: "distribute", Bricks: 3})[0]
	for _, p := range []struct {
		params string
		opts   SetupOptions
	}{{"encryption=off", SetupOptions{}}, {"encryption=on", SetupOptions{Encryption: true}}} {
		err := r.EachParams(ctx, layout, p.params, p.opts, func(ctx context.Context, t Target, m Mount) error {
			for rep := 1; rep <= r.Reps; rep++ {
				w, rd, err := batchWriteRead(ctx, filepath.Join(m.Dir(), "batch"+strconv.Itoa(rep)), n, content)
				if err != nil {
					return err
				}
				for _, v := range []struct {
					metric string
					s      float64
				}{{"write", w}, {"read", rd}} {
					r.Record(Result{Target: t.Name(), Layout: labelFor(t.Name(), layout), Params: p.params,
						Metric: v.metric, Value: v.s, Unit: "s", Repetition: rep})
					r.Progress("  %s %s #%d: %s %.2f s", t.Name(), p.params, rep, v.metric, v.s)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	noteEncryptionCost(r, "mortar")
	return nil
}

// noteEncryptionCost notes how much longer target took with encryption
// on than off (medians of the repetitions), if it ran both.
func noteEncryptionCost(r *Runner, target string) {
	results, _ := r.Results()
	times := map[string][]float64{}
	for _, res := range results {
		if res.Experiment == r.exp && res.Target == target {
			times[res.Params+" "+res.Metric] = append(times[res.Params+" "+res.Metric], res.Value)
		}
	}
	var parts []string
	for _, metric := range []string{"write", "read"} {
		off, on := times["encryption=off "+metric], times["encryption=on "+metric]
		if len(off) == 0 || len(on) == 0 || medianOf(off) <= 0 {
			return
		}
		parts = append(parts, fmt.Sprintf("%s %.2fx (%+.0f%%)", metric, medianOf(on)/medianOf(off), 100*(medianOf(on)/medianOf(off)-1)))
	}
	r.Note(target, "", "encryption on/off, medians of the batch times: %s", strings.Join(parts, ", "))
}

// medianOf returns the median of v (not empty).
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// batchWriteRead writes n files of content into dir, syncs, drops caches
// and reads them back; it returns both batch times in seconds.
func batchWriteRead(ctx context.Context, dir string, n int, content []byte) (write, read float64, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("file%04d", i)) }
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		if err := os.WriteFile(name(i), content, 0o644); err != nil {
			return 0, 0, fmt.Errorf("write: %w", err)
		}
	}
	syscall.Sync()
	write = elapsedSince(start)
	if err := DropCaches(ctx); err != nil {
		return 0, 0, err
	}
	buf := make([]byte, 1<<20)
	start = time.Now()
	for i := 0; i < n; i++ {
		f, err := os.Open(name(i))
		if err != nil {
			return 0, 0, fmt.Errorf("read: %w", err)
		}
		got, err := io.CopyBuffer(io.Discard, f, buf)
		f.Close()
		if err != nil || got != int64(len(content)) {
			return 0, 0, fmt.Errorf("read %s: %d of %d bytes: %v", name(i), got, len(content), err)
		}
	}
	read = elapsedSince(start)
	return write, read, nil
}
