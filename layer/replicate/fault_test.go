package replicate

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
)

func (g *rig) writeFile(path string, data []byte) error {
	f, _, err := g.r.Create(g.ctx, path, layer.CreateIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		return err
	}
	defer f.Release(g.ctx)
	_, err = f.Write(g.ctx, data, 0)
	return err
}

func (g *rig) readFile(path string) ([]byte, error) {
	f, err := g.r.Open(g.ctx, path, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Release(g.ctx)
	buf := make([]byte, 1<<20)
	n, err := f.Read(g.ctx, buf, 0)
	return buf[:n], err
}

// pending returns the marks brick i holds on path (straight from storage).
func (g *rig) pending(i int, path string) Mask {
	g.t.Helper()
	a, err := g.onBrick(i).Lookup(g.ctx, path)
	if err != nil {
		g.t.Fatalf("brick %d: lookup %s: %v", i, path, err)
	}
	return Mask(a.Pending)
}

func (g *rig) index(i int) []layer.HealEntry {
	g.t.Helper()
	es, err := g.bricks[i].Store.HealIndex(g.ctx, layer.Gfid{}, 100)
	if err != nil {
		g.t.Fatal(err)
	}
	return es
}

// A brick that is down misses writes; the others record it in the same
// round trip, and reads never come from it once it is back.
func TestDownBrickIsMarkedAndNeverRead(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if err := g.writeFile("/f", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	g.kill(2)
	if err := g.writeFile("/f", []byte("v2-longer")); err != nil {
		t.Fatalf("write with one brick of three down: %v", err)
	}
	if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if p := g.pending(i, "/f"); p != Bit(2) {
			t.Errorf("brick %d: /f pending %b, want %b", i, p, Bit(2))
		}
		if p := g.pending(i, "/"); p != Bit(2) {
			t.Errorf("brick %d: / pending %b (mkdir while brick 2 is down), want %b", i, p, Bit(2))
		}
		if n := len(g.index(i)); n != 2 {
			t.Errorf("brick %d: %d heal index entries, want 2 (/ and /f)", i, n)
		}
	}
	g.revive(2)
	g.kill(0) // now only brick 1 knows that brick 2 is behind
	for k := 0; k < 10; k++ {
		got, err := g.readFile("/f")
		if err != nil || string(got) != "v2-longer" {
			t.Fatalf("read %d: %q, %v; want the current data, never the stale copy", k, got, err)
		}
	}
	a, err := g.r.Lookup(g.ctx, "/f")
	if err != nil || a.Size != 9 || a.Pending != 0 {
		t.Fatalf("lookup: size %d pending %d err %v; want size 9 from the good copy", a.Size, a.Pending, err)
	}
	if _, err := g.r.Lookup(g.ctx, "/d"); err != nil {
		t.Fatalf("lookup of a directory the revived brick lacks: %v", err)
	}
}

// A brick that dies in the middle of writing a file: the writer sees no
// error, the survivors are marked, and the file is whole on them.
func TestBrickDiesDuringWrite(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	f, _, err := g.r.Create(g.ctx, "/big", layer.CreateIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	var want []byte
	for k := 0; k < 32; k++ {
		if k == 10 {
			g.bricks[1].Stop() // no waiting: the write finds out
		}
		if _, err := f.Write(g.ctx, chunk, int64(k*len(chunk))); err != nil {
			t.Fatalf("write %d with brick 1 dying: %v", k, err)
		}
		want = append(want, chunk...)
	}
	if err := f.Release(g.ctx); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		if p := g.pending(i, "/big"); p != Bit(1) {
			t.Errorf("brick %d: pending %b, want %b", i, p, Bit(1))
		}
	}
	got, err := g.readFile("/big")
	if err != nil || !bytes.Equal(got, want[:min(len(want), 1<<20)]) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
}

// Two of three down: writes fail with EROFS and change nothing; reads fail
// with ENOTCONN rather than trust a lone copy.
func TestNoQuorum(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if err := g.writeFile("/f", []byte("before")); err != nil {
		t.Fatal(err)
	}
	g.kill(1)
	g.kill(2)
	if err := g.writeFile("/g", []byte("x")); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("create without quorum: %v, want EROFS", err)
	}
	if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Mode: 0o755}); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("mkdir without quorum: %v, want EROFS", err)
	}
	if err := g.r.Unlink(g.ctx, "/f"); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("unlink without quorum: %v, want EROFS", err)
	}
	if _, err := g.onBrick(0).Lookup(g.ctx, "/g"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("the refused create reached the brick: %v", err)
	}
	if es := g.index(0); len(es) != 0 {
		t.Fatalf("refused operations left heal entries: %v", es)
	}
	if _, err := g.readFile("/f"); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("read without quorum: %v, want ENOTCONN", err)
	}
	if _, err := g.r.Lookup(g.ctx, "/f"); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("lookup of a file without quorum: %v, want ENOTCONN", err)
	}
	if a, err := g.r.Lookup(g.ctx, "/"); err != nil || !a.IsDir() {
		t.Fatalf("lookup of a directory without quorum: %v; want its attributes", err)
	}
	if _, err := g.r.Readdir(g.ctx, "/", 0, 100); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("readdir without quorum: %v, want ENOTCONN", err)
	}
	g.revive(1)
	got, err := g.readFile("/f")
	if err != nil || string(got) != "before" {
		t.Fatalf("read after quorum is back: %q %v", got, err)
	}
	if err := g.writeFile("/g", []byte("x")); err != nil {
		t.Fatalf("write after quorum is back: %v", err)
	}
}

// Without a quorum, the copy up may be the one that missed a file's
// create: its ENOENT is no answer (the simulation, replica 3x2 seeds 73
// and 78: a read, and distribute's lookup of a rename's source, were
// answered ENOENT by a brick alone, which had been down, or cut off from
// the client, when the file was made; the marks saying so were on the
// bricks it could not reach). A lookup and an open of the file fail with
// ENOTCONN, and so does a lookup of a name no brick has; its parent still
// resolves, a create there still fails with EROFS, and a rename or unlink
// of the file with EROFS, before anything is sent.
func TestStaleCopyAloneDoesNotSayENOENT(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	g.kill(0)
	if err := g.writeFile("/d/f", []byte("made while brick 0 was down")); err != nil {
		t.Fatal(err)
	}
	g.kill(1)
	g.kill(2)
	g.revive(0) // alone, and stale: it lacks /d/f
	if _, err := g.onBrick(0).Lookup(g.ctx, "/d/f"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("brick 0 has /d/f (%v): the test needs it stale", err)
	}
	for _, p := range []string{"/d/f", "/d/never"} {
		if _, err := g.r.Lookup(g.ctx, p); !errors.Is(err, syscall.ENOTCONN) {
			t.Errorf("lookup of %s with one brick of three up: %v, want ENOTCONN", p, err)
		}
	}
	if f, err := g.r.Open(g.ctx, "/d/f", syscall.O_RDONLY); !errors.Is(err, syscall.ENOTCONN) {
		if err == nil {
			f.Release(g.ctx)
		}
		t.Errorf("open of /d/f with one brick of three up: %v, want ENOTCONN", err)
	}
	if a, err := g.r.Lookup(g.ctx, "/d"); err != nil || !a.IsDir() {
		t.Errorf("lookup of /d with one brick of three up: %v; want its attributes", err)
	}
	if err := g.r.Rename(g.ctx, "/d/f", "/d/g", 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("rename of /d/f with one brick of three up: %v, want EROFS", err)
	}
	if err := g.r.Unlink(g.ctx, "/d/f"); !errors.Is(err, syscall.EROFS) {
		t.Errorf("unlink of /d/f with one brick of three up: %v, want EROFS", err)
	}
	if err := g.writeFile("/d/new", []byte("x")); !errors.Is(err, syscall.EROFS) {
		t.Errorf("create with one brick of three up: %v, want EROFS", err)
	}
	g.revive(1)
	if got, err := g.readFile("/d/f"); err != nil || string(got) != "made while brick 0 was down" {
		t.Errorf("read with a quorum back: %q, %v", got, err)
	}
}

// A name removed while a brick was away must not come back from it.
func TestStaleNameIsNotResurrected(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	if err := g.writeFile("/gone", []byte("x")); err != nil {
		t.Fatal(err)
	}
	g.kill(0)
	if err := g.r.Unlink(g.ctx, "/gone"); err != nil {
		t.Fatal(err)
	}
	g.revive(0)
	if _, err := g.r.Lookup(g.ctx, "/gone"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup of a name deleted while brick 0 was down: %v, want ENOENT", err)
	}
	if _, err := g.onBrick(0).Lookup(g.ctx, "/gone"); err != nil {
		t.Fatalf("brick 0 should still hold the stale name until heal: %v", err)
	}
	ents, err := layer.ReadDirAll(g.ctx, g.r, "/")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name == "gone" {
			t.Fatal("readdir lists a name deleted while a brick was down")
		}
	}
}

// The arbiter holds names and metadata but not data, and is never read.
func TestArbiterHoldsNoData(t *testing.T) {
	g := newRig(t, 3, true, Options{})
	if err := g.writeFile("/f", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	a, err := g.onBrick(2).Lookup(g.ctx, "/f")
	if err != nil || a.Size != 0 {
		t.Fatalf("arbiter copy: size %d, %v; want an empty file", a.Size, err)
	}
	for k := 0; k < 8; k++ {
		got, err := g.readFile("/f")
		if err != nil || string(got) != "hello" {
			t.Fatalf("read: %q %v", got, err)
		}
	}
	if a, err := g.r.Lookup(g.ctx, "/f"); err != nil || a.Size != 5 {
		t.Fatalf("lookup: size %d %v, want 5", a.Size, err)
	}
	// Data brick 0 away, then data brick 1 away and 0 back: the arbiter
	// knows 0 is behind, and no good data copy is up.
	g.kill(0)
	if err := g.writeFile("/f", []byte("newer")); err != nil {
		t.Fatal(err)
	}
	g.revive(0)
	g.kill(1)
	if got, err := g.readFile("/f"); err == nil {
		t.Fatalf("read %q with the only current data copy down; want an error", got)
	}
	if err := g.writeFile("/f", []byte("x")); err == nil {
		t.Fatal("write accepted with the only current data copy down")
	}
}

// With quorum none a lone replica accepts writes (split-brain is then
// possible; the operator chose it).
func TestQuorumNone(t *testing.T) {
	g := newRig(t, 2, false, Options{Quorum: QuorumNone})
	g.kill(0)
	if err := g.writeFile("/f", []byte("x")); err != nil {
		t.Fatalf("write with quorum none and one replica up: %v", err)
	}
	if p := g.pending(1, "/f"); p != Bit(0) {
		t.Fatalf("pending %b, want %b", p, Bit(0))
	}
}

// Replica 2 with quorum auto: the first brick alone is a quorum, the
// second alone is not.
func TestQuorumAutoReplica2(t *testing.T) {
	g := newRig(t, 2, false, Options{})
	g.kill(1)
	if err := g.writeFile("/a", []byte("x")); err != nil {
		t.Fatalf("replica 2, first brick up: %v", err)
	}
	g.revive(1)
	g.kill(0)
	if err := g.writeFile("/b", []byte("x")); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("replica 2, only the second brick up: %v, want EROFS", err)
	}
}

// A change that only a minority of the set could do fails with EIO even
// when the others up refused only because their copies are stale (found
// by the simulation, sim/): brick 2 missed mkdir /d, brick 0 is down, so a
// create in /d lands on brick 1 alone. Acknowledged, it would live on one
// replica: a later quorum of bricks 0 and 2 would not see it.
func TestChangeOnMinorityIsNotAcknowledged(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	g.kill(2)
	if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	g.revive(2)
	g.kill(0)
	err := g.writeFile("/d/f", []byte("x"))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("create in a directory only brick 1 of the two up has: %v, want EIO", err)
	}
	if m := g.pending(1, "/d"); !m.Has(0) || !m.Has(2) {
		t.Fatalf("brick 1 blames %b for /d, want bricks 0 and 2", m)
	}
}

// When every replica refuses a change, the good copies' reason is the
// answer, not the first replica's (found by the simulation: a stale copy
// without a distribute pointer said ENOENT where the good ones said
// EREMOTE, and a truncate of an existing file failed): brick 0 missed
// mkdir /d and a file in it, so it says ENOENT to rmdir /d where the
// others say ENOTEMPTY.
func TestStaleCopysRefusalDoesNotCount(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	g.kill(0)
	if _, err := g.r.Mkdir(g.ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := g.writeFile("/d/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	g.revive(0)
	if err := g.r.Rmdir(g.ctx, "/d"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir of a directory with a file, which brick 0 missed: %v, want ENOTEMPTY", err)
	}
}

// A read-only open tries the replica the path hashes to; if that one is
// stale and lacks the name, a good one is opened, and its refusal is the
// answer: EREMOTE for a distribute pointer, not the stale copy's ENOENT
// (found by the simulation: a file renamed across sets could not be read
// while a brick that missed the rename was up). Each replica in turn is
// the stale one, so that one of them is the one the path hashes to.
func TestOpenAnswersGoodReplicasRefusal(t *testing.T) {
	for stale := range 3 {
		g := newRig(t, 3, false, Options{})
		g.kill(stale)
		in := layer.MknodIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: syscall.S_IFREG | 01000, Linkto: "elsewhere"}
		if _, err := g.r.Mknod(g.ctx, "/p", in); err != nil {
			t.Fatal(err)
		}
		g.revive(stale)
		if _, err := g.r.Open(g.ctx, "/p", syscall.O_RDONLY); !errors.Is(err, syscall.EREMOTE) {
			t.Fatalf("brick %d stale: open of a pointer: %v, want EREMOTE", stale, err)
		}
	}
}

// An open for writing that a stale replica answers with EREMOTE (it
// still has an old distribute pointer of the name, which the others
// replaced with a file while it was down) opens the file (found by the
// simulation: a write failed with EREMOTE).
func TestStalePointerDoesNotHideTheFile(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	in := layer.MknodIn{Owner: layer.Owner{Gfid: layer.NewGfid()}, Mode: syscall.S_IFREG | 01000, Linkto: "elsewhere"}
	if _, err := g.r.Mknod(g.ctx, "/p", in); err != nil {
		t.Fatal(err)
	}
	g.kill(0)
	if err := g.r.Unlink(g.ctx, "/p"); err != nil {
		t.Fatal(err)
	}
	if err := g.writeFile("/p", []byte("data")); err != nil {
		t.Fatal(err)
	}
	g.revive(0)
	f, err := g.r.Open(g.ctx, "/p", syscall.O_WRONLY)
	if err != nil {
		t.Fatalf("open for writing with a stale pointer on brick 0: %v", err)
	}
	f.Release(g.ctx)
}

// A replica set that never had a quorum up waits for its connections
// only while they are coming up (ConnectWait from New): a graph built
// during an outage (a mount following a new spec) must not make every
// operation wait ConnectWait. The set here was made long ago (born moved
// back) and has lost its quorum before its first operation: the lookup
// fails at once, not after the 10 s it would wait when new.
func TestNoQuorumFailsFastOnceConnectWaitPassed(t *testing.T) {
	g := newRig(t, 3, false, Options{})
	g.kill(1)
	g.kill(2)
	var children []Child
	for i, c := range g.set.Clients {
		children = append(children, Child{Name: g.set.Name(i), Layer: c, Up: c.Connected})
	}
	r, err := New(children, Options{ConnectWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.born = time.Now().Add(-time.Minute)
	start := time.Now()
	if _, err := r.Lookup(g.ctx, "/d"); err == nil {
		t.Errorf("lookup of /d without a quorum answered")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("lookup without a quorum took %v: it waited for connections long after the set was made", d)
	}
}
