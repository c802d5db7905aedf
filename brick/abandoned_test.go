package brick

import (
	"context"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// A client whose connection ends with files open: those it wrote (or
// truncated, or opened with O_TRUNC) are marked layer.Dirty on a brick of a replicated set; those
// it only read, or wrote and closed, are not; a brick not replicated
// marks nothing.
func TestAbandonedWritesMarked(t *testing.T) {
	for _, replicated := range []bool{true, false} {
		st, _ := newStore(t)
		ctx := context.Background()
		for _, name := range []string{"/written", "/truncated", "/opened-trunc", "/read", "/closed"} {
			f, _, err := st.Create(ctx, name, layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
			if err != nil {
				t.Fatal(err)
			}
			f.Release(ctx)
		}
		ts := startServerWith(t, st, DefaultLimits(), BrickOptions{MarkAbandoned: replicated})
		c := dial(t, ts.addr)
		for name, req := range map[string]wire.Request{
			"/written":   {Op: wire.OpWrite, Data: []byte("x")},
			"/truncated": {Op: wire.OpFsetattr, Setattr: layer.SetattrIn{Valid: layer.SetSize, Size: 5}},
			"/read":      {Op: wire.OpFgetattr},
		} {
			req.Fh = c.open(name)
			if errno, _ := c.call(&req); errno != 0 {
				t.Fatalf("%s %s: %v", wire.OpName(req.Op), name, errno)
			}
		}
		if errno, _ := c.call(&wire.Request{Op: wire.OpOpen, Path: "/opened-trunc", Flags: syscall.O_RDWR | syscall.O_TRUNC}); errno != 0 {
			t.Fatal(errno)
		}
		fh := c.open("/closed")
		if errno, _ := c.call(&wire.Request{Op: wire.OpWrite, Fh: fh, Data: []byte("y")}); errno != 0 {
			t.Fatal(errno)
		}
		if errno, _ := c.call(&wire.Request{Op: wire.OpRelease, Fh: fh}); errno != 0 {
			t.Fatal(errno)
		}
		c.nc.Close()
		ts.log.waitLog(t, "released files of closed connection", "count=4")
		want := map[string]bool{"/written": replicated, "/truncated": replicated, "/opened-trunc": replicated, "/read": false, "/closed": false}
		for name, dirty := range want {
			a, err := st.Lookup(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Pending&layer.Dirty != 0; got != dirty || a.Pending&^layer.Dirty != 0 {
				t.Errorf("replicated %v: %s pending %#x, want Dirty %v", replicated, name, a.Pending, dirty)
			}
		}
		if replicated {
			idx, err := st.HealIndex(ctx, layer.Gfid{}, 10)
			if err != nil || len(idx) != 3 {
				t.Errorf("heal index after the client went: %v, %v; want the three files written", idx, err)
			}
		}
	}
}

// A connection that ends without a goodbye leaves the directories whose
// names it changed, and the inodes whose metadata it changed by path,
// marked Dirty on a replicated brick; one that says
// goodbye, one of an older client (which never says it) and one to an
// unreplicated brick leave nothing; a dispersed brick marks the names
// only.
func TestAbandonedNamesMarked(t *testing.T) {
	rep, disp := BrickOptions{MarkAbandoned: true}, BrickOptions{MarkAbandonedNames: true}
	for _, tc := range []struct {
		name    string
		opts    BrickOptions
		version uint32
		goodbye bool
		marked  bool // the names
		meta    bool // the metadata
	}{
		{"no goodbye", rep, wire.Version, false, true, true},
		{"dispersed, no goodbye", disp, wire.Version, false, true, false},
		{"goodbye", rep, wire.Version, true, false, false},
		{"older client", rep, goodbyeVersion - 1, false, false, false},
		{"unreplicated", BrickOptions{}, wire.Version, false, false, false},
	} {
		st, _ := newStore(t)
		ctx := context.Background()
		for _, d := range []string{"/a", "/b", "/quiet"} {
			if _, err := st.Mkdir(ctx, d, layer.MkdirIn{Mode: 0o755}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.Mknod(ctx, "/meta", layer.MknodIn{Mode: syscall.S_IFREG | 0o644}); err != nil {
			t.Fatal(err)
		}
		ts := startServerWith(t, st, DefaultLimits(), tc.opts)
		c := dialVersion(t, ts.addr, tc.version)
		for _, req := range []wire.Request{
			{Op: wire.OpMknod, Path: "/a/f", Mode: syscall.S_IFREG | 0o644},
			{Op: wire.OpRename, Path: "/a/f", Path2: "/b/f"},
			{Op: wire.OpLookup, Path: "/quiet"},
			{Op: wire.OpSetattr, Path: "/meta", Setattr: layer.SetattrIn{Valid: layer.SetMode, Mode: 0o600}},
		} {
			if errno, _ := c.call(&req); errno != 0 {
				t.Fatalf("%s: %s %s: %v", tc.name, wire.OpName(req.Op), req.Path, errno)
			}
		}
		if tc.goodbye {
			if errno, _ := c.call(&wire.Request{Op: wire.OpGoodbye}); errno != 0 {
				t.Fatalf("goodbye: %v", errno)
			}
		}
		c.nc.Close()
		switch {
		case tc.meta:
			ts.log.waitLog(t, "went away without a goodbye", "count=3")
		case tc.marked:
			ts.log.waitLog(t, "went away without a goodbye", "count=2")
		default:
			ts.log.waitLog(t, "client gone")
		}
		for d, want := range map[string]bool{"/a": tc.marked, "/b": tc.marked, "/meta": tc.meta, "/quiet": false, "/": false} {
			a, err := st.Lookup(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Pending&layer.Dirty != 0; got != want {
				t.Errorf("%s: %s pending %#x, want Dirty %v", tc.name, d, a.Pending, want)
			}
		}
	}
}
