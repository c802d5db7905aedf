package nlcache

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// slowCreate holds creates until released, and its listings wait for a
// create to finish after reading their page.
type slowCreate struct {
	layer.Layer
	createGo   chan struct{} // a create may reach the store
	entered    chan struct{} // a create reached the child
	createDone chan struct{} // the create went through the layer
}

func (c *slowCreate) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	close(c.entered)
	<-c.createGo
	return c.Layer.Create(ctx, path, in)
}

func (c *slowCreate) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	page, err := c.Layer.Readdir(ctx, path, cookie, max)
	close(c.createGo) // the page is read: now the create goes...
	<-c.createDone    // ...and finishes before the listing is used
	return page, err
}

// A create that began before the layer knew its directory and ended while
// the directory was listed is not missed: the listing is not used.
// (Found by review: its name was answered ENOENT.)
func TestCreateBeforeDirectoryKnown(t *testing.T) {
	store := newStore(t)
	slow := &slowCreate{Layer: store, createGo: make(chan struct{}), createDone: make(chan struct{}), entered: make(chan struct{})}
	r := newRig(t, slow)
	go func() {
		f, _, err := r.l.Create(bg, "/new", layer.CreateIn{Mode: 0o644, Flags: syscall.O_RDWR, Owner: layer.Owner{Gfid: layer.NewGfid()}})
		if err == nil {
			f.Release(bg)
		}
		close(slow.createDone)
	}()
	<-slow.entered
	if err, _ := r.lookup("/none"); !errors.Is(err, syscall.ENOENT) {
		t.Fatal(err)
	}
	if _, err := store.Lookup(bg, "/new"); err != nil {
		t.Fatalf("the store: %v", err)
	}
	if err, asked := r.lookup("/new"); err != nil {
		t.Fatalf("a name this client made: %v (asked the child: %v)", err, asked)
	}
}

// rename(2) of two links of one inode does nothing: both names stay, and
// the layer answers neither absent. (Found by review.)
func TestRenameHardLinksOntoEachOther(t *testing.T) {
	r := newRig(t, nil)
	r.mkdir(r.l, "/d")
	r.create(r.l, "/d/a")
	if _, err := r.l.Link(bg, "/d/a", "/d/b"); err != nil {
		t.Fatal(err)
	}
	if err := r.l.Rename(bg, "/d/a", "/d/b", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.under.Lookup(bg, "/d/a"); err != nil {
		t.Fatalf("the store lost /d/a: %v", err)
	}
	if err, asked := r.lookup("/d/a"); err != nil {
		t.Fatalf("/d/a, which the store has: %v (asked: %v)", err, asked)
	}
}
