package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// localTarget is a plain directory on the disk that holds the bricks: the
// baseline every other target is compared with. Layouts mean nothing to
// it (its rows say "local disk"); it has no client cache to turn off, no
// encryption and no network.
type localTarget struct{}

// NewLocalTarget returns the local file system target.
func NewLocalTarget() Target { return localTarget{} }

func (localTarget) Name() string { return "local" }

func (localTarget) Available(ctx context.Context) error { return nil }

func (localTarget) Mount(ctx context.Context, work string, layout Layout, opts SetupOptions) (Mount, error) {
	if opts.Encryption {
		return nil, Unsupported("the local disk is not encrypted here (the baseline)")
	}
	dir := filepath.Join(work, "local")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &localMount{dir: dir, version: fsDescription(dir)}, nil
}

type localMount struct{ dir, version string }

func (m *localMount) Dir() string     { return m.dir }
func (m *localMount) Version() string { return m.version }
func (m *localMount) Close() error    { return os.RemoveAll(m.dir) }

// fsDescription names the file system dir is on and its device, from
// /proc/self/mounts (the longest mount point that contains dir): "ext4 on
// /dev/vda".
func fsDescription(dir string) string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return "unknown file system"
	}
	best, desc := "", "unknown file system"
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mp := f[1]
		if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, desc = mp, fmt.Sprintf("%s on %s", f[2], f[0])
		}
	}
	return desc
}
