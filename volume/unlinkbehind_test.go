package volume

import (
	"errors"
	"github.com/mortarfs/mortar/volume/options"
	"strconv"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// madeTree has client l make /d with n files in it (closed), under the
// directory's lease.
func madeTree(t *testing.T, l layer.Layer, n int) {
	t.Helper()
	if _, err := l.Mkdir(cbCtx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := create(t, l, "/d/f"+strconv.Itoa(i), "x").Release(cbCtx); err != nil {
			t.Fatal(err)
		}
	}
}

// failUnlinks makes b's removals of files fail with err.
func failUnlinks(b *cbBrick, err error) {
	b.fault.Fail("Unlink", err)
	b.fault.Fail("UnlinkData", err)
}

// The removal of a name the client made under a lease is answered
// before the bricks have done it: one they fail is answered all the
// same, and then the name is still there, the rmdir of its directory
// fails with ENOTEMPTY, and the next Sync reports the failure once.
func TestUnlinkBehindFailureReportedLater(t *testing.T) {
	spec, bricks := createBehindVolume(t, Replicate, 3)
	a := client(t, spec)
	madeTree(t, a, 1)
	for _, b := range bricks {
		failUnlinks(b, syscall.EIO)
	}
	if err := a.Unlink(cbCtx, "/d/f0"); err != nil {
		t.Fatalf("unlink in a leased directory: %v; want it answered before it is sent", err)
	}
	if err := a.Rmdir(cbCtx, "/d"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir after a removal that failed: %v, want ENOTEMPTY", err)
	}
	if _, err := a.Lookup(cbCtx, "/d/f0"); err != nil {
		t.Fatalf("the name whose removal failed: %v, want it still there", err)
	}
	if err := layer.Sync(cbCtx, a); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync after a removal that failed: %v, want EIO", err)
	}
	if err := layer.Sync(cbCtx, a); err != nil {
		t.Fatalf("a second Sync: %v, want the failure reported once", err)
	}
	for _, b := range bricks {
		b.fault.Clear()
	}
	if err := a.Unlink(cbCtx, "/d/f0"); err != nil {
		t.Fatal(err)
	}
	if err := a.Rmdir(cbCtx, "/d"); err != nil {
		t.Fatalf("rmdir once the removal went through: %v", err)
	}
}

// What the client does after removals answered early sees them done:
// a lookup, a create of the same name, a listing, an rmdir; and another
// client's access to the directory (which recalls the lease) too.
func TestUnlinkBehindSeenAfterwards(t *testing.T) {
	spec, bricks := createBehindVolume(t, Replicate, 3)
	a, b := client(t, spec), client(t, spec)
	const n = 50
	madeTree(t, a, n)
	for i := range n / 2 {
		if err := a.Unlink(cbCtx, "/d/f"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Lookup(cbCtx, "/d/f0"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup of a name removed: %v", err)
	}
	if err := create(t, a, "/d/f1", "again").Release(cbCtx); err != nil {
		t.Fatalf("create of a name just removed: %v", err)
	}
	for i := n / 2; i < n; i++ {
		if err := a.Unlink(cbCtx, "/d/f"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := layer.ReadDirAll(cbCtx, b, "/d")
	if err != nil || len(ents) != 1 || ents[0].Name != "f1" {
		t.Fatalf("the other client lists %d names (%v), want f1 alone", len(ents), err)
	}
	for _, br := range bricks {
		if got := br.count.Count("Unlink") + br.count.Count("UnlinkData"); got != n {
			t.Errorf("a brick got %d unlinks, want %d", got, n)
		}
	}
	// A name the client did not make (the lease went back at the other
	// client's listing) is removed at once: its error is the unlink's.
	if err := a.Unlink(cbCtx, "/d/missing"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("unlink of a missing name: %v", err)
	}
	if err := a.Unlink(cbCtx, "/d/f1"); err != nil {
		t.Fatal(err)
	}
	if err := a.Rmdir(cbCtx, "/d"); err != nil {
		t.Fatal(err)
	}
}

// With performance.unlink-behind off, every removal goes at once.
func TestUnlinkBehindOff(t *testing.T) {
	spec, bricks := createBehindVolume(t, Replicate, 3)
	spec.Options[options.OptUnlinkBehind] = "off"
	a := client(t, spec)
	madeTree(t, a, 1)
	failUnlinks(bricks[0], syscall.EIO)
	failUnlinks(bricks[1], syscall.EIO)
	if err := a.Unlink(cbCtx, "/d/f0"); err == nil {
		t.Fatal("unlink failing on two of three bricks answered success with unlink-behind off")
	}
}

// Unlink of a directory fails with EISDIR, also of one the client made
// in a leased directory (client.Volume.Remove falls back to Rmdir on
// EISDIR: answered nil, it removed nothing; found by review).
func TestUnlinkBehindNotForDirectories(t *testing.T) {
	spec, _ := createBehindVolume(t, Replicate, 3)
	a := client(t, spec)
	if _, err := a.Mkdir(cbCtx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Mkdir(cbCtx, "/d/sub", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlink(cbCtx, "/d/sub"); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("unlink of a directory made under the lease: %v, want EISDIR", err)
	}
	if err := layer.Sync(cbCtx, a); err != nil {
		t.Fatalf("Sync after: %v", err)
	}
	if err := a.Rmdir(cbCtx, "/d/sub"); err != nil {
		t.Fatal(err)
	}
	if err := a.Rmdir(cbCtx, "/d"); err != nil {
		t.Fatal(err)
	}
}

// A removal that fails leaves the name, and the caches above write-behind
// (nl-cache), told it was removed, forget that: it is found again.
func TestUnlinkBehindFailureForgottenByCaches(t *testing.T) {
	spec, bricks := createBehindVolume(t, Replicate, 3)
	a := client(t, spec)
	madeTree(t, a, 1)
	for _, b := range bricks {
		failUnlinks(b, syscall.EIO)
	}
	if err := a.Unlink(cbCtx, "/d/f0"); err != nil {
		t.Fatal(err)
	}
	if err := layer.Sync(cbCtx, a); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync: %v", err)
	}
	ents, _ := layer.ReadDirAll(cbCtx, a, "/d")
	_, lerr := a.Lookup(cbCtx, "/d/f0")
	t.Logf("listing after the failed removal: %d names; lookup: %v", len(ents), lerr)
	if lerr != nil {
		t.Errorf("lookup of the name whose removal failed (it is on the bricks and listed): %v", lerr)
	}
}

// Readlink waits for the removals under way, as every operation does.
func TestUnlinkBehindReadlink(t *testing.T) {
	spec, _ := createBehindVolume(t, Replicate, 3)
	a := client(t, spec)
	if _, err := a.Mkdir(cbCtx, "/d", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	stale := 0
	for i := range 50 {
		p := "/d/s" + strconv.Itoa(i)
		if _, err := a.Symlink(cbCtx, p, layer.SymlinkIn{Target: "t"}); err != nil {
			t.Fatal(err)
		}
		if err := a.Unlink(cbCtx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Readlink(cbCtx, p); err == nil {
			stale++
		}
	}
	t.Logf("readlink right after unlink found the symlink %d of 50 times", stale)
	if stale > 0 {
		t.Errorf("readlink of a removed symlink succeeded %d times", stale)
	}
}

// tar x and cp -a set a directory's times after its content: the lease
// stays, so the removals of what they made there still go behind (a
// removal the bricks fail is answered all the same).
func TestUnlinkBehindAfterOwnSetattr(t *testing.T) {
	spec, bricks := createBehindVolume(t, Replicate, 3)
	a := client(t, spec)
	madeTree(t, a, 1)
	set := layer.SetattrIn{Valid: layer.SetMode | layer.SetAtime | layer.SetMtime, Mode: 0o750,
		Atime: layer.Timespec{Sec: 1000}, Mtime: layer.Timespec{Sec: 2000}}
	if _, err := a.Setattr(cbCtx, "/d", set); err != nil {
		t.Fatal(err)
	}
	for _, b := range bricks {
		failUnlinks(b, syscall.EIO)
	}
	if err := a.Unlink(cbCtx, "/d/f0"); err != nil {
		t.Fatalf("unlink after the directory's own setattr: %v; want it answered before it is sent", err)
	}
	if err := layer.Sync(cbCtx, a); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync: %v, want the removal's EIO", err)
	}
}
