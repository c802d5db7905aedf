package protocol

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/layer"
)

// sink is a brick layer whose files discard what is written to them, so
// that the benchmark measures the protocol, not a disk.
type sink struct{ layer.Base }

type sinkFile struct{ layer.File }

func (sink) Open(context.Context, string, uint32) (layer.File, error) { return sinkFile{}, nil }

func (sinkFile) Write(_ context.Context, p []byte, _ int64) (int, error) { return len(p), nil }
func (sinkFile) Release(context.Context) error                           { return nil }

// rawTCP moves total bytes in chunk-sized writes over a plain loopback TCP
// connection and returns the rate in bytes per second.
func rawTCP(tb testing.TB, total, chunk int) float64 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, chunk) // read as the brick does: a chunk at a time
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				break
			}
		}
		c.Close()
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, chunk)
	start := time.Now()
	for sent := 0; sent < total; sent += chunk {
		if _, err := c.Write(buf); err != nil {
			tb.Fatal(err)
		}
	}
	c.Close()
	<-done
	return float64(total) / time.Since(start).Seconds()
}

// protocolWrite moves total bytes as chunk-sized Write operations with
// depth of them in flight and returns the rate in bytes per second.
func protocolWrite(tb testing.TB, total, chunk, depth int) float64 {
	srv := brick.NewServer(nil)
	srv.Add("b", "v", sink{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Serve(l)
	defer func() { l.Close(); srv.Close() }()
	c := New(Config{Addr: l.Addr().String(), BrickID: "b", VolumeID: "v"})
	defer c.Close()
	ctx := context.Background()
	f, err := c.Open(ctx, "/f", 1)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Release(ctx)
	buf := make([]byte, chunk)
	n := total / chunk
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	start := time.Now()
	for range depth {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if _, err := f.Write(ctx, buf, int64(i*chunk)); err != nil {
					tb.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n*chunk) / time.Since(start).Seconds()
}

// BenchmarkProtocolVsTCP reports the protocol's throughput for 1 MiB writes
// as a fraction of raw TCP on loopback, both measured in this run (b.N MiB
// each). Run: go test -run x -bench ProtocolVsTCP -benchtime 2000x ./layer/protocol/
func BenchmarkProtocolVsTCP(b *testing.B) {
	const chunk = 1 << 20
	total := max(b.N, 64) * chunk
	raw := rawTCP(b, total, chunk)
	serial := protocolWrite(b, total, chunk, 1)
	piped := protocolWrite(b, total, chunk, 4)
	b.ReportMetric(raw/1e6, "tcp-MB/s")
	b.ReportMetric(serial/1e6, "serial-MB/s")
	b.ReportMetric(piped/1e6, "pipelined-MB/s")
	b.ReportMetric(serial/raw, "serial/tcp")
	b.ReportMetric(piped/raw, "pipelined/tcp")
}

// BenchmarkLookupRoundTrip measures one small request's round trip to a
// posix brick over loopback (a lookup of a missing name).
func BenchmarkLookupRoundTrip(b *testing.B) {
	dir := b.TempDir()
	if err := posixMark(dir); err != nil {
		b.Fatal(err)
	}
	st, err := posixNew(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	srv := brick.NewServer(nil)
	srv.Add("b", testVolume, st)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(l)
	defer func() { l.Close(); srv.Close() }()
	c := New(Config{Addr: l.Addr().String(), BrickID: "b", VolumeID: testVolume})
	defer c.Close()
	ctx := context.Background()
	c.Lookup(ctx, "/")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.Lookup(ctx, "/missing")
	}
}
