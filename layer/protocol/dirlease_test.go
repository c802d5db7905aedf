package protocol

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick"
	"github.com/mortarfs/mortar/layer"
)

// recalls records the directories a client is told to hand back, and can
// hold the hand-back until released.
type recalls struct {
	mu    sync.Mutex
	dirs  []string
	gate  chan struct{} // nil: hand back at once
	seen  chan string
	hooks func(dir string)
}

func newRecalls() *recalls { return &recalls{seen: make(chan string, 16)} }

func (r *recalls) recall(dir string) {
	r.mu.Lock()
	r.dirs = append(r.dirs, dir)
	gate, hook := r.gate, r.hooks
	r.mu.Unlock()
	if hook != nil {
		hook(dir)
	}
	r.seen <- dir
	if gate != nil {
		<-gate
	}
}

func (r *recalls) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.dirs)
}

// leaseClient is a client of b that asks for directory leases.
func leaseClient(t *testing.T, b *testBrick, r *recalls) *Client {
	return b.client(t, Config{DirLeases: true, OnRecall: r.recall})
}

// leasePair is a brick with limits, a client asking for leases whose
// recalls r records, and a plain client.
func leasePair(t *testing.T, limits brick.Limits) (b *testBrick, r *recalls, c1, c2 *Client) {
	b = newTestBrick(t)
	b.srv.SetLimits(limits)
	r = newRecalls()
	return b, r, leaseClient(t, b, r), b.client(t, Config{})
}

func mkdir(t *testing.T, l layer.Layer, path string) layer.Attr {
	t.Helper()
	a, err := l.Mkdir(context.Background(), path, layer.MkdirIn{Mode: 0o755})
	if err != nil {
		t.Fatalf("mkdir %s: %v", path, err)
	}
	return a
}

func owns(c *Client, path string) bool {
	_, ok := c.OwnsName(path)
	return ok
}

// A directory a client makes is leased to it: it owns every name it did
// not make there, none it made, none elsewhere; a file made in one go
// carries its bytes and attributes.
func TestDirLeaseGrantedAtMkdir(t *testing.T) {
	ctx := context.Background()
	b := newTestBrick(t)
	r := newRecalls()
	c := leaseClient(t, b, r)
	a := mkdir(t, c, "/d")
	if dir, ok := c.OwnsName("/d/x"); !ok || dir.Gfid != a.Gfid {
		t.Fatalf("OwnsName in a directory just made: %v, %+v", ok, dir)
	}
	if owns(c, "/x") || owns(c, "/d/sub/x") {
		t.Fatal("owns a name in a directory it was not leased")
	}
	set := layer.SetattrIn{Valid: layer.SetMtime, Mtime: layer.Timespec{Sec: 1234567}}
	f, fa, err := c.Create(ctx, "/d/x", layer.CreateIn{Flags: syscall.O_WRONLY | syscall.O_EXCL, Mode: 0o640,
		Data: []byte("made in one go"), Set: set})
	if err != nil {
		t.Fatal(err)
	}
	f.Release(ctx)
	if fa.Size != 14 || fa.Mtime.Sec != 1234567 || fa.Mode&0o777 != 0o640 {
		t.Fatalf("made file's attributes: %+v", fa)
	}
	if owns(c, "/d/x") {
		t.Fatal("owns a name it made")
	}
	if !owns(c, "/d/y") {
		t.Fatal("lost the lease by making a name")
	}
	if err := c.Unlink(ctx, "/d/x"); err != nil {
		t.Fatal(err)
	}
	if !owns(c, "/d/x") {
		t.Fatal("does not own a name it removed")
	}
	if got := r.got(); len(got) != 0 {
		t.Fatalf("recalled with no other client: %v", got)
	}
}

// Another client's operation in the directory recalls the lease: the
// holder hands the directory back first (it sends what it held), and
// only then does the operation run — it sees what the holder sent.
func TestDirLeaseRecalledByAnotherClient(t *testing.T) {
	ctx := context.Background()
	_, r, c1, c2 := leasePair(t, brick.Limits{})
	mkdir(t, c1, "/d")
	r.hooks = func(dir string) {
		// What a holder does on a recall: make what it held back.
		f, _, err := c1.Create(ctx, "/d/held", layer.CreateIn{Flags: syscall.O_WRONLY | syscall.O_EXCL, Mode: 0o644, Data: []byte("x")})
		if err != nil {
			t.Errorf("making a held file on recall: %v", err)
			return
		}
		f.Release(ctx)
	}
	a, err := c2.Lookup(ctx, "/d/held")
	if err != nil || a.Size != 1 {
		t.Fatalf("the other client's lookup: %+v, %v (the holder's file was not there first)", a, err)
	}
	if got := r.got(); !slices.Equal(got, []string{"/d"}) {
		t.Fatalf("recalls: %v", got)
	}
	waitFor(t, 5*time.Second, "the lease to end", func() bool { return !owns(c1, "/d/y") })
	// Once returned, the other client's operations go without waiting.
	if _, err := c2.Lookup(ctx, "/d/y"); err != syscall.ENOENT {
		t.Fatalf("lookup of a missing name: %v", err)
	}
	if got := r.got(); len(got) != 1 {
		t.Fatalf("recalled twice: %v", got)
	}
}

// Every kind of access recalls: the directory itself, a name in it, a
// listing, and a rename of a directory above it.
func TestDirLeaseRecallTriggers(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		op   func(l layer.Layer) error
	}{
		{"lookup of the directory", func(l layer.Layer) error { _, err := l.Lookup(ctx, "/p/d"); return err }},
		{"create in it", func(l layer.Layer) error {
			f, _, err := l.Create(ctx, "/p/d/n", layer.CreateIn{Flags: syscall.O_WRONLY, Mode: 0o644})
			if err == nil {
				f.Release(ctx)
			}
			return err
		}},
		{"listing", func(l layer.Layer) error { _, err := l.Readdir(ctx, "/p/d", 0, 100); return err }},
		{"chmod", func(l layer.Layer) error {
			_, err := l.Setattr(ctx, "/p/d", layer.SetattrIn{Valid: layer.SetMode, Mode: 0o700})
			return err
		}},
		{"rename of its parent", func(l layer.Layer) error { return l.Rename(ctx, "/p", "/q", 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r, c1, c2 := leasePair(t, brick.Limits{})
			mkdir(t, c2, "/p")
			mkdir(t, c1, "/p/d")
			if !owns(c1, "/p/d/x") {
				t.Fatal("no lease")
			}
			if err := tc.op(c2); err != nil {
				t.Fatal(err)
			}
			if got := r.got(); !slices.Equal(got, []string{"/p/d"}) {
				t.Fatalf("recalls: %v", got)
			}
			if owns(c1, "/p/d/x") {
				t.Fatal("still owns names after the recall")
			}
		})
	}
}

// An operation of another client on the parent, or elsewhere, does not
// recall; nor do the holder's own.
func TestDirLeaseNotRecalledByOthersElsewhere(t *testing.T) {
	ctx := context.Background()
	_, r, c1, c2 := leasePair(t, brick.Limits{})
	mkdir(t, c1, "/d")
	mkdir(t, c2, "/e")
	if _, err := c2.Readdir(ctx, "/", 0, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Lookup(ctx, "/e/x"); err != syscall.ENOENT {
		t.Fatal(err)
	}
	if _, err := c1.Readdir(ctx, "/d", 0, 100); err != nil {
		t.Fatal(err)
	}
	writeFile(t, c1, "/d/f", "x").Release(ctx)
	if got := r.got(); len(got) != 0 {
		t.Fatalf("recalled: %v", got)
	}
	if !owns(c1, "/d/g") {
		t.Fatal("lost the lease")
	}
}

// A holder that does not hand back in time is cut off, and the waiting
// operation goes on.
func TestDirLeaseHolderCutOff(t *testing.T) {
	ctx := context.Background()
	_, r, c1, c2 := leasePair(t, brick.Limits{RecallTimeout: 300 * time.Millisecond})
	r.gate = make(chan struct{})
	defer close(r.gate)
	mkdir(t, c1, "/d")
	start := time.Now()
	if _, err := c2.Lookup(ctx, "/d/x"); err != syscall.ENOENT {
		t.Fatalf("lookup: %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("went on after %v, before the holder was cut off", d)
	}
	if owns(c1, "/d/x") {
		t.Fatal("the cut-off holder still owns names")
	}
}

// A failed operation in a leased directory ends the lease: the client no
// longer knows every name there.
func TestDirLeaseEndsOnFailure(t *testing.T) {
	ctx := context.Background()
	b := newTestBrick(t)
	c := leaseClient(t, b, newRecalls())
	mkdir(t, c, "/d")
	if err := c.Unlink(ctx, "/d/missing"); err != syscall.ENOENT {
		t.Fatalf("unlink of a missing name: %v", err)
	}
	if owns(c, "/d/x") {
		t.Fatal("still owns names after a failed operation")
	}
}

// A client that asks for no leases gets none.
func TestDirLeaseOnlyAsked(t *testing.T) {
	b := newTestBrick(t)
	c := b.client(t, Config{})
	mkdir(t, c, "/d")
	if owns(c, "/d/x") {
		t.Fatal("a lease nobody asked for")
	}
}

// slowMkdir is a brick layer whose Mkdir waits until it is let go.
type slowMkdir struct {
	layer.Layer
	started, release chan struct{}
}

func (s *slowMkdir) Mkdir(ctx context.Context, path string, in layer.MkdirIn) (layer.Attr, error) {
	close(s.started)
	<-s.release
	return s.Layer.Mkdir(ctx, path, in)
}

// A directory another client touches while it is being made is not
// leased (that client may have made a name in it the maker does not
// know of), and that client does not wait for it.
func TestDirLeaseSpoiledWhileMade(t *testing.T) {
	ctx := context.Background()
	b := newTestBrick(t)
	slow := &slowMkdir{Layer: b.store, started: make(chan struct{}), release: make(chan struct{})}
	b.srv.Add("brick-1", testVolume, slow)
	c1 := leaseClient(t, b, newRecalls())
	c2 := b.client(t, Config{})
	made := make(chan error, 1)
	go func() {
		_, err := c1.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755})
		made <- err
	}()
	<-slow.started
	if _, err := c2.Lookup(ctx, "/d/x"); err != syscall.ENOENT {
		t.Fatalf("lookup while the directory is made: %v", err)
	}
	close(slow.release)
	if err := <-made; err != nil {
		t.Fatal(err)
	}
	if owns(c1, "/d/x") {
		t.Fatal("leased a directory another client touched while it was made")
	}
}

// A session keeps at most maxHeldDirs leases: making more directories
// hands back the one used least lately, so every new directory is still
// leased. (Found by review: past the brick's 4096 a connection got no
// more, for good.)
func TestDirLeasesHandedBackPastLimit(t *testing.T) {
	_, r, c1, _ := leasePair(t, brick.Limits{})
	for i := range maxHeldDirs + 10 {
		mkdir(t, c1, "/d"+strconv.Itoa(i))
	}
	if !owns(c1, "/d"+strconv.Itoa(maxHeldDirs+9)+"/x") {
		t.Fatal("the last directory made is not leased")
	}
	if owns(c1, "/d0/x") {
		t.Fatal("the lease used least lately was kept past the limit")
	}
	waitFor(t, 5*time.Second, "the handed-back directories to be recalled locally", func() bool { return len(r.got()) == 10 })
}

// The client's own rename of a leased directory hands the lease back
// before it is sent: what was held back in the directory reaches the
// bricks at its old path first.
func TestDirLeaseHandedBackBeforeOwnRename(t *testing.T) {
	ctx := context.Background()
	_, r, c1, _ := leasePair(t, brick.Limits{})
	mkdir(t, c1, "/d")
	var sent bool
	r.hooks = func(dir string) {
		f, _, err := c1.Create(ctx, "/d/held", layer.CreateIn{Flags: syscall.O_WRONLY | syscall.O_EXCL, Mode: 0o644, Data: []byte("x")})
		if err == nil {
			f.Release(ctx)
		}
		sent = err == nil
	}
	if err := c1.Rename(ctx, "/d", "/e", 0); err != nil {
		t.Fatal(err)
	}
	if !sent {
		t.Fatal("the lease was not handed back before the rename")
	}
	if a, err := c1.Lookup(ctx, "/e/held"); err != nil || a.Size != 1 {
		t.Fatalf("the held file after the rename: %+v %v", a, err)
	}
	if owns(c1, "/e/x") || owns(c1, "/d/x") {
		t.Fatal("owns names after renaming the directory")
	}
}

// The holder's own attribute change of a leased directory (tar and cp -a
// set a directory's times, mode and owner after its content) keeps the
// lease: what was held back there is sent first (a create after the
// change would move the times again), and the directory's mode and group
// the lease answers with are the new ones. A change that fails ends it.
func TestDirLeaseKeptAcrossOwnSetattr(t *testing.T) {
	ctx := context.Background()
	b := newTestBrick(t)
	r := newRecalls()
	c := leaseClient(t, b, r)
	mkdir(t, c, "/d")
	set := layer.SetattrIn{Valid: layer.SetMode | layer.SetGid | layer.SetMtime, Mode: 0o2770, Gid: 4242,
		Mtime: layer.Timespec{Sec: 1234567}}
	if _, err := c.Setattr(ctx, "/d", set); err != nil {
		t.Fatal(err)
	}
	if got := r.got(); !slices.Equal(got, []string{"/d"}) {
		t.Fatalf("held-back names sent before the change: %v, want [/d]", got)
	}
	dir, ok := c.OwnsName("/d/x")
	if !ok {
		t.Fatal("the lease was given up at the holder's own setattr")
	}
	if dir.Mode&0o7777 != 0o2770 || dir.Gid != 4242 {
		t.Fatalf("the lease's directory: mode %o gid %d, want 2770 and 4242", dir.Mode&0o7777, dir.Gid)
	}
	if _, err := c.Setattr(ctx, "/d", layer.SetattrIn{Valid: layer.SetSize, Size: 1}); err == nil {
		t.Fatal("truncating a directory succeeded")
	}
	if owns(c, "/d/x") {
		t.Fatal("still owns names after a failed setattr of the directory")
	}
}
