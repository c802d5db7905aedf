package replicate

import (
	"bytes"
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// gated is a child whose file writes wait, while the gate is shut, until
// it opens: a write that reaches some replicas long before others.
type gated struct {
	layer.Layer
	shut    chan struct{} // nil: open
	arrived chan struct{} // a write is waiting
	wrote   chan struct{} // if not nil: a write is done
}

type gatedFile struct {
	layer.File
	g *gated
}

func (g *gated) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	f, err := g.Layer.Open(ctx, path, flags)
	if err != nil {
		return nil, err
	}
	return gatedFile{f, g}, nil
}

func (f gatedFile) Write(ctx context.Context, p []byte, off int64) (int, error) {
	if f.g.shut != nil && len(p) > 0 {
		f.g.arrived <- struct{}{}
		<-f.g.shut
	}
	n, err := f.File.Write(ctx, p, off)
	if f.g.wrote != nil && len(p) > 0 {
		f.g.wrote <- struct{}{}
	}
	return n, err
}

// A heal racing a write on a copy that is behind: the write reaches the
// behind copy first, the healer copies the good copy over it and clears
// its marks, and only then does the write reach the good copies. The
// write must leave the behind copy marked on them, or it is lost there
// with nothing to say so (the rolling-restart hole of docs/REPLICATION.md).
// Once a heal has cleared the marks with no write in flight, the open file
// trusts the copy again and stops marking it.
func TestWriteToBehindCopyRacingHeal(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	gates := []*gated{{Layer: g.clients[0]}, {Layer: g.clients[1]}}
	behind := &gated{Layer: g.clients[2]}
	children := []Child{
		{Name: "b0", Layer: gates[0], Up: g.clients[0].Connected},
		{Name: "b1", Layer: gates[1], Up: g.clients[1].Connected},
		{Name: "b2", Layer: behind, Up: g.clients[2].Connected},
	}
	r, err := New(children, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g.r = r
	if err := g.writeFile("/f", []byte("aaaa")); err != nil {
		t.Fatal(err)
	}
	g.kill(2)
	appendTo(t, g, "bbbb")
	g.revive(2)

	f, err := r.Open(g.ctx, "/f", syscall.O_WRONLY|syscall.O_APPEND)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(g.ctx)
	for _, gt := range gates {
		gt.shut, gt.arrived = make(chan struct{}), make(chan struct{}, 1)
	}
	behind.wrote = make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		_, err := f.Write(g.ctx, []byte("cccc"), 0)
		done <- err
	}()
	for _, gt := range gates {
		<-gt.arrived // the write waits at bricks 0 and 1: it has reached brick 2
	}
	<-behind.wrote // brick 2 had "aaaa", appended "cccc"
	behind.wrote = nil

	// The healer: brick 0 is the source; it is copied to brick 2, and
	// the marks are cleared on both sources, which have not changed.
	src := healCopy(t, g, 0, 2)
	for i := range 2 {
		a, err := g.onBrick(i).Lookup(g.ctx, "/f")
		if err != nil {
			t.Fatal(err)
		}
		if err := g.bricks[i].Store.ClearPending(g.ctx, "/f", a.Gfid, uint64(Bit(2)), a.Ctime); err != nil {
			t.Fatalf("brick %d: clear: %v", i, err)
		}
	}
	for _, gt := range gates {
		close(gt.shut)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, gt := range gates {
		gt.shut = nil
	}
	for i := range 2 {
		if p := g.pending(i, "/f"); !p.Has(2) {
			t.Errorf("brick %d does not blame brick 2 after a write that reached it after the heal (pending %b): brick 2 holds %q, the write is lost there", i, p, src)
		}
	}

	// A heal with nothing in flight brings brick 2 up to date.
	healCopy(t, g, 0, 2)
	for i := range 2 {
		a, _ := g.onBrick(i).Lookup(g.ctx, "/f")
		if err := g.bricks[i].Store.ClearPending(g.ctx, "/f", a.Gfid, uint64(Bit(2)), a.Ctime); err != nil {
			t.Fatalf("brick %d: clear: %v", i, err)
		}
	}
	rf := f.(*file)
	rf.mu.Lock()
	rf.checked = time.Time{} // due now
	rf.mu.Unlock()
	if _, err := f.Write(g.ctx, []byte("dddd"), 0); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if p := g.pending(i, "/f"); p != 0 {
			t.Errorf("brick %d: pending %b after the copy caught up, want none", i, p)
		}
	}
	if _, _, good := rf.Handles(); !good.Has(2) {
		t.Errorf("good %b: brick 2 caught up but is not read from", good)
	}
	want := []byte("aaaabbbbccccdddd")
	for i := range 3 {
		if got := brickContent(t, g, i); !bytes.Equal(got, want) {
			t.Errorf("brick %d holds %q, want %q", i, got, want)
		}
	}
}

func appendTo(t *testing.T, g *rig, s string) {
	t.Helper()
	f, err := g.r.Open(g.ctx, "/f", syscall.O_WRONLY|syscall.O_APPEND)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(g.ctx)
	if _, err := f.Write(g.ctx, []byte(s), 0); err != nil {
		t.Fatal(err)
	}
}

func brickContent(t *testing.T, g *rig, i int) []byte {
	t.Helper()
	f, err := g.onBrick(i).Open(g.ctx, "/f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(g.ctx)
	buf := make([]byte, 1024)
	n, err := f.Read(g.ctx, buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// healCopy copies brick src's /f over brick dst's, as the healer does,
// and returns what it copied.
func healCopy(t *testing.T, g *rig, src, dst int) []byte {
	t.Helper()
	data := brickContent(t, g, src)
	df, err := g.onBrick(dst).Open(g.ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Release(g.ctx)
	if _, err := df.Write(g.ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := df.Setattr(g.ctx, layer.SetattrIn{Valid: layer.SetSize, Size: uint64(len(data))}); err != nil {
		t.Fatal(err)
	}
	return data
}
