package quickread

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// An open for reading right after a lookup is served from the content
// the lookup brought: no operation reaches the child, reads are short at
// the end and empty past it, Getattr answers the lookup's attributes.
func TestOpenAfterLookupFromMemory(t *testing.T) {
	r := newRig(t, Options{})
	r.put(r.l, "/f", "hello, world")
	a := r.lookup("/f")
	r.counts.Reset()
	f := r.open("/f")
	buf := make([]byte, 5)
	if n, err := f.Read(r.ctx, buf, 7); err != nil || string(buf[:n]) != "world" {
		t.Errorf("read at 7: %q, %v", buf[:n], err)
	}
	if n, err := f.Read(r.ctx, make([]byte, 100), 10); err != nil || n != 2 {
		t.Errorf("read across the end: %d, %v; want 2", n, err)
	}
	if n, err := f.Read(r.ctx, buf, 12); err != nil || n != 0 {
		t.Errorf("read at the end: %d, %v; want 0, nil", n, err)
	}
	if n, err := f.Read(r.ctx, buf, 100); err != nil || n != 0 {
		t.Errorf("read past the end: %d, %v; want 0, nil", n, err)
	}
	if got, err := f.Getattr(r.ctx); err != nil || got != a {
		t.Errorf("getattr: %+v, %v; want the lookup's %+v", got, err, a)
	}
	r.ok(f.Flush(r.ctx, 1), "flush")
	r.ok(f.Release(r.ctx), "release")
	if n := r.counts.Total(); n != 0 {
		t.Errorf("%d operations reached the child, want none", n)
	}
}

// An entry serves one open; the next one opens the child's file. An empty
// file is served too; a large one, a directory, or an open that may
// write, never.
func TestOneOpenPerLookup(t *testing.T) {
	r := newRig(t, Options{MaxFileSize: 10})
	r.put(r.l, "/f", "abc")
	r.put(r.l, "/empty", "")
	r.put(r.l, "/big", "0123456789A")
	for _, p := range []string{"/f", "/empty", "/big"} {
		r.lookup(p)
	}
	r.counts.Reset()
	if got := r.cat("/f"); got != "abc" {
		t.Errorf("first cat: %q", got)
	}
	if got := r.cat("/empty"); got != "" {
		t.Errorf("empty file: %q", got)
	}
	r.wantOpens(0, "first opens")
	if got := r.cat("/f"); got != "abc" {
		t.Errorf("second cat: %q", got)
	}
	r.wantOpens(1, "a second open of one lookup")
	if got := r.cat("/big"); got != "0123456789A" {
		t.Errorf("big file: %q", got)
	}
	r.wantOpens(2, "a file over the size limit")

	for _, flags := range []uint32{syscall.O_RDWR, syscall.O_RDONLY | syscall.O_DIRECT, syscall.O_RDONLY | syscall.O_SYNC} {
		r.lookup("/f")
		r.counts.Reset()
		f, err := r.l.Open(r.ctx, "/f", flags)
		r.ok(err, "open")
		f.Release(r.ctx)
		r.wantOpens(1, "open with flags "+flagName(flags))
	}
}

func flagName(flags uint32) string {
	switch {
	case flags&syscall.O_DIRECT != 0:
		return "O_DIRECT"
	case flags&syscall.O_SYNC == syscall.O_SYNC:
		return "O_SYNC"
	}
	return "O_RDWR"
}

// Content older than the timeout serves no open, and an open file's reads
// go to the child once its content is older than the timeout.
func TestTimeout(t *testing.T) {
	r := newRig(t, Options{Timeout: time.Second})
	r.put(r.l, "/f", "old")
	r.lookup("/f")
	r.clock.Advance(time.Second)
	r.counts.Reset()
	if got := r.cat("/f"); got != "old" {
		t.Errorf("cat: %q", got)
	}
	r.wantOpens(1, "an open a timeout after the lookup")

	r.lookup("/f")
	r.clock.Advance(999 * time.Millisecond)
	f := r.open("/f")
	defer f.Release(r.ctx)
	r.put(r.store, "/f", "new") // another client
	if got := r.read(f); got != "old" {
		t.Errorf("read within the timeout: %q, want the content looked up", got)
	}
	r.counts.Reset()
	r.clock.Advance(time.Millisecond)
	if got := r.read(f); got != "new" {
		t.Errorf("read after the timeout: %q, want the brick's", got)
	}
	r.wantOpens(1, "reads of an open file after the timeout")
}

// Every change made through the layer to a name or its inode is seen by
// the open that follows a lookup made before it.
func TestChangesThroughTheLayer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *rig)
		want   string // "": the name is gone
	}{
		{"write through another open file", func(r *rig) {
			f, err := r.l.Open(r.ctx, "/f", syscall.O_WRONLY)
			r.ok(err, "open")
			defer f.Release(r.ctx)
			_, err = f.Write(r.ctx, []byte("X"), 0)
			r.ok(err, "write")
		}, "Xld content"},
		{"write through a file created", func(r *rig) { r.put(r.l, "/f", "created again") }, "created again"},
		{"truncate by path", func(r *rig) {
			_, err := r.l.Setattr(r.ctx, "/f", layer.SetattrIn{Valid: layer.SetSize, Size: 3})
			r.ok(err, "truncate")
		}, "old"},
		{"open with O_TRUNC", func(r *rig) {
			f, err := r.l.Open(r.ctx, "/f", syscall.O_WRONLY|syscall.O_TRUNC)
			r.ok(err, "open")
			f.Release(r.ctx)
		}, ""},
		{"rename over it", func(r *rig) {
			r.put(r.store, "/g", "renamed")
			r.ok(r.l.Rename(r.ctx, "/g", "/f", 0), "rename")
		}, "renamed"},
		{"unlink", func(r *rig) { r.ok(r.l.Unlink(r.ctx, "/f"), "unlink") }, "gone"},
		{"truncate of a hard link", func(r *rig) {
			_, err := r.l.Link(r.ctx, "/f", "/h")
			r.ok(err, "link")
			r.lookup("/f")
			_, err = r.l.Setattr(r.ctx, "/h", layer.SetattrIn{Valid: layer.SetSize, Size: 1})
			r.ok(err, "truncate")
		}, "o"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Options{})
			r.put(r.store, "/f", "old content")
			r.lookup("/f")
			tc.change(r)
			f, err := r.l.Open(r.ctx, "/f", syscall.O_RDONLY)
			if tc.want == "gone" {
				if err != syscall.ENOENT {
					t.Fatalf("open after unlink: %v, want ENOENT", err)
				}
				return
			}
			r.ok(err, "open")
			defer f.Release(r.ctx)
			if got := r.read(f); got != tc.want {
				t.Errorf("read after the change: %q, want %q", got, tc.want)
			}
		})
	}
}

// A file served from memory that the layer then changes (through another
// open file) reads the change.
func TestOpenFileSeesChangesThroughTheLayer(t *testing.T) {
	r := newRig(t, Options{})
	f := r.served("/f", "before")
	w, err := r.l.Open(r.ctx, "/f", syscall.O_WRONLY)
	r.ok(err, "open for writing")
	_, err = w.Write(r.ctx, []byte("AFTER!"), 0)
	r.ok(err, "write")
	w.Release(r.ctx)
	if got := r.read(f); got != "AFTER!" {
		t.Errorf("read: %q, want the write made through the layer", got)
	}
}

// A lookup that runs while the layer changes something keeps no content:
// what it read may predate the change.
func TestLookupDuringChangeKeepsNothing(t *testing.T) {
	r := newRig(t, Options{})
	r.put(r.l, "/f", "old")
	r.looker.hook = func() {
		r.looker.hook = nil
		r.ok(r.l.Unlink(r.ctx, "/other-name"), "unlink")
	}
	r.put(r.l, "/other-name", "x")
	r.lookup("/f")
	r.counts.Reset()
	r.cat("/f")
	r.wantOpens(1, "an open after a lookup that ran during a change")
}

// A lock on a file served from memory opens the child's file, and from
// then on its reads see other clients' writes; later opens are never
// served from memory (closing them must drop the process's locks).
func TestLockOpensTheChild(t *testing.T) {
	r := newRig(t, Options{})
	f := r.served("/f", "old")
	r.counts.Reset()
	r.ok(f.Setlk(r.ctx, 1, layer.Lock{Type: syscall.F_RDLCK, End: ^uint64(0), Pid: 1}, false), "setlk")
	r.wantOpens(1, "setlk")
	r.put(r.store, "/f", "new")
	if got := r.read(f); got != "new" {
		t.Errorf("read after the lock: %q, want another client's write", got)
	}
	if r.counts.Count("Read") == 0 {
		t.Error("reads after the lock did not reach the child")
	}
	r.lookup("/f")
	r.counts.Reset()
	g := r.open("/f")
	r.ok(g.Flush(r.ctx, 1), "flush")
	g.Release(r.ctx)
	r.wantOpens(1, "an open once locks are in use")
	if r.counts.Count("Flush") != 1 {
		t.Errorf("flush did not reach the child")
	}
}

// A file served from memory whose name now holds another inode is stale
// when it needs the child's file.
func TestReplacedNameIsStale(t *testing.T) {
	r := newRig(t, Options{AnchorAfter: -1}) // not opened behind: see TestAnchoredFileReadsOn
	f := r.served("/f", "old")
	r.ok(r.store.Unlink(r.ctx, "/f"), "unlink")
	r.put(r.store, "/f", "another inode")
	if err := f.Fsync(r.ctx, false); err != syscall.ESTALE {
		t.Errorf("fsync: %v, want ESTALE", err)
	}
}

// A file served from memory that stays open is opened behind (anchored):
// past the timeout it reads on from its inode although another client
// renamed the name and put another file there, as tail -f reads on from
// a log being rotated. (Before, such a file was stale: ESTALE.)
func TestAnchoredFileReadsOn(t *testing.T) {
	r := newRig(t, Options{AnchorAfter: time.Millisecond})
	f := r.served("/log", "old lines")
	deadline := time.Now().Add(10 * time.Second)
	for !anchored(f) {
		if time.Now().After(deadline) {
			t.Fatal("the file served from memory was not opened behind")
		}
		time.Sleep(time.Millisecond)
	}
	r.ok(r.store.Rename(r.ctx, "/log", "/log.1", 0), "rename by another client")
	r.put(r.store, "/log", "a new log")
	r.clock.Advance(time.Hour) // the content timed out: reads go to the child
	if got := r.read(f); got != "old lines" {
		t.Fatalf("read past the timeout: %q, want the inode's own \"old lines\"", got)
	}
}

// anchored reports whether f has the child's file behind it.
func anchored(f layer.File) bool {
	qf := f.(*file)
	qf.mu.Lock()
	defer qf.mu.Unlock()
	return qf.anchor != nil || qf.real != nil
}

// The cache keeps at most MaxEntries entries and MaxBytes bytes; the
// oldest go first.
func TestBounds(t *testing.T) {
	r := newRig(t, Options{MaxEntries: 2, MaxBytes: 10})
	for _, p := range []string{"/a", "/b", "/c"} {
		r.put(r.l, p, "1234")
		r.lookup(p)
	}
	r.counts.Reset()
	r.cat("/a")
	r.wantOpens(1, "the oldest of three entries with room for two")
	r.cat("/b")
	r.cat("/c")
	r.wantOpens(1, "the newest two")
	r.put(r.l, "/big", "12345678")
	for _, p := range []string{"/a", "/big"} {
		r.lookup(p)
	}
	r.counts.Reset()
	r.cat("/a")
	r.cat("/big")
	r.wantOpens(1, "entries over the byte bound")
}

// An unlink or a rename through the layer of a file open from memory
// leaves the open file on its inode: past the timeout its reads come from
// the inode (POSIX: an unlinked or renamed open file reads on).
func TestUnlinkAndRenameOfAnOpenFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		apply func(r *rig)
		now   string // where the inode is afterwards ("": nowhere)
	}{
		{"unlink", func(r *rig) { r.ok(r.l.Unlink(r.ctx, "/f"), "unlink") }, ""},
		{"rename", func(r *rig) { r.ok(r.l.Rename(r.ctx, "/f", "/g", 0), "rename") }, "/g"},
		{"rename of its directory", func(r *rig) { r.ok(r.l.Rename(r.ctx, "/d", "/e", 0), "rename") }, "/e/f"},
		{"rename over it", func(r *rig) {
			r.put(r.l, "/other", "another inode")
			r.ok(r.l.Rename(r.ctx, "/other", "/f", 0), "rename")
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Options{})
			p := "/f"
			if tc.name == "rename of its directory" {
				_, err := r.l.Mkdir(r.ctx, "/d", layer.MkdirIn{Mode: 0o755})
				r.ok(err, "mkdir")
				p = "/d/f"
			}
			f := r.served(p, "content")
			tc.apply(r)
			if tc.now != "" {
				r.put(r.store, tc.now, "new content") // another client writes the inode where it is now
			}
			r.clock.Advance(time.Hour)
			want := "content"
			if tc.now != "" {
				want = "new content"
			}
			if got := r.read(f); got != want {
				t.Errorf("read after the %s: %q, want %q", tc.name, got, want)
			}
		})
	}
}

// A change another client made, told (Forget), is seen at once, within
// the timeout: a write drops the content a lookup brought and makes a
// file open from memory read the brick; a name change drops the content
// of the name but leaves files open from memory on their inode.
func TestForgetTakesOthersChangesAtOnce(t *testing.T) {
	r := newRig(t, Options{Timeout: time.Minute})
	f := r.served("/f", "old")
	r.put(r.store, "/f", "new") // another client
	r.l.Forget(layer.Change{Path: "/f"})
	if got := r.read(f); got != "new" {
		t.Errorf("read of a file open from memory after its inode changed: %q, want the brick's", got)
	}

	r.put(r.l, "/g", "old")
	r.lookup("/g")
	r.put(r.store, "/g", "new")
	r.l.Forget(layer.Change{Path: "/g"})
	r.counts.Reset()
	if got := r.cat("/g"); got != "new" {
		t.Errorf("cat after the inode changed: %q", got)
	}
	r.wantOpens(1, "an open after the inode changed")

	h := r.served("/h", "mine")
	r.ok(r.store.Rename(r.ctx, "/g", "/h", 0), "rename by another client")
	r.l.Forget(layer.Change{Path: "/h", Entry: true})
	if got := r.read(h); got != "mine" {
		t.Errorf("a file open from memory after its name was replaced: %q, want its own inode's", got)
	}
	r.lookup("/h")
	r.l.Forget(layer.ChangedAll)
	r.counts.Reset()
	if got := r.cat("/h"); got != "new" {
		t.Errorf("cat after ChangedAll: %q", got)
	}
	r.wantOpens(1, "an open after ChangedAll")
}

// blockOpen is a child whose Open, once armed, waits to be let go.
type blockOpen struct {
	*looker
	armed   atomic.Bool
	opening chan struct{} // an armed Open has begun
	letGo   chan struct{}
}

func (b *blockOpen) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	if b.armed.Load() {
		b.opening <- struct{}{}
		<-b.letGo
	}
	return b.looker.Open(ctx, path, flags)
}

// Forget never waits for a file opening its child over the network: it
// runs on a brick connection's reader, which that open waits on.
func TestForgetDoesNotWaitForAnOpen(t *testing.T) {
	r := newRig(t, Options{Timeout: time.Minute})
	b := &blockOpen{looker: r.looker, opening: make(chan struct{}), letGo: make(chan struct{})}
	l := New(b, Options{Timeout: time.Minute, Now: r.clock.Now})
	r.put(r.store, "/f", "old")
	if _, err := l.Lookup(r.ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	f, err := l.Open(r.ctx, "/f", syscall.O_RDONLY)
	r.ok(err, "open from memory")
	defer f.Release(r.ctx)
	l.Forget(layer.Change{Path: "/f"}) // the next read goes to the brick
	b.armed.Store(true)
	read := make(chan error, 1)
	go func() { _, err := f.Read(r.ctx, make([]byte, 8), 0); read <- err }()
	<-b.opening // the file opens its child, holding its lock
	forgot := make(chan struct{})
	go func() { l.Forget(layer.Change{Path: "/f"}); close(forgot) }()
	select {
	case <-forgot:
	case <-time.After(5 * time.Second):
		t.Fatal("Forget waited for an open in progress")
	}
	close(b.letGo)
	if err := <-read; err != nil {
		t.Fatal(err)
	}
}
