package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// Seed 001 measured iozone's write, rewrite, read and reread on files of
// 2^1..2^8 MB between a client and two server VMs behind a 100 Mbit/s
// switch, with GlusterFS's client cache removed, 25 runs, trimmed mean.
//
// Here the client and the server are network namespaces joined by a veth
// pair shaped to 100 Mbit/s with tbf on both ends; the volume is a
// distribute volume of two bricks on the one server namespace (the paper's
// two servers sat behind the same 100 Mbit/s link, which is what bounds
// them). The four operations are done in Go, mirroring iozone:
//
//   - write: a new file, sequential 1 MiB records, fsync, close;
//   - rewrite: the same file again, without truncating it, fsync, close;
//   - read: caches dropped (echo 3 > drop_caches) first, sequential 1 MiB
//     records;
//   - reread: read again at once, caches not dropped.
//
// Timed from open to close, fsync included (like iozone -e): buffered
// writes with a final fsync are what every target supports the same way,
// where O_DIRECT is honoured differently by each FUSE file system. MB/s
// are 10^6 bytes per second, as the link's 12.5 MB/s; file sizes are MiB.
func seed001() Experiment {
	return Experiment{
		Name:  "seed001",
		Title: "write / rewrite / read / reread vs file size behind a 100 Mbit/s link, client caches off",
		Paper: "iozone write/rewrite/read/reread, files 2^1..2^8 MB, client and 2 servers behind a 100 Mbit/s switch, " +
			"client cache off, 25 runs, trimmed mean: PVFS2 flat at ~10.7 MB/s (85 % of the link); " +
			"GlusterFS 253 MB/s at 1 MB (cache) collapsing to 5.6 MB/s (45 %) at 256 MB",
		Run: runSeed001,
	}
}

const (
	seed001RateMbit = 100
	recordSize      = 1 << 20 // iozone's record: 1 MiB
)

var seed001Ops = []string{"write", "rewrite", "read", "reread"}

// seed001Sizes are the file sizes in MiB.
func seed001Sizes(quick bool) []int {
	if quick {
		return []int{2, 16, 64}
	}
	return []int{2, 4, 8, 16, 32, 64, 128, 256}
}

func runSeed001(ctx context.Context, r *Runner) error {
	layout := Layout{Kind: "distribute", Bricks: 2}
	topo, err := newNetTopo(ctx, 1, seed001RateMbit)
	if err != nil {
		for _, t := range r.Targets {
			r.Fail(t.Name(), layout, fmt.Errorf("making the 100 Mbit/s link: %w", err))
		}
		return nil
	}
	defer topo.Close()
	r.Note("", "", "client namespace %s, server namespace %s (%s), veth pair shaped with tbf rate %dmbit on both ends",
		topo.Client, topo.Servers[0], topo.ServerAddrs[0], seed001RateMbit)
	measureLink(ctx, r, topo, 0, 16<<20, "before the targets")
	defer measureLink(ctx, r, topo, 0, 16<<20, "after the targets")
	opts := SetupOptions{NoClientCache: true, Net: topo.Setup()}
	sizes := seed001Sizes(r.Quick)
	r.Note("", "", "write/rewrite: buffered 1 MiB records (not O_DIRECT, which each FUSE file system honours differently), fsync before close, timed open to close; "+
		"read after dropping the page cache, reread right after it; %d repetition(s); the plot shows trimmed means (min and max dropped from 5 repetitions on)",
		max(r.Reps, 1))
	return r.Each(ctx, layout, opts, func(ctx context.Context, t Target, m Mount) error {
		link := topo.LinkMBps()
		switch t.Name() {
		case "local":
			r.Note(t.Name(), labelFor(t.Name(), layout), "no network: the local disk is the baseline, not limited by the link")
			link = 0
		case FUSEPassthrough:
			r.Note(t.Name(), labelFor(t.Name(), layout), "no network: the local disk through FUSE (the ceiling of FUSE), not limited by the link")
			link = 0
		}
		return iozoneRun(ctx, r, t.Name(), labelFor(t.Name(), layout), m.Dir(), sizes, link)
	})
}

// measureLink notes the raw TCP rate through link i both ways, the
// iperf-like check that the shaping holds; when says when it was taken.
func measureLink(ctx context.Context, r *Runner, topo *netTopo, i int, n int64, when string) {
	if when != "" {
		when = " " + when
	}
	up, down, err := topo.linkThroughput(ctx, i, n)
	if err != nil {
		r.Note("", "", "link measurement%s failed: %v", when, err)
		return
	}
	r.Note("", "", "link measured%s (raw TCP in Go, %d MiB each way): %.1f MB/s client→server, %.1f MB/s server→client; configured %d Mbit/s = %.1f MB/s",
		when, n>>20, up, down, topo.RateMbit, topo.LinkMBps())
}

// iozoneRun does the four operations on every size, Reps times, and
// records MB/s, and the share of the link when link > 0.
func iozoneRun(ctx context.Context, r *Runner, target, layout, dir string, sizes []int, link float64) error {
	over := map[string]float64{} // op → highest rate above the link
	defer noteAboveLink(r, target, layout, link, over)
	for rep := 1; rep <= max(r.Reps, 1); rep++ {
		for _, mib := range sizes {
			path := filepath.Join(dir, fmt.Sprintf("seed001-%dMiB.dat", mib))
			rates, err := iozoneFile(ctx, path, int64(mib)<<20)
			os.Remove(path)
			if err != nil {
				return fmt.Errorf("%d MiB, repetition %d: %w", mib, rep, err)
			}
			params := fmt.Sprintf("size=%dMiB", mib)
			for i, op := range seed001Ops {
				r.Record(Result{Target: target, Layout: layout, Params: params, Metric: op,
					Value: rates[i], Unit: "MB/s", Repetition: rep})
			}
			for i, op := range seed001Ops {
				if link > 0 && rates[i] > 1.5*link {
					over[op] = max(over[op], rates[i])
				}
				if link > 0 {
					r.Record(Result{Target: target, Layout: layout, Params: params, Metric: op + " / link",
						Value: 100 * rates[i] / link, Unit: "%", Repetition: rep})
				}
			}
			r.Progress("  %s %d MiB rep %d: write %.1f rewrite %.1f read %.1f reread %.1f MB/s",
				target, mib, rep, rates[0], rates[1], rates[2], rates[3])
		}
	}
	return nil
}

// noteAboveLink says which operations went faster than the link can
// carry: those bytes did not cross it (a client-side cache served them).
func noteAboveLink(r *Runner, target, layout string, link float64, over map[string]float64) {
	for _, op := range seed001Ops {
		if v, ok := over[op]; ok {
			r.Note(target, layout, "%s reached %.0f MB/s, %.0f× the %.1f MB/s link: served by a client-side cache "+
				"(the kernel page cache kept by the FUSE mount, or the client process), not through the link", op, v, v/link, link)
		}
	}
}

// iozoneFile does write, rewrite, read, reread on one file of size bytes
// and returns their MB/s in that order.
func iozoneFile(ctx context.Context, path string, size int64) ([4]float64, error) {
	var rates [4]float64
	steps := []func(context.Context) error{
		func(ctx context.Context) error { return writeSeq(ctx, path, size, true) },
		func(ctx context.Context) error { return writeSeq(ctx, path, size, false) },
		func(ctx context.Context) error { return readSeq(ctx, path, size) },
		func(ctx context.Context) error { return readSeq(ctx, path, size) },
	}
	for i, step := range steps {
		if seed001Ops[i] == "read" {
			if err := DropCaches(ctx); err != nil {
				return rates, err
			}
		}
		d, err := timedIO(ctx, size, step)
		if err != nil {
			return rates, fmt.Errorf("%s: %w", seed001Ops[i], err)
		}
		rates[i] = float64(size) / 1e6 / d.Seconds()
	}
	return rates, nil
}

// timedIO runs fn and times it. fn runs in a goroutine bounded by a limit
// that no working file system reaches (a minute plus 1 MB/s): a mount that
// hangs in a system call makes this return an error, and the goroutine
// ends when the target's tear-down unmounts.
func timedIO(ctx context.Context, size int64, fn func(context.Context) error) (time.Duration, error) {
	limit := time.Minute + time.Duration(size/1e6)*time.Second
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- fn(ctx) }()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-ctx.Done():
		return 0, fmt.Errorf("no completion within %s: %w", limit, ctx.Err())
	}
}

// recordBuf is one record of incompressible bytes.
func recordBuf() []byte {
	b := make([]byte, recordSize)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(b); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// writeSeq writes size bytes in 1 MiB records from the start of path
// (created and truncated if create, else rewritten in place), fsyncs and
// closes it.
func writeSeq(ctx context.Context, path string, size int64, create bool) error {
	flags := os.O_WRONLY
	if create {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return err
	}
	buf := recordBuf()
	for off := int64(0); off < size; off += recordSize {
		if err := ctx.Err(); err != nil {
			f.Close()
			return err
		}
		n := min(int64(recordSize), size-off)
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync: %w", err)
	}
	return f.Close()
}

// readSeq reads path to its end in 1 MiB records and checks it had size
// bytes.
func readSeq(ctx context.Context, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, recordSize)
	var got int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := f.Read(buf)
		got += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if got != size {
		return fmt.Errorf("read %d bytes of a %d-byte file", got, size)
	}
	return nil
}
