package crypt

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/distribute"
)

const testVolume = "vol-crypt-test"

// rig is the crypt layer on distribute over real bricks on 127.0.0.1.
type rig struct {
	t   *testing.T
	ctx context.Context
	set *testbrick.Set
	d   *distribute.Distribute
	c   *Layer
	key []byte
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func newRig(t *testing.T, bricks int) *rig {
	t.Helper()
	set := testbrick.NewSet(t, bricks, testVolume, func(int) posix.Options { return posix.Options{} })
	var children []distribute.Child
	for i, b := range set.Bricks {
		children = append(children, distribute.Child{ID: b.ID, Layer: set.Clients[i]})
	}
	d, err := distribute.New(children, distribute.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, ctx: t.Context(), set: set, d: d, key: NewKey()}
	r.c = r.layer(r.key)
	return r
}

// layer returns another crypt layer (another client) on the same
// distribute, with key.
func (r *rig) layer(key []byte) *Layer {
	r.t.Helper()
	c, err := New(r.d, key, Options{Logger: testLogger(r.t)})
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

func (r *rig) ok(err error, what string) {
	r.t.Helper()
	if err != nil {
		r.t.Fatalf("%s: %v", what, err)
	}
}

// create writes a new file with data through l.
func (r *rig) create(l layer.Layer, path string, data []byte) layer.Attr {
	r.t.Helper()
	f, a, err := l.Create(r.ctx, path, layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
	r.ok(err, "create "+path)
	defer f.Release(r.ctx)
	n, err := f.Write(r.ctx, data, 0)
	r.ok(err, "write "+path)
	if n != len(data) {
		r.t.Fatalf("write %s: %d of %d bytes", path, n, len(data))
	}
	return a
}

// readAt reads n bytes at off of path through l.
func (r *rig) readAt(l layer.Layer, path string, n int, off int64) ([]byte, error) {
	f, err := l.Open(r.ctx, path, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Release(r.ctx)
	p := make([]byte, n)
	m, err := f.Read(r.ctx, p, off)
	return p[:m], err
}

// brickFile is the path on its brick of the file path (the brick that
// holds its data).
func (r *rig) brickFile(path string) string {
	r.t.Helper()
	for _, b := range r.set.Bricks {
		p := filepath.Join(b.Dir, path)
		if st, err := os.Stat(p); err == nil && st.Size() > 0 {
			return p
		}
	}
	r.t.Fatalf("no brick holds data of %s", path)
	return ""
}

// pattern is n bytes that differ from block to block and within blocks.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>16)
	}
	return b
}

func wantBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d bytes, want %d; first difference at %d", what, len(got), len(want), i)
	}
}
