package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Seed 004 measured GlusterFS with iozone's throughput mode: aggregate
// throughput vs the number of servers (read grows linearly, write grows
// little) and vs the number of clients (stable when several clients write
// large files at once).
//
// Servers: 1..4 server namespaces (internal/netlab), each behind its own
// link shaped to 200 Mbit/s, one brick each (mortar: one `mortar server`
// per namespace, probed into one cluster), one client mount in the client
// namespace; "read / links" is the aggregate over n × 25 MB/s;
// 16 files written in parallel (fsync each), caches dropped, read back in
// parallel. Clients: one volume on loopback, 1..4 mounts of it (local: N
// writers on one directory), each writing then reading one large file at
// the same time. Aggregate MB/s = all bytes / wall time of the phase.
func seed004() Experiment {
	return Experiment{
		Name:  "seed004",
		Title: "aggregate throughput vs number of servers and vs number of clients",
		Paper: "iozone throughput vs servers, clients, file size, block size on GlusterFS 3.2.5: " +
			"read grows linearly with servers, write grows little; several clients writing large files keep a stable rate",
		Run: runSeed004,
	}
}

// clientMounter is implemented by a Mount that can mount its volume once
// more, as another client, at dir (seed 004's clients dimension). Closing
// the returned Mount unmounts that client only.
type clientMounter interface {
	MountClient(ctx context.Context, dir string) (Mount, error)
}

// seed004RateMbit is the rate of each server's link.
const seed004RateMbit = 200

// seed004Plan sizes both dimensions.
type seed004Plan struct {
	Servers      []int
	RateMbit     int
	Files        int // files written in parallel in the servers dimension
	FileMiB      int
	Clients      []int
	ClientMiB    int // file of each client in the clients dimension
	Reps         int
	LinkProbeMiB int64
}

func seed004Plans(quick bool, reps int) seed004Plan {
	p := seed004Plan{Servers: []int{1, 2, 3, 4}, RateMbit: seed004RateMbit, Files: 16, FileMiB: 32,
		Clients: []int{1, 2, 3, 4}, ClientMiB: 256, Reps: min(max(reps, 1), 3), LinkProbeMiB: 32}
	if quick {
		p.Servers, p.Clients = []int{1, 2, 4}, []int{1, 2, 4}
		p.FileMiB, p.ClientMiB, p.LinkProbeMiB = 8, 64, 16
	}
	return p
}

func runSeed004(ctx context.Context, r *Runner) error {
	p := seed004Plans(r.Quick, r.Reps)
	r.Note("", "", "servers: %d files × %d MiB written in parallel (fsync each), then read in parallel after dropping caches, one client mount, each server behind its own %d Mbit/s link; %d repetition(s)",
		p.Files, p.FileMiB, p.RateMbit, p.Reps)
	r.Note("", "", "clients: loopback, each client (a mount of the same volume; local: a writer on one directory) writes then reads one %d MiB file, all at once; %d repetition(s)",
		p.ClientMiB, p.Reps)
	r.Note("", "", "the paper's curves vs file size and vs block size are seed001's and seed003's tables")
	if err := seed004Servers(ctx, r, p); err != nil {
		return err
	}
	return seed004Clients(ctx, r, p)
}

// seed004Servers runs the servers dimension: a new topology and volume
// per server count. The local disk (also through FUSE passthrough) has no
// servers and is reported so.
func seed004Servers(ctx context.Context, r *Runner, p seed004Plan) error {
	all := r.Targets
	defer func() { r.Targets = all }()
	var remote []Target
	for _, t := range all {
		if onLocalDisk(t.Name()) {
			r.Fail(t.Name(), Layout{Kind: "distribute", Bricks: 1}, Unsupported("the local disk has no servers to add"))
			continue
		}
		remote = append(remote, t)
	}
	r.Targets = remote
	for _, n := range p.Servers {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := seed004ServerPoint(ctx, r, p, n); err != nil {
			return err
		}
	}
	return nil
}

func seed004ServerPoint(ctx context.Context, r *Runner, p seed004Plan, n int) error {
	layout := Layout{Kind: "distribute", Bricks: n}
	params := fmt.Sprintf("servers=%d", n)
	topo, err := newNetTopo(ctx, n, p.RateMbit)
	if err != nil {
		for _, t := range r.Targets {
			r.FailParams(t.Name(), layout, params, fmt.Errorf("making %d shaped links: %w", n, err))
		}
		return nil
	}
	defer topo.Close()
	if n == p.Servers[0] {
		measureLink(ctx, r, topo, 0, p.LinkProbeMiB<<20, "")
	}
	opts := SetupOptions{NoClientCache: true, Net: topo.Setup()}
	return r.EachParams(ctx, layout, params, opts, func(ctx context.Context, t Target, m Mount) error {
		label := labelFor(t.Name(), layout)
		for rep := 1; rep <= p.Reps; rep++ {
			var perBrick []int
			st, err := parallelWriteRead(ctx, []string{m.Dir()}, p.Files, int64(p.FileMiB)<<20, func(paths []string) {
				perBrick = filesPerBrick(filepath.Dir(m.Dir()), n, paths)
			})
			if err != nil {
				return fmt.Errorf("%d servers, repetition %d: %w", n, rep, err)
			}
			recordRates(r, t.Name(), label, params, rep, st.Write, st.Read)
			recordLinkShare(r, t.Name(), label, params, rep, n, topo.LinkMBps(), st.Write, st.Read)
			r.Record(Result{Target: t.Name(), Layout: label, Params: params, Metric: "read CPU busy",
				Value: st.ReadCPU, Unit: "%", Repetition: rep})
			if bound := placementBound(perBrick, topo.LinkMBps()); bound > 0 {
				r.Record(Result{Target: t.Name(), Layout: label, Params: params, Metric: "placement bound",
					Value: bound, Unit: "MB/s", Repetition: rep})
				r.Progress("    files per brick %v: the busiest link bounds the aggregate at %.1f MB/s; CPUs busy: write %.0f%%, read %.0f%%",
					perBrick, bound, st.WriteCPU, st.ReadCPU)
			}
		}
		return nil
	})
}

// filesPerBrick counts where the paths (files in the mount) landed: the
// targets make their bricks b1 ... bN in the work directory, each brick on
// server (i-1) mod N. It returns nil if a file is on no brick (another
// target layout).
func filesPerBrick(work string, n int, paths []string) []int {
	per := make([]int, n)
	for _, p := range paths {
		found := false
		for i := 0; i < n; i++ {
			if _, err := os.Stat(filepath.Join(work, "b"+strconv.Itoa(i+1), filepath.Base(p))); err == nil {
				per[i]++
				found = true
				break
			}
		}
		if !found {
			return nil
		}
	}
	return per
}

// placementBound is the highest aggregate rate the links allow for files
// of equal size placed perBrick (one brick per server, link MB/s each):
// the phase lasts as long as the busiest link needs, so the aggregate is
// at most link × files / (files on the busiest brick). 0 if unknown.
func placementBound(perBrick []int, link float64) float64 {
	files, busiest := 0, 0
	for _, c := range perBrick {
		files += c
		busiest = max(busiest, c)
	}
	if busiest == 0 || link <= 0 {
		return 0
	}
	return link * float64(files) / float64(busiest)
}

// recordLinkShare records write and read as a share of what the n server
// links carry together (n × link MB/s), in %: 100 is linear scaling at
// the links' rate.
func recordLinkShare(r *Runner, target, layout, params string, rep, n int, link, write, read float64) {
	for _, m := range []struct {
		op string
		v  float64
	}{{"write", write}, {"read", read}} {
		r.Record(Result{Target: target, Layout: layout, Params: params, Metric: m.op + " / links",
			Value: linkShare(m.v, n, link), Unit: "%", Repetition: rep})
	}
}

// linkShare is rate as a percentage of n links of link MB/s each.
func linkShare(rate float64, n int, link float64) float64 {
	if n <= 0 || link <= 0 {
		return 0
	}
	return 100 * rate / (float64(n) * link)
}

// seed004Clients runs the clients dimension: one volume per target, and
// for each count the extra client mounts it needs.
func seed004Clients(ctx context.Context, r *Runner, p seed004Plan) error {
	layout := Layout{Kind: "distribute", Bricks: 2}
	return r.Each(ctx, layout, SetupOptions{NoClientCache: true}, func(ctx context.Context, t Target, m Mount) error {
		for _, n := range p.Clients {
			dirs, closeAll, err := clientDirs(ctx, t.Name(), m, n)
			if err != nil {
				if IsUnsupported(err) {
					r.FailParams(t.Name(), layout, fmt.Sprintf("clients=%d", n), err)
					continue
				}
				return err
			}
			err = seed004ClientPoint(ctx, r, p, t.Name(), labelFor(t.Name(), layout), dirs)
			if cerr := closeAll(); cerr != nil && err == nil {
				err = fmt.Errorf("unmounting extra clients: %w", cerr)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func seed004ClientPoint(ctx context.Context, r *Runner, p seed004Plan, target, layout string, dirs []string) error {
	params := fmt.Sprintf("clients=%d", len(dirs))
	for rep := 1; rep <= p.Reps; rep++ {
		st, err := parallelWriteRead(ctx, dirs, 1, int64(p.ClientMiB)<<20, nil)
		if err != nil {
			return fmt.Errorf("%d clients, repetition %d: %w", len(dirs), rep, err)
		}
		recordRates(r, target, layout, params, rep, st.Write, st.Read)
	}
	return nil
}

// clientDirs returns n directories that are n clients of m's volume: m's
// own, then n-1 more mounts (a subdirectory each, so every client writes
// its own files). The local disk has no clients: its n "clients" are n
// writers on the same directory.
func clientDirs(ctx context.Context, target string, m Mount, n int) ([]string, func() error, error) {
	var extra []Mount
	closeAll := func() error {
		var errs []error
		for _, e := range extra {
			errs = append(errs, e.Close())
		}
		return errors.Join(errs...)
	}
	dirs := []string{filepath.Join(m.Dir(), "client1")}
	for i := 2; i <= n; i++ {
		if target == "local" {
			dirs = append(dirs, filepath.Join(m.Dir(), fmt.Sprintf("client%d", i)))
			continue
		}
		cm, ok := m.(clientMounter)
		if !ok {
			return nil, closeAll, Unsupported("the %s target cannot mount its volume a second time (no MountClient)", target)
		}
		mp := filepath.Join(filepath.Dir(m.Dir()), fmt.Sprintf("client%d", i))
		if err := os.MkdirAll(mp, 0o755); err != nil {
			return nil, closeAll, err
		}
		e, err := cm.MountClient(ctx, mp)
		if err != nil {
			closeAll()
			return nil, func() error { return nil }, fmt.Errorf("mounting client %d: %w", i, err)
		}
		extra = append(extra, e)
		dirs = append(dirs, filepath.Join(e.Dir(), fmt.Sprintf("client%d", i)))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			closeAll()
			return nil, func() error { return nil }, err
		}
	}
	return dirs, closeAll, nil
}

func recordRates(r *Runner, target, layout, params string, rep int, write, read float64) {
	r.Record(Result{Target: target, Layout: layout, Params: params, Metric: "write", Value: write, Unit: "MB/s", Repetition: rep})
	r.Record(Result{Target: target, Layout: layout, Params: params, Metric: "read", Value: read, Unit: "MB/s", Repetition: rep})
	r.Progress("  %s %s rep %d: write %.1f MB/s, read %.1f MB/s (aggregate)", target, params, rep, write, read)
}

// ioPhases is what parallelWriteRead measured: the aggregate MB/s of
// each phase and how busy the machine's CPUs were meanwhile (% of all
// of them, from /proc/stat; other processes on the machine count too).
type ioPhases struct {
	Write, Read       float64
	WriteCPU, ReadCPU float64
}

// parallelWriteRead writes files files of size bytes in every dir at the
// same time, calls afterWrite (if not nil) with the paths written, drops
// the caches, reads them all back at the same time and removes them.
func parallelWriteRead(ctx context.Context, dirs []string, files int, size int64, afterWrite func([]string)) (ioPhases, error) {
	var paths []string
	for _, d := range dirs {
		for i := 0; i < files; i++ {
			paths = append(paths, filepath.Join(d, fmt.Sprintf("seed004-%d.dat", i)))
		}
	}
	defer func() {
		for _, p := range paths {
			os.Remove(p)
		}
	}()
	var st ioPhases
	total := float64(size) * float64(len(paths)) / 1e6
	cpu := cpuMeter()
	d, err := timedIO(ctx, size*int64(len(paths)), func(ctx context.Context) error {
		return allAtOnce(ctx, paths, func(ctx context.Context, p string) error { return writeSeq(ctx, p, size, true) })
	})
	if err != nil {
		return st, fmt.Errorf("write: %w", err)
	}
	st.Write, st.WriteCPU = total/d.Seconds(), cpu()
	if afterWrite != nil {
		afterWrite(paths)
	}
	if err := DropCaches(ctx); err != nil {
		return st, err
	}
	cpu = cpuMeter()
	d, err = timedIO(ctx, size*int64(len(paths)), func(ctx context.Context) error {
		return allAtOnce(ctx, paths, func(ctx context.Context, p string) error { return readSeq(ctx, p, size) })
	})
	if err != nil {
		return st, fmt.Errorf("read: %w", err)
	}
	st.Read, st.ReadCPU = total/d.Seconds(), cpu()
	return st, nil
}

// cpuMeter starts measuring how busy the CPUs are; the function it
// returns gives the busy share since, in % (-1 if /proc/stat is
// unreadable). /proc/stat counts in clock ticks: a phase shorter than one
// tick is measured up to the next tick rather than reported as nothing.
func cpuMeter() func() float64 {
	idle0, total0 := cpuTimes()
	return func() float64 {
		idle1, total1 := cpuTimes()
		for deadline := time.Now().Add(time.Second); total1 <= total0 && total1 > 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond) // the next tick, at most 10 ms away
			idle1, total1 = cpuTimes()
		}
		if total1 <= total0 {
			return -1
		}
		return 100 * (1 - (idle1-idle0)/(total1-total0))
	}
}

// cpuTimes returns the idle (idle + iowait) and total jiffies of all
// CPUs from the first line of /proc/stat.
func cpuTimes() (idle, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, x := range f[1:] {
		v, _ := strconv.ParseFloat(x, 64)
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return idle, total
}

// allAtOnce runs fn on every path in its own goroutine (the kernel sees
// one thread per stream) and returns the first error. A failing stream
// cancels the others.
func allAtOnce(ctx context.Context, paths []string, fn func(context.Context, string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(paths))
	start := make(chan struct{})
	for i, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if errs[i] = fn(ctx, p); errs[i] != nil {
				cancel()
			}
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err // the cause, not the others' cancellation
		}
	}
	return errors.Join(errs...)
}
