package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rollingRounds is how many times TestReplicaRollingRestart restarts
// every brick: once in CI, 5 times with MORTAR_FAULT_FULL (scripts/fault).
func rollingRounds() int { return faultSize(1, 5) }

// A rolling restart of a replica 3 volume by the documented procedure —
// per brick: kill -9 it (and let 20 writes land), `volume start NAME
// force`, `volume heal NAME wait`, next — under a loop that creates small files and appends to older
// ones through a mount: no write fails, nothing is in split-brain, the
// bricks end identical, and each wait takes under 2 s.
func TestReplicaRollingRestart(t *testing.T) {
	n := startNode(t)
	bricks := n.replicaVolume("rr", 3, 3, false)
	mnt := n.mount("rr")

	var (
		stop            atomic.Bool
		wg              sync.WaitGroup
		mu              sync.Mutex
		failures        []string
		created, writes atomic.Int64
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			p := filepath.Join(mnt, fmt.Sprintf("f%05d", i))
			if err := os.WriteFile(p, []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
				fail("create %s: %v", p, err)
			} else {
				created.Add(1)
			}
			writes.Add(1)
			if i < 5 {
				continue
			}
			old := filepath.Join(mnt, fmt.Sprintf("f%05d", i-5+(i%3)))
			f, err := os.OpenFile(old, os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				_, err = fmt.Fprintf(f, "append %d\n", i)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fail("append to %s: %v", old, err)
			}
			writes.Add(1)
			time.Sleep(5 * time.Millisecond) // pacing the writer, not waiting for an event
		}
	})
	// The writer makes progress before the first kill.
	waitFor(t, "the writer's first 50 files", 30*time.Second, func() bool { return created.Load() >= 50 })

	var waits []time.Duration
	for round := range rollingRounds() {
		for _, b := range bricks {
			n.killBrick("rr", b)
			// Writes land while the brick is down: it has them to heal.
			from := writes.Load()
			waitFor(t, "20 writes with a brick down", 30*time.Second, func() bool { return writes.Load() >= from+20 })
			n.must("volume", "start", "rr", "force")
			start := time.Now()
			out, err := n.mortar("volume", "heal", "rr", "wait", "--timeout", "30s")
			d := time.Since(start)
			if err != nil {
				stop.Store(true)
				wg.Wait()
				sb, _ := n.mortar("volume", "heal", "rr", "info", "split-brain")
				t.Fatalf("round %d, brick %s: heal wait: %v\n%s\n%s\n%s", round, b, err, out, sb, n.log())
			}
			waits = append(waits, d)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d writes (%d files); heal waits: %v", writes.Load(), created.Load(), waits)
	if len(failures) > 0 {
		t.Fatalf("%d writes failed during the rolling restart:\n%s", len(failures), strings.Join(failures[:min(len(failures), 20)], "\n"))
	}
	for i, d := range waits {
		if d >= 2*time.Second {
			t.Errorf("heal wait %d took %s (want under 2 s); waits: %v", i, d, waits)
		}
	}
	if out := n.must("volume", "heal", "rr", "info", "split-brain"); strings.Contains(out, "\n/f") {
		t.Fatalf("split-brain after the rolling restart:\n%s", out)
	}
	// Writes are over: the bricks converge, and must be identical.
	n.waitHealed("rr", bricks, 3, false, 30*time.Second)
	if out := n.must("volume", "heal", "rr", "info"); !strings.Contains(out, "Safe to take a brick down: yes") {
		t.Fatalf("heal info after the rolling restart:\n%s", out)
	}
}
