package mgmt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/healdaemon"
	"github.com/mortarfs/mortar/volume/options"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/volume"
)

// replicaVolume creates and starts a replica volume over new directories
// with the options given (key, value, ...), and returns its info and the
// directories.
func replicaVolume(t *testing.T, c *api.Client, name string, replica, arbiter, nbricks int, opts ...string) (api.VolumeInfo, []string) {
	t.Helper()
	ctx := ctxT(t)
	dirs := brickDirs(t, nbricks)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: name, Replica: replica, Arbiter: arbiter, Bricks: bricksOn(dirs), Force: true}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(opts); i += 2 {
		if _, err := c.Set(ctx, name, opts[i], opts[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	vi, err := c.Start(ctx, name, false)
	if err != nil {
		t.Fatal(err)
	}
	return vi, dirs
}

// mountVolume builds a client graph of the started volume and waits until
// it can look up the root.
func mountVolume(t *testing.T, c *api.Client, name string) layer.Layer {
	t.Helper()
	ctx := ctxT(t)
	spec, err := c.Spec(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	g, err := volume.Build(spec, volume.BuildOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	waitFor(t, 10*time.Second, "the volume's root and every brick", func() error {
		if _, err := g.Top.Lookup(ctx, "/"); err != nil {
			return err
		}
		if !g.Connected() {
			return errors.New("not connected to every brick yet")
		}
		return nil
	})
	return g.Top
}

// waitFor polls check until it succeeds, failing the test with its last
// error after within.
func waitFor(t *testing.T, within time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v after %v", what, err, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeFile creates (or truncates) path on l with data.
func writeFile(ctx context.Context, l layer.Layer, path string, data []byte) error {
	f, _, err := l.Create(ctx, path, layer.CreateIn{Flags: syscall.O_WRONLY | syscall.O_TRUNC, Mode: 0o644})
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.Write(ctx, data, 0); err != nil {
		f.Release(ctx)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Release(ctx)
}

func mustWrite(t *testing.T, l layer.Layer, path string, data []byte) {
	t.Helper()
	if err := writeFile(ctxT(t), l, path, data); err != nil {
		t.Fatal(err)
	}
}

func mustMkdir(t *testing.T, l layer.Layer, path string) {
	t.Helper()
	if _, err := l.Mkdir(ctxT(t), path, layer.MkdirIn{Mode: 0o755}); err != nil {
		t.Fatalf("mkdir %s: %v", path, err)
	}
}

// brickTree describes every inode of a brick directory outside .mortar:
// type, mode, gfid, and the checksum of a regular file's content.
func brickTree(root string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == posix.HiddenDir {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		gfid := make([]byte, 16)
		if _, err := unix.Lgetxattr(p, posix.XattrGfid, gfid); err != nil {
			return fmt.Errorf("%s: gfid: %w", rel, err)
		}
		desc := fmt.Sprintf("%v %x", info.Mode(), gfid)
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
		out[rel] = desc
		return nil
	})
	return out, err
}

// sameBricks reports how the trees of dirs differ, or nil.
func sameBricks(dirs []string) error {
	ref, err := brickTree(dirs[0])
	if err != nil {
		return err
	}
	for _, d := range dirs[1:] {
		got, err := brickTree(d)
		if err != nil {
			return err
		}
		for p, w := range ref {
			if got[p] != w {
				return fmt.Errorf("%s: %s is %q on %s, %q on %s", d, p, got[p], d, w, dirs[0])
			}
		}
		for p := range got {
			if _, ok := ref[p]; !ok {
				return fmt.Errorf("%s: %s is only there, not on %s", d, p, dirs[0])
			}
		}
	}
	return nil
}

// onBricks waits until name is on every brick of dirs with the same gfid
// and data: a mount that was not connected to a brick yet when it wrote
// leaves the copy there to the heal daemon.
func onBricks(t *testing.T, dirs []string, name, data string) {
	t.Helper()
	waitFor(t, 10*time.Second, name+" on every brick", func() error {
		var first []byte
		for _, d := range dirs {
			gfid := make([]byte, 16)
			if _, err := unix.Lgetxattr(filepath.Join(d, name), posix.XattrGfid, gfid); err != nil {
				return err
			}
			if first != nil && !bytes.Equal(gfid, first) {
				return fmt.Errorf("gfid %x on %s, %x on %s", gfid, d, first, dirs[0])
			}
			first = gfid
			if b, err := os.ReadFile(filepath.Join(d, name)); err != nil || string(b) != data {
				return fmt.Errorf("%s on %s: %q %v", name, d, b, err)
			}
		}
		return nil
	})
}

// waitHealed polls heal info until no brick lists anything, every brick
// is online and the bricks hold identical trees.
func waitHealed(t *testing.T, c *api.Client, name string, dirs []string) api.HealInfo {
	t.Helper()
	var hi api.HealInfo
	waitFor(t, 30*time.Second, "heal of "+name, func() error {
		var err error
		if hi, err = c.HealInfo(ctxT(t), name); err != nil {
			return err
		}
		for _, b := range hi.Bricks {
			if !b.Online || b.Error != "" || b.Entries != 0 {
				return fmt.Errorf("heal info: brick %+v", b)
			}
		}
		if hi.Full != nil && hi.Full.Running {
			return errors.New("full heal still running")
		}
		return sameBricks(dirs)
	})
	return hi
}

// Writes while a brick is down are listed by heal info, and healed once
// the brick is back.
func TestHealAfterBrickDown(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	vi, dirs := replicaVolume(t, c, "gv0", 3, 0, 3, options.OptHealInterval, "0.2")
	vol := mountVolume(t, c, "gv0")
	mustWrite(t, vol, "/before", []byte("old"))
	if err := n.KillBrick(vi.Bricks[1].ID); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 3<<20+17)
	for i := range big {
		big[i] = byte(rand.IntN(256))
	}
	mustMkdir(t, vol, "/dir")
	mustWrite(t, vol, "/dir/file", []byte("hello"))
	mustWrite(t, vol, "/dir/big", big)
	mustWrite(t, vol, "/before", []byte("new contents"))

	hi, err := c.HealInfo(ctx, "gv0")
	if err != nil {
		t.Fatal(err)
	}
	if len(hi.Bricks) != 3 || hi.Bricks[1].Online || hi.Bricks[1].Name != "localhost:"+dirs[1] {
		t.Fatalf("heal info bricks with brick 2 down: %+v", hi.Bricks)
	}
	for _, i := range []int{0, 2} {
		b := hi.Bricks[i]
		if !b.Online || b.Entries == 0 || b.Entries != len(b.Paths) || !slices.Contains(b.Paths, "/before") || !slices.Contains(b.Paths, "/") {
			t.Errorf("heal info of a brick that saw the writes: %+v", b)
		}
	}
	if _, err := c.Start(ctx, "gv0", true); err != nil {
		t.Fatal(err)
	}
	hi = waitHealed(t, c, "gv0", dirs)
	if hi.Healed == 0 || hi.LastScan.IsZero() {
		t.Errorf("heal info counters after the heal: %+v", hi)
	}
	if b, _ := os.ReadFile(filepath.Join(dirs[1], "dir", "big")); !bytes.Equal(b, big) {
		t.Errorf("big file on the healed brick: %d bytes", len(b))
	}
}

// A trigger heals at once, without waiting for the interval; a full heal
// runs in the background and shows in heal info.
func TestHealTriggerAndFull(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	vi, dirs := replicaVolume(t, c, "gv0", 3, 1, 3, options.OptHealInterval, "3600")
	vol := mountVolume(t, c, "gv0")
	if err := n.KillBrick(vi.Bricks[0].ID); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, vol, "/f", []byte("while down"))
	if _, err := c.Start(ctx, "gv0", true); err != nil {
		t.Fatal(err)
	}
	// The daemon's client must see the brick again before a scan can
	// heal it; trigger until it did.
	waitFor(t, 20*time.Second, "triggered heal", func() error {
		if err := c.Heal(ctx, "gv0"); err != nil {
			t.Fatal(err)
		}
		hi, err := c.HealInfo(ctx, "gv0")
		if err == nil && hi.Pending() != 0 {
			err = fmt.Errorf("%d entries", hi.Pending())
		}
		return err
	})
	fh, err := c.HealFull(ctx, "gv0")
	if err != nil || fh.Started.IsZero() {
		t.Fatalf("full heal: %+v, %v", fh, err)
	}
	hi := waitHealed(t, c, "gv0", dirs[:2])
	if hi.Full == nil || hi.Full.Running || hi.Full.Error != "" || hi.Full.Finished.Before(hi.Full.Started) || hi.Full.Looked == 0 {
		t.Fatalf("full heal in heal info: %+v", hi.Full)
	}
	if hi.HealedBytes == 0 || hi.Since.IsZero() {
		t.Errorf("heal info counts %d bytes healed since %v", hi.HealedBytes, hi.Since)
	}
	if b, _ := os.ReadFile(filepath.Join(dirs[2], "f")); len(b) != 0 {
		t.Errorf("the arbiter holds data: %q", b)
	}
}

// A brick whose disk was replaced (an empty directory) is rebuilt by
// reset-brick; it can be named by another name of its host.
// wipeBrick kills brick i of vi (whose directories are dirs) and
// replaces its directory with an empty one, as a failed disk replaced.
func wipeBrick(t *testing.T, n *Node, vi api.VolumeInfo, dirs []string, i int) {
	t.Helper()
	if err := n.KillBrick(vi.Bricks[i].ID); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dirs[i]); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dirs[i], 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestResetBrickRebuilds(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	vi, dirs := replicaVolume(t, c, "gv0", 3, 0, 3)
	vol := mountVolume(t, c, "gv0")
	mustMkdir(t, vol, "/a")
	mustMkdir(t, vol, "/a/b")
	for i := range 5 {
		mustWrite(t, vol, fmt.Sprintf("/a/b/f%d", i), bytes.Repeat([]byte{byte(i)}, 1000*i))
	}
	wipeBrick(t, n, vi, dirs, 2)
	if _, err := c.Start(ctx, "gv0", true); err == nil || !strings.Contains(err.Error(), "not a brick of any volume") {
		t.Fatalf("start force on a wiped brick: %v", err)
	}
	if _, err := c.ResetBrick(ctx, "gv0", "127.0.0.1:"+dirs[2]); err != nil {
		t.Fatalf("reset-brick: %v", err)
	}
	waitHealed(t, c, "gv0", dirs)
	if st, _ := c.Status(ctx, "gv0"); !st.Bricks[2].Online {
		t.Fatalf("reset brick offline: %+v", st.Bricks[2])
	}
	// Again on the brick, now marked and full: refused, nothing touched.
	if _, err := c.ResetBrick(ctx, "gv0", "localhost:"+dirs[2]); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), `is not empty (it holds "a")`) {
		t.Fatalf("reset-brick of a brick with data: %v", err)
	}
	if err := sameBricks(dirs); err != nil {
		t.Fatal(err)
	}
}

func TestResetBrickRefusals(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	_, ddirs := replicaVolume(t, c, "dist", 0, 0, 2)
	vi, dirs := replicaVolume(t, c, "arb", 3, 1, 3)
	_, sdirs := replicaVolume(t, c, "stopped", 2, 0, 2)
	if _, err := c.Stop(ctx, "stopped"); err != nil {
		t.Fatal(err)
	}
	vol := mountVolume(t, c, "arb")
	mustWrite(t, vol, "/keep", []byte("data"))
	onBricks(t, dirs[:1], "keep", "data") // the mount may not have reached it yet
	cases := []struct {
		vol, brick string
		marker     error
		msg        string
	}{
		{"dist", "localhost:" + ddirs[0], api.ErrInvalid, "volume dist is neither replicated nor dispersed: its bricks hold the only copy"},
		{"stopped", "localhost:" + sdirs[0], api.ErrState, "volume stopped is not started"},
		{"nope", "localhost:" + dirs[0], api.ErrNotFound, "volume nope does not exist"},
		{"arb", "localhost:" + ddirs[0], api.ErrInvalid, "is not a brick of volume arb"},
		{"arb", "localhost:" + dirs[0], api.ErrInvalid, `is not empty (it holds "keep")`},
		{"arb", "localhost", api.ErrInvalid, "want host:/path"},
	}
	for _, tc := range cases {
		if _, err := c.ResetBrick(ctx, tc.vol, tc.brick); !errors.Is(err, tc.marker) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("reset-brick %s %s: %v; want %v with %q", tc.vol, tc.brick, err, tc.marker, tc.msg)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dirs[0], "keep")); err != nil || string(b) != "data" {
		t.Fatalf("a refused reset-brick touched the brick: %q %v", b, err)
	}
	// A directory that is gone, or holds another volume's mark.
	if err := n.KillBrick(vi.Bricks[1].ID); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dirs[1])
	if _, err := c.ResetBrick(ctx, "arb", "localhost:"+dirs[1]); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "does not exist: create the new, empty directory first") {
		t.Errorf("reset-brick of a missing directory: %v", err)
	}
	os.Mkdir(dirs[1], 0o755)
	posix.Mark(dirs[1], "another-volume", true)
	if _, err := c.ResetBrick(ctx, "arb", "localhost:"+dirs[1]); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "belongs to volume another-volume") {
		t.Errorf("reset-brick of another volume's brick: %v", err)
	}
	posix.Unmark(dirs[1])
	os.RemoveAll(filepath.Join(dirs[1], posix.HiddenDir))
	// The other data brick is down too: nothing to rebuild from; the
	// brick stays as it was (not marked, not started).
	if err := n.KillBrick(vi.Bricks[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResetBrick(ctx, "arb", "localhost:"+dirs[1]); !errors.Is(err, api.ErrState) || !strings.Contains(err.Error(), "no other data brick of the replica set") {
		t.Errorf("reset-brick with no data brick up: %v", err)
	}
	if mark, _ := posix.ReadMark(dirs[1]); mark != "" {
		t.Errorf("refused reset-brick marked the brick: %q", mark)
	}
	if st, _ := c.Status(ctx, "arb"); st.Bricks[1].Online {
		t.Errorf("refused reset-brick started the brick: %+v", st.Bricks[1])
	}
}

func TestHealRefusals(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	replicaVolume(t, c, "dist", 0, 0, 1)
	replicaVolume(t, c, "stopped", 2, 0, 2)
	if _, err := c.Stop(ctx, "stopped"); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func(name string) error{
		"heal":       func(name string) error { return c.Heal(ctx, name) },
		"heal full":  func(name string) error { _, err := c.HealFull(ctx, name); return err },
		"info":       func(name string) error { _, err := c.HealInfo(ctx, name); return err },
		"split list": func(name string) error { _, err := c.SplitBrain(ctx, name); return err },
		"resolve": func(name string) error {
			_, err := c.ResolveSplitBrain(ctx, name, api.SplitBrainRequest{Policy: api.PolicyLatestMtime, Path: "/f"})
			return err
		},
	}
	for what, call := range calls {
		if err := call("dist"); !errors.Is(err, api.ErrInvalid) || err.Error() != "volume dist is neither replicated nor dispersed: nothing to heal" {
			t.Errorf("%s of a distribute volume: %v", what, err)
		}
		if err := call("stopped"); !errors.Is(err, api.ErrState) || !strings.Contains(err.Error(), "volume stopped is not started") {
			t.Errorf("%s of a stopped volume: %v", what, err)
		}
		if err := call("nope"); !errors.Is(err, api.ErrNotFound) {
			t.Errorf("%s of a missing volume: %v", what, err)
		}
	}
}

// splitBrain makes path, created through vol, a split-brain: each brick
// of the replica 2 volume gets its own data and blames the other.
func splitBrain(t *testing.T, c *api.Client, vol layer.Layer, dirs []string, path string, data [2]string) {
	t.Helper()
	ctx := ctxT(t)
	mustWrite(t, vol, path, []byte("same"))
	onBricks(t, dirs, path, "same")
	waitFor(t, 10*time.Second, path+" healed", func() error {
		hi, err := c.HealInfo(ctx, "sb")
		for _, b := range hi.Bricks {
			if slices.Contains(b.Paths, path) {
				return fmt.Errorf("heal info: %+v", hi.Bricks)
			}
		}
		return err
	})
	spec, err := c.Spec(ctx, "sb")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		bc := brickClient(t, spec, i)
		if err := writeFile(ctx, bc, path, []byte(data[i])); err != nil {
			t.Fatal(err)
		}
		if err := bc.MarkPending(ctx, path, layer.Gfid{}, 1<<(1-i)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSplitBrain(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	vi, dirs := replicaVolume(t, c, "sb", 2, 0, 2, options.OptQuorumType, "none")
	vol := mountVolume(t, c, "sb")
	splitBrain(t, c, vol, dirs, "/f", [2]string{"first brick", "second"})
	splitBrain(t, c, vol, dirs, "/g", [2]string{"small", "the bigger copy"})
	mustWrite(t, vol, "/fine", []byte("no split"))

	sb, err := c.SplitBrain(ctx, "sb")
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.Entries) != 2 || sb.Entries[0].Path != "/f" || len(sb.Entries[0].Copies) != 2 {
		t.Fatalf("split-brain entries: %+v", sb.Entries)
	}
	if cp := sb.Entries[0].Copies[0]; cp.Brick != vi.Bricks[0].Name() || cp.Size != 11 || !slices.Equal(cp.Blames, []string{vi.Bricks[1].Name()}) {
		t.Errorf("split-brain copy: %+v", cp)
	}
	for _, b := range sb.Bricks {
		if !b.Online || b.Entries != 2 || !slices.Equal(b.Paths, []string{"/f", "/g"}) {
			t.Errorf("split-brain brick: %+v", b)
		}
	}

	refused := []struct {
		req api.SplitBrainRequest
		msg string
	}{
		{api.SplitBrainRequest{Policy: "newest", Path: "/f"}, `unknown split-brain policy "newest": use latest-mtime, bigger-file or source-brick`},
		{api.SplitBrainRequest{Policy: api.PolicyLatestMtime}, "needs the PATH of the file"},
		{api.SplitBrainRequest{Policy: api.PolicyBiggerFile, Path: "/f", Source: vi.Bricks[0].Name()}, "takes no source brick"},
		{api.SplitBrainRequest{Policy: api.PolicySourceBrick, Path: "/f"}, "needs the brick whose copies win"},
		{api.SplitBrainRequest{Policy: api.PolicySourceBrick, Source: "localhost:/elsewhere", Path: "/f"}, "localhost:/elsewhere is not a brick of volume sb"},
		{api.SplitBrainRequest{Policy: api.PolicyLatestMtime, Path: "/fine"}, "/fine is not in split-brain in volume sb"},
		{api.SplitBrainRequest{Policy: api.PolicyLatestMtime, Path: "relative"}, `path "relative"`},
	}
	for _, tc := range refused {
		if _, err := c.ResolveSplitBrain(ctx, "sb", tc.req); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("resolve %+v: %v; want %q", tc.req, err, tc.msg)
		}
	}

	paths, err := c.ResolveSplitBrain(ctx, "sb", api.SplitBrainRequest{Policy: api.PolicySourceBrick, Source: "127.0.0.1:" + dirs[1], Path: "/f/"})
	if err != nil || !slices.Equal(paths, []string{"/f"}) {
		t.Fatalf("resolve /f by source-brick: %v %v", paths, err)
	}
	paths, err = c.ResolveSplitBrain(ctx, "sb", api.SplitBrainRequest{Policy: api.PolicyBiggerFile, Path: "/g"})
	if err != nil || !slices.Equal(paths, []string{"/g"}) {
		t.Fatalf("resolve /g by bigger-file: %v %v", paths, err)
	}
	for _, d := range dirs {
		f, _ := os.ReadFile(filepath.Join(d, "f"))
		g, _ := os.ReadFile(filepath.Join(d, "g"))
		if string(f) != "second" || string(g) != "the bigger copy" {
			t.Errorf("%s after resolving: f %q, g %q", d, f, g)
		}
	}
	if sb, err := c.SplitBrain(ctx, "sb"); err != nil || len(sb.Entries) != 0 {
		t.Fatalf("split-brains after resolving: %+v %v", sb, err)
	}
	if _, err := c.ResolveSplitBrain(ctx, "sb", api.SplitBrainRequest{Policy: api.PolicySourceBrick, Source: vi.Bricks[0].Name()}); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "nothing is in split-brain in the replica set of brick") {
		t.Fatalf("resolve with nothing in split-brain: %v", err)
	}
}

// The heal daemon follows `volume set` of its options and stops with the
// volume.
func TestHealDaemonLifecycle(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	vi, _ := replicaVolume(t, c, "gv0", 2, 0, 2)
	daemon := func() *healdaemon.Daemon {
		n.runMu.Lock()
		defer n.runMu.Unlock()
		if vr := n.vols[vi.ID]; vr != nil {
			return vr.heal
		}
		return nil
	}
	d := daemon()
	if d == nil || d.Current() == nil {
		t.Fatal("no heal daemon for a started replicated volume")
	}
	first := d.Current()
	for _, kv := range [][2]string{{options.OptHealInterval, "0.3"}, {options.OptFavoriteChildPolicy, "mtime"}} {
		if _, err := c.Set(ctx, "gv0", kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "heal daemon with the new options", func() error {
		if k := d.Current().Key(); !strings.Contains(k, "interval=0.3 policy=mtime") {
			return fmt.Errorf("config %q", k)
		}
		return nil
	})
	if !first.Stopped() {
		t.Error("the replaced healer still runs")
	}
	if _, err := c.Stop(ctx, "gv0"); err != nil {
		t.Fatal(err)
	}
	if d.Current() != nil || daemon() != nil {
		t.Fatal("heal daemon left after the volume stopped")
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatal(err)
	}
	if d := daemon(); d == nil || d.Current() == nil {
		t.Fatal("no heal daemon after the volume started again")
	}
	// A distribute volume has none.
	dv, _ := replicaVolume(t, c, "dist", 0, 0, 1)
	n.runMu.Lock()
	defer n.runMu.Unlock()
	if n.vols[dv.ID].heal != nil {
		t.Fatal("a distribute volume has a heal daemon")
	}
}
