package replicate

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// BenchmarkSmallFile is the small-file path (negative lookup, create,
// write, release) on one brick and on a replica set of three, in one run:
//
//	go test -run '^$' -bench SmallFile ./layer/replicate/
func BenchmarkSmallFile(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			g := newRig(b, n, false, Options{})
			b.ResetTimer()
			smallFiles(b, g.r)
		})
	}
}

func smallFiles(b *testing.B, l layer.Layer) {
	data := []byte("hello_world\n")
	for i := 0; i < b.N; i++ {
		p := fmt.Sprintf("/f%d", i)
		if _, err := l.Lookup(b.Context(), p); err != syscall.ENOENT {
			b.Fatalf("lookup: %v", err)
		}
		f, _, err := l.Create(b.Context(), p, layer.CreateIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Flags: syscall.O_WRONLY, Mode: 0o644})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(b.Context(), data, 0); err != nil {
			b.Fatal(err)
		}
		f.Release(b.Context())
	}
}

func BenchmarkOps(b *testing.B) {
	for _, n := range []int{1, 3} {
		g := newRig(b, n, false, Options{})
		ctx := b.Context()
		b.Run(fmt.Sprintf("lookup-neg/replicas=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				g.r.Lookup(ctx, "/nothing")
			}
		})
		f, _, _ := g.r.Create(ctx, "/w", layer.CreateIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Flags: syscall.O_WRONLY, Mode: 0o644})
		b.Run(fmt.Sprintf("write/replicas=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f.Write(ctx, []byte("x"), 0)
			}
		})
		b.Run(fmt.Sprintf("create/replicas=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f, _, _ := g.r.Create(ctx, fmt.Sprintf("/c%d", i), layer.CreateIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Flags: syscall.O_WRONLY, Mode: 0o644})
				f.Release(ctx)
			}
		})
	}
}
