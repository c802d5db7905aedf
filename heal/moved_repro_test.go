package heal_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/heal"
	"github.com/mortarfs/mortar/layer"
)

// An index entry /d/f whose parent /d has since become a regular file on
// every replica: the healer should drop the entry.
func TestStaleEntryUnderFile(t *testing.T) {
	ctx := context.Background()
	var set heal.Set
	var stores []*posix.Store
	for i := range 2 {
		dir := t.TempDir()
		if err := posix.Mark(dir, "v", true); err != nil {
			t.Fatal(err)
		}
		s, err := posix.New(dir, posix.Options{VolumeID: "v"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
		set = append(set, heal.Replica{Name: dir, Layer: s})
		_ = i
	}
	g := layer.NewGfid()
	fg := layer.NewGfid()
	for _, s := range stores {
		if _, err := s.Mkdir(ctx, "/d", layer.MkdirIn{Owner: layer.Owner{Gfid: g}, Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
		f, _, err := s.Create(ctx, "/d/f", layer.CreateIn{Owner: layer.Owner{Gfid: fg}, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		f.Release(ctx)
	}
	// replica 0 marks /d/f as missed by replica 1, then /d becomes a file everywhere.
	if err := stores[0].MarkPending(ctx, "/d/f", layer.Gfid{}, 2); err != nil {
		t.Fatal(err)
	}
	for _, s := range stores {
		os.Remove(filepath.Join(s.Root(), "d", "f"))
		os.Remove(filepath.Join(s.Root(), "d"))
	}
	h, err := heal.New([]heal.Set{set}, heal.Options{Interval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stores {
		f, _, err := s.Create(ctx, "/d", layer.CreateIn{Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		f.Release(ctx)
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	go h.Run(rctx)
	<-rctx.Done()
	info, _ := h.Info(ctx)
	if info.Pending() != 0 {
		t.Fatalf("index entries left: %+v (failed %d)", info.Replicas, info.Failed)
	}
}
