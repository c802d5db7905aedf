package disperse

import (
	"fmt"
	"math/rand"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// BenchmarkSequential writes then reads a file in 1 MiB requests through
// a 4+2 set of real bricks (client and bricks in this process):
//
//	go test -run '^$' -bench Sequential -cpuprofile /tmp/cpu.out ./layer/disperse/
func BenchmarkSequential(b *testing.B) {
	g := newRig(b, 6, 2)
	ctx := b.Context()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	f, _, err := g.d.Create(ctx, "/big", layer.CreateIn{Flags: syscall.O_RDWR | benchFlags, Mode: 0o644})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Release(ctx)
	b.Run("write-1M", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for i := 0; i < b.N; i++ {
			if _, err := f.Write(ctx, buf, int64(i%256)<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-1M", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for i := 0; i < b.N; i++ {
			if _, err := f.Read(ctx, buf, int64(i%256)<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
}

var benchFlags uint32 = 0

// BenchmarkRandomWrite4K overwrites 4 KiB blocks at random in a 16 MiB
// file: the small-write path (parity updated in place).
func BenchmarkRandomWrite4K(b *testing.B) {
	g := newRig(b, 6, 2)
	ctx := b.Context()
	f, _, err := g.d.Create(ctx, "/r", layer.CreateIn{Flags: syscall.O_RDWR | benchFlags, Mode: 0o644})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Release(ctx)
	buf := make([]byte, 1<<20)
	for off := int64(0); off < 16<<20; off += 1 << 20 {
		if _, err := f.Write(ctx, buf, off); err != nil {
			b.Fatal(err)
		}
	}
	r := rand.New(rand.NewSource(1))
	b.SetBytes(4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(ctx, buf[:4096], r.Int63n(4096)*4096); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSmallFile is the small-file path (negative lookup, create,
// write, release) on a 4+2 set, the background release included.
func BenchmarkSmallFile(b *testing.B) {
	g := newRig(b, 6, 2)
	ctx := b.Context()
	data := []byte("hello_world\n")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := fmt.Sprintf("/f%d", i)
		if _, err := g.d.Lookup(ctx, p); err != syscall.ENOENT {
			b.Fatalf("lookup: %v", err)
		}
		f, _, err := g.d.Create(ctx, p, layer.CreateIn{Flags: syscall.O_WRONLY, Mode: 0o644})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(ctx, data, 0); err != nil {
			b.Fatal(err)
		}
		f.Release(ctx)
	}
	g.d.Idle()
}
