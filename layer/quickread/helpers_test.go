package quickread

import (
	"context"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/internal/testbrick"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
	"github.com/mortarfs/mortar/layer/locks"
)

const testVolume = "vol-quickread-test"

// looker gives the content of small regular files with lookups, as a
// brick does (layer.DataLooker over storage that has none); hook, if set,
// runs between the lookup and the read.
type looker struct {
	layer.Layer
	hook func()
}

func (l *looker) LookupData(ctx context.Context, path string, max int) (layer.Attr, []byte, error) {
	a, err := l.Lookup(ctx, path)
	if err != nil || !a.IsReg() || a.Size > uint64(max) {
		return a, nil, err
	}
	if l.hook != nil {
		l.hook()
	}
	f, err := l.Open(ctx, path, syscall.O_RDONLY|syscall.O_NOATIME)
	if err != nil {
		return a, nil, nil
	}
	defer f.Release(ctx)
	buf := make([]byte, a.Size)
	n, err := f.Read(ctx, buf, 0)
	return a, buf[:n], err
}

// rig is the layer over a posix brick (and its locks layer), with its
// child's operations counted.
type rig struct {
	t      *testing.T
	ctx    context.Context
	store  *posix.Store // the brick, straight: another client's view
	looker *looker
	counts *layertest.Counting
	clock  *layertest.Clock
	l      *Layer
}

func newRig(t *testing.T, opts Options) *rig {
	t.Helper()
	s := testbrick.NewStore(t, testVolume)
	r := &rig{t: t, ctx: context.Background(), store: s, looker: &looker{Layer: locks.New(s)}, clock: layertest.NewClock()}
	r.counts = layertest.NewCounting(r.looker)
	opts.Now = r.clock.Now
	r.l = New(r.counts, opts)
	return r
}

func (r *rig) ok(err error, what string) {
	r.t.Helper()
	if err != nil {
		r.t.Fatalf("%s: %v", what, err)
	}
}

// put writes path with data through l.
func (r *rig) put(l layer.Layer, path, data string) {
	r.t.Helper()
	f, _, err := l.Create(r.ctx, path, layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_TRUNC, Mode: 0o644})
	r.ok(err, "create "+path)
	defer f.Release(r.ctx)
	_, err = f.Write(r.ctx, []byte(data), 0)
	r.ok(err, "write "+path)
}

func (r *rig) lookup(path string) layer.Attr {
	r.t.Helper()
	a, err := r.l.Lookup(r.ctx, path)
	r.ok(err, "lookup "+path)
	return a
}

func (r *rig) open(path string) layer.File {
	r.t.Helper()
	f, err := r.l.Open(r.ctx, path, syscall.O_RDONLY)
	r.ok(err, "open "+path)
	return f
}

// read reads f whole, in reads of 4 KiB as the kernel would.
func (r *rig) read(f layer.File) string {
	r.t.Helper()
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(r.ctx, buf, int64(len(out)))
		r.ok(err, "read")
		if n == 0 {
			return string(out)
		}
		out = append(out, buf[:n]...)
	}
}

// served writes path with data through the layer, looks it up and opens
// it for reading (from memory); it is released when the test ends.
func (r *rig) served(path, data string) layer.File {
	r.t.Helper()
	r.put(r.l, path, data)
	r.lookup(path)
	f := r.open(path)
	r.t.Cleanup(func() { f.Release(r.ctx) })
	return f
}

// cat opens path for reading, reads it whole and closes it.
func (r *rig) cat(path string) string {
	r.t.Helper()
	f := r.open(path)
	defer f.Release(r.ctx)
	s := r.read(f)
	r.ok(f.Flush(r.ctx, 1), "flush")
	return s
}

// wantOpens checks how many opens reached the child since the last reset.
func (r *rig) wantOpens(want int, what string) {
	r.t.Helper()
	if got := r.counts.Count("Open"); got != want {
		r.t.Errorf("%s: %d opens reached the child, want %d", what, got, want)
	}
}
