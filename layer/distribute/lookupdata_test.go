package distribute

import (
	"context"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// looker answers LookupData with the content of every regular file,
// pointers included (a brick gives none for a pointer: distribute must
// not pass one up whatever its child says).
type looker struct{ layer.Layer }

func (l looker) LookupData(ctx context.Context, path string, max int) (layer.Attr, []byte, error) {
	a, err := l.Lookup(ctx, path)
	if err != nil || !a.IsReg() || a.Size > uint64(max) {
		return a, nil, err
	}
	f, err := l.Open(ctx, path, syscall.O_RDONLY)
	if err != nil {
		return a, []byte{}, nil // a pointer: storage refuses to open it
	}
	defer f.Release(ctx)
	buf := make([]byte, a.Size)
	n, err := f.Read(ctx, buf, 0)
	return a, buf[:n], err
}

// LookupData passes a small file's content up when the name's hashed
// child holds the file, and never for a name reached through a pointer, a
// directory or a missing name.
func TestLookupData(t *testing.T) {
	r := newRig(t, 3, func(_ int, l layer.Layer) layer.Layer { return looker{l} })
	a, b, c := r.name("/", "a", 0), r.name("/", "b", 1), r.name("/", "c", 2)
	attrA := r.write(a, "hello")
	r.write(c, "stays")
	if _, err := r.d.Mkdir(r.ctx, "/dir", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	got, data, err := r.d.LookupData(r.ctx, a, 1024)
	if err != nil || got.Gfid != attrA.Gfid || string(data) != "hello" {
		t.Fatalf("%s on its hashed child: %+v, %q, %v", a, got, data, err)
	}
	r.ok(r.d.Rename(r.ctx, a, b, 0), "rename")
	r.wantDisk(b, "data:hello", "pointer:b0", "")
	got, data, err = r.d.LookupData(r.ctx, b, 1024)
	if err != nil || got.Gfid != attrA.Gfid || got.Size != 5 || got.Linkto != "" || data != nil {
		t.Fatalf("%s through a pointer: %+v, %q (nil %v), %v; want the file's attributes, no content", b, got, data, data == nil, err)
	}
	if _, data, err = r.d.LookupData(r.ctx, "/dir", 1024); err != nil || data != nil {
		t.Fatalf("directory: %q, %v", data, err)
	}
	_, _, err = r.d.LookupData(r.ctx, a, 1024)
	r.errno(err, syscall.ENOENT, "missing name")
	if _, data, err = r.d.LookupData(r.ctx, c, 1024); err != nil || string(data) != "stays" {
		t.Fatalf("%s: %q, %v", c, data, err)
	}
}
