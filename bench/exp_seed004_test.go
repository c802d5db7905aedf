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
	w, r, err := parallelWriteRead(context.Background(), dirs, 2, 1<<20)
	if err != nil || w <= 0 || r <= 0 {
		t.Fatalf("write %v read %v: %v", w, r, err)
	}
	left, _ := filepath.Glob(filepath.Join(root, "*", "*"))
	if len(left) != 0 {
		t.Errorf("files left: %v", left)
	}
}
