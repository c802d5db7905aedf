package disperse

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// A lookup brings the content of a file of at most a Chunk (and of max)
// from the first data brick's fragment, checked; nothing for a larger
// file, for a fragment that fails its checksums, or with that brick down.
func TestLookupDataGivesContent(t *testing.T) {
	g := newRig(t, 6, 2)
	ctx := g.ctx
	r := rand.New(rand.NewSource(2))
	files := map[string][]byte{}
	for _, n := range []int{0, 1, Block, Block + 7, Chunk, Chunk + 1} {
		data := make([]byte, n)
		r.Read(data)
		path := fmt.Sprintf("/f%d", n)
		g.writeFile(path, data)
		files[path] = data
	}
	for path, want := range files {
		a, got, err := layer.LookupData(ctx, g.d, path, 1<<20)
		if err != nil || a.Size != uint64(len(want)) {
			t.Fatalf("%s: size %d, %v", path, a.Size, err)
		}
		if len(want) > Chunk {
			if got != nil {
				t.Errorf("%s: content of a file over a chunk", path)
			}
			continue
		}
		if got == nil || !bytes.Equal(got, want) {
			t.Errorf("%s: content %d bytes (nil %v), want %d", path, len(got), got == nil, len(want))
		}
		if _, got, _ := layer.LookupData(ctx, g.d, path, len(want)-1); len(want) > 0 && got != nil {
			t.Errorf("%s: content over max", path)
		}
	}
	// A fragment whose block fails its checksum gives no content.
	frag := filepath.Join(g.bricks[0].Dir, "f4103")
	b, err := os.ReadFile(frag)
	if err != nil {
		t.Fatal(err)
	}
	b[HeaderSize+5] ^= 0xff
	if err := os.WriteFile(frag, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, got, err := layer.LookupData(ctx, g.d, "/f4103", 1<<20); err != nil || got != nil {
		t.Errorf("a corrupt fragment: %d bytes of content, %v", len(got), err)
	}
	g.kill(0)
	if a, got, err := layer.LookupData(ctx, g.d, "/f1", 1<<20); err != nil || a.Size != 1 || got != nil {
		t.Errorf("first data brick down: size %d, %d bytes of content, %v", a.Size, len(got), err)
	}
}
