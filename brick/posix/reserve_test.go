package posix

import (
	"errors"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

func TestReserveOf(t *testing.T) {
	parse := func(v string) Reserve {
		t.Helper()
		r, err := ParseReserve(v)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		r           Reserve
		total, want uint64
	}{
		{Reserve{}, 24 << 20, minReserve},
		{Reserve{}, 10 << 30, 10 << 30 / 100},
		{Reserve{}, 1 << 50, maxReserve},
		{parse("5"), 1 << 50, 1 << 50 / 20}, // no upper bound once set
		{parse("5%"), 10 << 30, 10 << 30 / 20},
		{parse("0"), 10 << 30, minReserve}, // never below the marks' room
		{parse("100"), 10 << 30, 10 << 30},
		{parse("10GB"), 1 << 50, 10 << 30},
		{parse("500mb"), 1 << 40, 500 << 20},
		{parse("0KB"), 1 << 40, minReserve},
	} {
		if got := c.r.of(c.total); got != c.want {
			t.Errorf("reserve %+v of %d bytes: %d, want %d", c.r, c.total, got, c.want)
		}
	}
	for _, bad := range []string{"", "-1", "101", "x", "1.5GB", "10PB", "10 %%"} {
		if _, err := ParseReserve(bad); err == nil {
			t.Errorf("storage.reserve %q accepted", bad)
		}
	}
}

// Below its reserve a brick refuses new data and new inodes with ENOSPC,
// and still takes what records the volume's state (marks) and what frees
// space or changes metadata: pointers, xattrs, renames, removals.
func TestReserveKeepsRoomForMarks(t *testing.T) {
	s, _ := newBrick(t, "")
	if r := s.reserve.Load(); r < minReserve {
		t.Fatalf("reserve %d", r)
	}
	f, a, err := s.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	if _, err := s.Mkdir(ctx, "/e", layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	s.SetReserve(1 << 62) // more than any disk: below it
	if _, err := f.Write(ctx, []byte("data"), 0); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write below the reserve: %v, want ENOSPC", err)
	}
	if err := f.Fallocate(ctx, 0, 0, 4096); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("fallocate below the reserve: %v, want ENOSPC", err)
	}
	if _, _, err := s.Create(ctx, "/g", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644}); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("create below the reserve: %v, want ENOSPC", err)
	}
	if _, err := s.Mkdir(ctx, "/d", layer.MkdirIn{Mode: 0o755}); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("mkdir below the reserve: %v, want ENOSPC", err)
	}
	if _, err := s.Symlink(ctx, "/l", layer.SymlinkIn{Target: "f"}); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("symlink below the reserve: %v, want ENOSPC", err)
	}
	// What exists answers as it would with room.
	if g, _, err := s.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644}); err != nil {
		t.Errorf("open by create of an existing file below the reserve: %v", err)
	} else {
		g.Release(ctx)
	}
	if _, _, err := s.Create(ctx, "/f", layer.CreateIn{Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644}); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("exclusive create of an existing file below the reserve: %v, want EEXIST", err)
	}
	if _, err := s.Mkdir(ctx, "/e", layer.MkdirIn{Mode: 0o755}); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("mkdir of an existing directory below the reserve: %v, want EEXIST", err)
	}
	if err := s.MarkPending(ctx, "/f", a.Gfid, 2); err != nil {
		t.Errorf("mark below the reserve: %v", err)
	}
	// replicate's Missed marks a file open with a write of no bytes.
	if _, err := f.Write(layer.WithTxn(ctx, layer.Txn{Pending: 4}), nil, 0); err != nil {
		t.Errorf("write of no bytes (a mark) below the reserve: %v", err)
	} else if st, err := f.Getattr(ctx); err != nil || st.Pending&4 == 0 {
		t.Errorf("write of no bytes below the reserve: pending %b, %v; want the mark recorded", st.Pending, err)
	}
	if _, err := s.Mknod(ctx, "/p", layer.MknodIn{Linkto: "b2"}); err != nil {
		t.Errorf("pointer below the reserve: %v", err)
	}
	if err := s.Setxattr(ctx, "/f", "user.x", []byte("y"), 0); err != nil {
		t.Errorf("setxattr below the reserve: %v", err)
	}
	if err := s.Rename(ctx, "/p", "/q", 0); err != nil {
		t.Errorf("rename below the reserve: %v", err)
	}
	if err := s.Unlink(ctx, "/q"); err != nil {
		t.Errorf("unlink below the reserve: %v", err)
	}
	s.SetReserve(minReserve)
	if _, err := f.Write(ctx, []byte("data"), 0); err != nil {
		t.Errorf("write with room again: %v", err)
	}
}
