package crypt

import (
	"bytes"
	"os"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// editBrick changes the brick file of path with fn.
func (r *rig) editBrick(path string, fn func(b []byte) []byte) {
	r.t.Helper()
	p := r.brickFile(path)
	b, err := os.ReadFile(p)
	r.ok(err, "read brick file")
	r.ok(os.WriteFile(p, fn(b), 0o644), "write brick file")
}

// wantErrno reads n bytes at off of path and wants errno.
func (r *rig) wantErrno(l layer.Layer, path string, n int, off int64, want syscall.Errno, what string) {
	r.t.Helper()
	got, err := r.readAt(l, path, n, off)
	if layer.ToErrno(err) != want {
		r.t.Fatalf("%s: read %d at %d: %d bytes, error %v; want %v", what, n, off, len(got), err, want)
	}
}

// The bricks hold ciphertext: neither the plaintext nor any block of it,
// and sizes as the format says.
func TestBricksHoldCiphertext(t *testing.T) {
	r := newRig(t, 2)
	plain := bytes.Repeat([]byte("secret plaintext, repeated. "), 3*BlockSize/28)
	r.create(r.c, "/s", plain)
	stored, err := os.ReadFile(r.brickFile("/s"))
	r.ok(err, "read brick file")
	if int64(len(stored)) != cipherSize(int64(len(plain))) {
		t.Fatalf("brick file has %d bytes, want %d", len(stored), cipherSize(int64(len(plain))))
	}
	if bytes.Contains(stored, []byte("secret plaintext")) || bytes.Contains(stored, plain[:64]) {
		t.Fatal("the brick file holds plaintext")
	}
	if a, err := r.c.Lookup(r.ctx, "/s"); err != nil || a.Size != uint64(len(plain)) {
		t.Fatalf("lookup: size %d, %v; want %d", a.Size, err, len(plain))
	}
	page, err := r.c.Readdir(r.ctx, "/", 0, 10)
	r.ok(err, "readdir")
	if len(page.Entries) != 1 || page.Entries[0].Attr.Size != uint64(len(plain)) {
		t.Fatalf("readdir: %+v", page.Entries)
	}
}

// Changing a block on its brick makes that block (and only that block)
// fail with EIO; so do swapped blocks, a block zeroed in a file without
// holes, and a cut inside a block.
func TestTamperedBlocks(t *testing.T) {
	r := newRig(t, 1)
	plain := pattern(3*BlockSize+100, 1)
	fresh := func(path string) {
		r.create(r.c, path, plain)
	}
	check := func(path string, off int64, n int) {
		t.Helper()
		got, err := r.readAt(r.c, path, n, off)
		r.ok(err, "read intact part of "+path)
		wantBytes(t, "intact part of "+path, got, plain[off:off+int64(n)])
	}

	fresh("/flip")
	r.editBrick("/flip", func(b []byte) []byte { b[blockOff(1)+100] ^= 1; return b })
	r.wantErrno(r.c, "/flip", 10, BlockSize+5, syscall.EIO, "flipped byte in block 1")
	r.wantErrno(r.c, "/flip", 3*BlockSize, 0, syscall.EIO, "read over block 1")
	check("/flip", 0, BlockSize)
	check("/flip", 2*BlockSize, BlockSize+100)
	// A write into the bad block must not replace it with garbage.
	f, err := r.c.Open(r.ctx, "/flip", syscall.O_RDWR)
	r.ok(err, "open")
	if _, err := f.Write(r.ctx, []byte("x"), BlockSize+1); layer.ToErrno(err) != syscall.EIO {
		t.Fatalf("partial write into a tampered block: %v, want EIO", err)
	}
	f.Release(r.ctx)

	fresh("/tag")
	r.editBrick("/tag", func(b []byte) []byte { b[blockOff(1)-1] ^= 0x80; return b }) // block 0's tag
	r.wantErrno(r.c, "/tag", 1, 0, syscall.EIO, "flipped tag of block 0")

	fresh("/swap")
	r.editBrick("/swap", func(b []byte) []byte {
		b0 := bytes.Clone(b[blockOff(0):blockOff(1)])
		copy(b[blockOff(0):], b[blockOff(1):blockOff(2)])
		copy(b[blockOff(1):], b0)
		return b
	})
	r.wantErrno(r.c, "/swap", 10, 0, syscall.EIO, "swapped blocks 0 and 1")
	r.wantErrno(r.c, "/swap", 10, BlockSize, syscall.EIO, "swapped blocks 0 and 1")
	check("/swap", 2*BlockSize, 100)

	fresh("/zero")
	r.editBrick("/zero", func(b []byte) []byte { clear(b[blockOff(1):blockOff(2)]); return b })
	r.wantErrno(r.c, "/zero", 10, BlockSize, syscall.EIO, "zeroed block in a file without holes")

	fresh("/cut")
	r.editBrick("/cut", func(b []byte) []byte { return b[:blockOff(3)+10] })
	r.wantErrno(r.c, "/cut", 10, 3*BlockSize, syscall.EIO, "last block cut to less than its overhead")
	r.editBrick("/cut", func(b []byte) []byte { return b[:blockOff(2)+100] })
	r.wantErrno(r.c, "/cut", 10, 2*BlockSize, syscall.EIO, "block cut short")
}

// A header copied from another file, or a whole file copied over another,
// fails; so does a damaged header. A wrong volume key is EACCES.
func TestTamperedHeaders(t *testing.T) {
	r := newRig(t, 1)
	a, b := pattern(1000, 1), pattern(1000, 2)
	r.create(r.c, "/a", a)
	r.create(r.c, "/b", b)
	stored, err := os.ReadFile(r.brickFile("/a"))
	r.ok(err, "read brick file")

	r.editBrick("/b", func(bb []byte) []byte { copy(bb, stored[:HeaderSize]); return bb })
	r.wantErrno(r.c, "/b", 10, 0, syscall.EIO, "header of /a on /b")
	r.editBrick("/b", func([]byte) []byte { return bytes.Clone(stored) })
	r.wantErrno(r.c, "/b", 10, 0, syscall.EIO, "all of /a copied onto /b")

	r.create(r.c, "/h", a)
	r.editBrick("/h", func(bb []byte) []byte { bb[6] |= flagSparse; return bb })
	r.wantErrno(r.c, "/h", 10, 0, syscall.EIO, "flags changed in the header")
	r.create(r.c, "/k", a)
	r.editBrick("/k", func(bb []byte) []byte { bb[40] ^= 1; return bb })
	r.wantErrno(r.c, "/k", 10, 0, syscall.EIO, "wrapped key changed")

	other := r.layer(NewKey())
	r.wantErrno(other, "/a", 10, 0, syscall.EACCES, "another volume key")
	f, err := other.Open(r.ctx, "/a", syscall.O_RDWR)
	r.ok(err, "open with another key")
	if _, err := f.Write(r.ctx, []byte("x"), 5); layer.ToErrno(err) != syscall.EACCES {
		t.Fatalf("write with another key: %v, want EACCES", err)
	}
	f.Release(r.ctx)
	got, err := r.readAt(r.c, "/a", 2000, 0)
	r.ok(err, "read /a with its key")
	wantBytes(t, "/a after a client with another key tried", got, a)
}

// In a file with holes, never-written blocks read as zeros and take no
// space; changed bytes of written blocks are still EIO.
func TestHoles(t *testing.T) {
	r := newRig(t, 1)
	f, _, err := r.c.Create(r.ctx, "/h", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
	r.ok(err, "create")
	defer f.Release(r.ctx)
	_, err = f.Write(r.ctx, []byte("head"), 0)
	r.ok(err, "write head")
	_, err = f.Write(r.ctx, []byte("tail"), 10*BlockSize)
	r.ok(err, "write tail")
	got, err := r.readAt(r.c, "/h", 10*BlockSize+10, 0)
	r.ok(err, "read")
	want := make([]byte, 10*BlockSize+4)
	copy(want, "head")
	copy(want[10*BlockSize:], "tail")
	wantBytes(t, "sparse file", got, want)
	st, err := os.Stat(r.brickFile("/h"))
	r.ok(err, "stat")
	if blocks := st.Sys().(*syscall.Stat_t).Blocks; blocks > 2*BlockSize/512+64 {
		t.Errorf("sparse file takes %d blocks of 512 bytes on its brick", blocks)
	}
	r.editBrick("/h", func(b []byte) []byte { b[blockOff(10)+20] ^= 1; return b })
	r.wantErrno(r.c, "/h", 4, 10*BlockSize, syscall.EIO, "changed block of a sparse file")
}
