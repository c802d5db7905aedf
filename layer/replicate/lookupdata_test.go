package replicate

import (
	"bytes"
	"testing"
)

// LookupData gives a small file's content from a good copy only: with
// the copy an open would read from behind (it missed a write while down),
// the content is not given, and the attributes are the good copies'.
func TestLookupDataOnlyFromGoodCopy(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if err := g.writeFile("/f", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	a, data, err := g.r.LookupData(g.ctx, "/f", 1<<16)
	if err != nil || string(data) != "v1" || a.Size != 2 {
		t.Fatalf("all copies good: size %d, %q, %v; want v1", a.Size, data, err)
	}
	src := g.r.pick(Bit(0)|Bit(1)|Bit(2), pathKey("/f"))
	g.kill(src)
	if err := g.writeFile("/f", []byte("v2, longer")); err != nil {
		t.Fatal(err)
	}
	g.revive(src)
	if p := g.pending((src+1)%3, "/f"); !p.Has(src) {
		t.Fatalf("brick %d does not blame brick %d (marks %b)", (src+1)%3, src, p)
	}
	a, data, err = g.r.LookupData(g.ctx, "/f", 1<<16)
	if err != nil || a.Size != uint64(len("v2, longer")) {
		t.Fatalf("lookup with brick %d behind: size %d, %v", src, a.Size, err)
	}
	if data != nil && !bytes.Equal(data, []byte("v2, longer")) {
		t.Fatalf("content %q from the copy that is behind", data)
	}
	if data != nil {
		t.Fatalf("content given though the copy asked for it (brick %d) is behind", src)
	}
	if got, err := g.readFile("/f"); err != nil || string(got) != "v2, longer" {
		t.Fatalf("read after the lookup: %q, %v", got, err)
	}
}

// A file larger than max, and a directory, come without content.
func TestLookupDataSmallFilesOnly(t *testing.T) {
	g := newRig(t, 3, true, Options{})
	if err := g.writeFile("/big", bytes.Repeat([]byte("b"), 100)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/big", "/"} {
		a, data, err := g.r.LookupData(g.ctx, p, 99)
		if err != nil || data != nil {
			t.Errorf("%s: %d bytes, %v; want no content", p, len(data), err)
		}
		if p == "/big" && a.Size != 100 {
			t.Errorf("%s: size %d, want 100 (a data copy's, not the arbiter's)", p, a.Size)
		}
	}
	if _, data, err := g.r.LookupData(g.ctx, "/big", 100); err != nil || len(data) != 100 {
		t.Errorf("/big with max 100: %d bytes, %v; want its content from a data copy", len(data), err)
	}
}
