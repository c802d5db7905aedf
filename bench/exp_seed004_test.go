package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

type fakeMount struct{ dir string }

func (m fakeMount) Dir() string     { return m.dir }
func (m fakeMount) Version() string { return "fake" }
func (m fakeMount) Close() error    { return nil }

// fakeMounter's extra clients are plain directories.
type fakeMounter struct {
	fakeMount
	mounted *[]string
}

func (m fakeMounter) MountClient(ctx context.Context, dir string) (Mount, error) {
	*m.mounted = append(*m.mounted, dir)
	return fakeMount{dir}, nil
}

func TestClientDirs(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	base := filepath.Join(root, "mnt")
	os.MkdirAll(base, 0o755)

	dirs, closeAll, err := clientDirs(ctx, "local", fakeMount{base}, 3)
	if err != nil || len(dirs) != 3 || filepath.Dir(dirs[2]) != base {
		t.Fatalf("local: %v %v", dirs, err)
	}
	closeAll()

	if _, _, err := clientDirs(ctx, "mortar", fakeMount{base}, 2); !IsUnsupported(err) {
		t.Errorf("a mount without MountClient: err %v, want unsupported", err)
	}
	if dirs, _, err := clientDirs(ctx, "mortar", fakeMount{base}, 1); err != nil || len(dirs) != 1 {
		t.Errorf("one client needs no second mount: %v %v", dirs, err)
	}

	var mounted []string
	dirs, _, err = clientDirs(ctx, "mortar", fakeMounter{fakeMount{base}, &mounted}, 3)
	if err != nil || len(dirs) != 3 || len(mounted) != 2 || mounted[0] != filepath.Join(root, "client2") {
		t.Fatalf("mounter: %v %v %v", dirs, mounted, err)
	}
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Errorf("client dir %s: %v", d, err)
		}
	}
}

func TestParallelWriteRead(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("dropping caches needs root")
	}
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
	for _, d := range dirs {
		os.MkdirAll(d, 0o755)
	}
	var written []string
	var per []int
	st, err := parallelWriteRead(context.Background(), dirs, 2, 1<<20, func(p []string) {
		written, per = p, filesPerBrick(root, 2, p)
	})
	if err != nil || st.Write <= 0 || st.Read <= 0 || len(written) != 4 {
		t.Fatalf("%+v, %d written: %v", st, len(written), err)
	}
	if st.WriteCPU < 0 || st.WriteCPU > 100 || st.ReadCPU < 0 || st.ReadCPU > 100 {
		t.Errorf("CPU busy: %+v", st)
	}
	if per != nil {
		t.Errorf("files per brick of a work directory without bricks: %v, want nil", per)
	}
	left, _ := filepath.Glob(filepath.Join(root, "*", "*"))
	if len(left) != 0 {
		t.Errorf("files left: %v", left)
	}
}

func TestLinkShare(t *testing.T) {
	for _, c := range []struct {
		rate, link float64
		n          int
		want       float64
	}{
		{100, 25, 4, 100},
		{42.5, 25, 2, 85},
		{10, 0, 2, 0},
		{10, 25, 0, 0},
	} {
		if got := linkShare(c.rate, c.n, c.link); got != c.want {
			t.Errorf("linkShare(%v, %d, %v) = %v, want %v", c.rate, c.n, c.link, got, c.want)
		}
	}
}

func TestPlacementBound(t *testing.T) {
	for _, c := range []struct {
		per  []int
		want float64
	}{
		{[]int{4, 4, 4, 4}, 100},
		{[]int{6, 4, 3, 3}, 25 * 16.0 / 6},
		{[]int{16}, 25},
		{nil, 0},
		{[]int{0, 0}, 0},
	} {
		if got := placementBound(c.per, 25); got != c.want {
			t.Errorf("placementBound(%v, 25) = %v, want %v", c.per, got, c.want)
		}
	}
}

func TestFilesPerBrick(t *testing.T) {
	work := t.TempDir()
	for b, names := range map[string][]string{"b1": {"x", "y"}, "b3": {"z"}} {
		os.MkdirAll(filepath.Join(work, b), 0o755)
		for _, n := range names {
			os.WriteFile(filepath.Join(work, b, n), nil, 0o644)
		}
	}
	paths := []string{"/mnt/x", "/mnt/y", "/mnt/z"}
	if got := filesPerBrick(work, 3, paths); len(got) != 3 || got[0] != 2 || got[1] != 0 || got[2] != 1 {
		t.Errorf("files per brick: %v, want [2 0 1]", got)
	}
	if got := filesPerBrick(work, 3, append(paths, "/mnt/nowhere")); got != nil {
		t.Errorf("a file on no brick: %v, want nil", got)
	}
}
