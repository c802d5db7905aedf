package distribute

import (
	"context"
	"sync"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// toldReplaced is a child that keeps what RenameDir is told.
type toldReplaced struct {
	layer.Layer
	mu   *sync.Mutex
	told *[]layer.Attr
}

func (c toldReplaced) RenameDir(ctx context.Context, oldpath, newpath string, flags uint32, replaced layer.Attr) error {
	c.mu.Lock()
	*c.told = append(*c.told, replaced)
	c.mu.Unlock()
	return c.Layer.Rename(ctx, oldpath, newpath, flags)
}

// A directory renamed over an empty one tells every child the directory
// it replaces, as distribute looked it up (layer.DirRenamer): a replica
// set that moves the rename back makes it again from that.
func TestDirectoryRenameTellsTheReplacedDirectory(t *testing.T) {
	var mu sync.Mutex
	var told []layer.Attr
	r := newRig(t, 3, func(_ int, l layer.Layer) layer.Layer { return toldReplaced{l, &mu, &told} })
	for _, d := range []string{"/a", "/b"} {
		if _, err := r.d.Mkdir(r.ctx, d, layer.MkdirIn{Mode: 0o750}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := r.d.Lookup(r.ctx, "/b")
	r.ok(err, "lookup /b")
	r.ok(r.d.Rename(r.ctx, "/a", "/b", 0), "rename /a over /b")
	if len(told) != 3 {
		t.Fatalf("%d children told, want 3", len(told))
	}
	for _, a := range told {
		if a.Gfid != b.Gfid || !a.IsDir() || a.Mode != b.Mode {
			t.Errorf("a child was told %+v, want /b as it was: %+v", a, b)
		}
	}
}
