package crypt_test

import (
	"bytes"
	"github.com/mortarfs/mortar/volume/options"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/crypt"
	"github.com/mortarfs/mortar/layer/distribute"
	"github.com/mortarfs/mortar/layer/mdcache"
	"github.com/mortarfs/mortar/layer/nlcache"
	"github.com/mortarfs/mortar/layer/readdirahead"
	"github.com/mortarfs/mortar/layer/writebehind"
	"github.com/mortarfs/mortar/volume"
)

const buildVolume = "0e0e0e0e-1111-2222-3333-444444444444"

// volume.Build stacks the crypt layer on encrypted volumes, refuses them
// without a key, and leaves it out for servers that ask for ciphertext.
func TestVolumeBuild(t *testing.T) {
	spec := volume.Spec{Name: "sealed", ID: buildVolume, Type: volume.Distribute, Version: 1,
		Options: map[string]string{options.OptEncryption: "on"}}
	for i := range 2 {
		b := testbrick.New(t, "brick-"+string(rune('a'+i)), buildVolume, posix.Options{})
		spec.Bricks = append(spec.Bricks, volume.Brick{ID: b.ID, Host: "127.0.0.1", Path: b.Dir, Addr: b.Addr})
	}
	t.Setenv(crypt.EnvKey, "")
	if _, err := volume.Build(spec, volume.BuildOptions{}); err == nil ||
		!strings.Contains(err.Error(), "volume sealed is encrypted: give its key with -o key-file=PATH or MORTAR_VOLUME_KEY") {
		t.Fatalf("build without a key: %v", err)
	}
	key := crypt.NewKey()
	build := func(o volume.BuildOptions) *volume.Graph {
		t.Helper()
		g, err := volume.Build(spec, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		deadline := time.Now().Add(10 * time.Second)
		for !g.Connected() { // no event to wait for
			if time.Now().After(deadline) {
				t.Fatal("graph not connected")
			}
			time.Sleep(5 * time.Millisecond)
		}
		return g
	}
	g := build(volume.BuildOptions{Key: key})
	under := g.Top
	if ra, ok := under.(*readdirahead.Layer); ok { // listings, above crypt
		under = ra.Child
	}
	if md, ok := under.(*mdcache.Layer); ok { // directories' attributes only
		under = md.Child
	}
	if nl, ok := under.(*nlcache.Layer); ok { // names only: above crypt
		under = nl.Child
	}
	if wb, ok := under.(*writebehind.Layer); ok { // plaintext writes, sent to crypt aggregated
		under = wb.Child
	}
	if _, ok := under.(*crypt.Layer); !ok {
		t.Fatalf("an encrypted volume's stack is %T over %T, want crypt under the name cache", g.Top, under)
	}
	raw := build(volume.BuildOptions{Ciphertext: true})
	if _, ok := raw.Top.(*distribute.Distribute); !ok {
		t.Fatalf("top of the ciphertext graph is %T", raw.Top)
	}
	ctx := t.Context()
	data := bytes.Repeat([]byte("plain words "), 1000)
	f, _, err := g.Top.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	read := func(l layer.Layer) []byte {
		t.Helper()
		f, err := l.Open(ctx, "/f", syscall.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Release(ctx)
		p := make([]byte, 2*len(data))
		n, err := f.Read(ctx, p, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p[:n]
	}
	if got := read(g.Top); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, not the %d written", len(got), len(data))
	}
	if got := read(raw.Top); bytes.Contains(got, []byte("plain words")) || len(got) <= len(data) {
		t.Fatalf("the ciphertext graph reads %d bytes with plaintext in them", len(got))
	}
	if _, err := volume.Build(spec, volume.BuildOptions{Key: key[:10]}); err == nil {
		t.Fatal("build with a 10-byte key")
	}
}
