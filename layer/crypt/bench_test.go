package crypt

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/distribute"
)

// benchLayers returns distribute over one real brick, and the crypt layer
// on top of it.
func benchLayers(b *testing.B) (*distribute.Distribute, *Layer) {
	set := testbrick.NewSet(b, 1, testVolume, func(int) posix.Options { return posix.Options{} })
	d, err := distribute.New([]distribute.Child{{ID: set.Bricks[0].ID, Layer: set.Clients[0]}}, distribute.Options{})
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(d, NewKey(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	return d, c
}

// BenchmarkFile writes and reads 1 MiB files (FUSE's largest requests)
// on distribute over a real brick, without and with the crypt layer:
// the ratio of the two is what encryption costs a client.
func BenchmarkFile(b *testing.B) {
	d, c := benchLayers(b)
	data := pattern(1<<20, 3)
	for _, l := range []struct {
		name string
		l    layer.Layer
	}{{"plain", d}, {"crypt", c}} {
		ctx := b.Context()
		write := func(b *testing.B, i int) {
			f, _, err := l.l.Create(ctx, fmt.Sprintf("/%s%d", l.name, i%50), layer.CreateIn{Flags: syscall.O_WRONLY | syscall.O_TRUNC, Mode: 0o644})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Write(ctx, data, 0); err != nil {
				b.Fatal(err)
			}
			f.Release(ctx)
		}
		b.Run("write/"+l.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; b.Loop(); i++ {
				write(b, i)
			}
		})
		b.Run("read/"+l.name, func(b *testing.B) {
			for i := range 50 {
				write(b, i)
			}
			b.SetBytes(int64(len(data)))
			p := make([]byte, len(data))
			for i := 0; b.Loop(); i++ {
				f, err := l.l.Open(ctx, fmt.Sprintf("/%s%d", l.name, i%50), syscall.O_RDONLY)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := f.Read(ctx, p, 0); err != nil || n != len(p) {
					b.Fatal(n, err)
				}
				f.Release(ctx)
			}
		})
	}
}

// BenchmarkSmallWrites writes a 1 MiB file in 4 KiB sequential writes
// (dd bs=4k without a page cache in front): each rewrites the last,
// partial 64 KiB block.
func BenchmarkSmallWrites(b *testing.B) {
	d, c := benchLayers(b)
	data := pattern(4096, 5)
	for _, l := range []struct {
		name string
		l    layer.Layer
	}{{"plain", d}, {"crypt", c}} {
		ctx := b.Context()
		b.Run(l.name, func(b *testing.B) {
			b.SetBytes(1 << 20)
			for b.Loop() {
				f, _, err := l.l.Create(ctx, "/small-"+l.name, layer.CreateIn{Flags: syscall.O_WRONLY | syscall.O_TRUNC, Mode: 0o644})
				if err != nil {
					b.Fatal(err)
				}
				for off := int64(0); off < 1<<20; off += int64(len(data)) {
					if _, err := f.Write(ctx, data, off); err != nil {
						b.Fatal(err)
					}
				}
				f.Release(ctx)
			}
		})
	}
}
