package mgmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume/options"

	"golang.org/x/sys/unix"
)

// infoJSON is volume info of name as the API gives it.
func infoJSON(t *testing.T, c *api.Client, name string) []byte {
	t.Helper()
	vi, err := c.Info(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(vi)
	return b
}

// TestFailedReplaceBrickChangesNothing: a replace-brick to a directory
// that cannot be a brick (a pseudo file system, a non-empty directory, a
// system directory, even with force; an empty directory on the root file
// system without force) fails before anything changes: volume info is
// byte for byte what it was, and the old brick still serves (issue 21:
// the volume listed /proc/self as a brick after such a failure).
func TestFailedReplaceBrickChangesNothing(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	_, bricks := replicaVolume(t, c, "rv", 3, 0, 3)
	before := infoJSON(t, c, "rv")
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "f"), []byte("x"), 0o644)
	var reqs []api.ReplaceBrickRequest
	for _, dst := range []string{"/proc/self", full, "/etc", "/var/lib/mortar"} {
		reqs = append(reqs, api.ReplaceBrickRequest{Destination: dst, Force: true})
	}
	if empty := t.TempDir(); onRootFS(t, empty) {
		reqs = append(reqs, api.ReplaceBrickRequest{Destination: empty})
	}
	for _, req := range reqs {
		req.Source, req.Destination = "localhost:"+bricks[2], "localhost:"+req.Destination
		_, err := c.ReplaceBrick(ctx, "rv", req)
		if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("replace-brick to %s (force %v): %v, want refused before any change", req.Destination, req.Force, err)
		}
		if !req.Force && !strings.Contains(err.Error(), "is on the root file system") {
			t.Errorf("replace-brick to %s without force: %v, want refused for the root file system", req.Destination, err)
		}
		if after := infoJSON(t, c, "rv"); !bytes.Equal(before, after) {
			t.Fatalf("volume info changed by a failed replace-brick to %s:\n%s\n%s", req.Destination, before, after)
		}
	}
	st, err := c.Status(ctx, "rv")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range st.Bricks {
		if !b.Online {
			t.Errorf("brick %s offline after the refused replace-brick", b.Path)
		}
	}
}

// TestDeleteFreesBricks: volume delete removes mortar's marks from its
// bricks (volume id, root gfid, hidden directory) and leaves the files; a
// directory so freed makes a new volume at once (with force, since it
// holds files).
func TestDeleteFreesBricks(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	dirs := brickDirs(t, 1)
	os.WriteFile(filepath.Join(dirs[0], "kept"), []byte("mine"), 0o644)
	req := api.CreateVolumeRequest{Name: "a", Bricks: []string{"localhost:" + dirs[0]}}
	if _, err := c.CreateVolume(ctx, req); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("create on a non-empty directory without force: %v", err)
	}
	req.Force = true
	if _, err := c.CreateVolume(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if names, _ := listXattrs(dirs[0]); strings.Contains(names, "trusted.mortar.") {
		t.Errorf("xattrs left on the brick root: %s", names)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], ".mortar")); !os.IsNotExist(err) {
		t.Errorf("hidden directory left: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dirs[0], "kept")); err != nil || string(b) != "mine" {
		t.Errorf("the user's file: %q %v", b, err)
	}
	req.Name = "b"
	if _, err := c.CreateVolume(ctx, req); err != nil {
		t.Fatalf("a new volume on the freed directory: %v", err)
	}
}

// onRootFS reports whether dir is on the file system of "/".
func onRootFS(t *testing.T, dir string) bool {
	var st, root unix.Stat_t
	if err := errors.Join(unix.Stat(dir, &st), unix.Stat("/", &root)); err != nil {
		t.Fatal(err)
	}
	return st.Dev == root.Dev
}

// listXattrs lists the xattr names of path, NUL-separated.
func listXattrs(path string) (string, error) {
	buf := make([]byte, 64<<10)
	n, err := unix.Listxattr(path, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// TestOptionsMatchVolumeType: an option that means nothing for the
// volume's type is refused, naming the type (issue 21: cluster.quorum-type
// was accepted on a distribute volume).
func TestOptionsMatchVolumeType(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	dirs := brickDirs(t, 1)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "d", Bricks: bricksOn(dirs), Force: true}); err != nil {
		t.Fatal(err)
	}
	before := infoJSON(t, c, "d")
	for _, kv := range [][2]string{{options.OptQuorumType, "none"}, {options.OptQuorumCount, "1"}, {options.OptFavoriteChildPolicy, "mtime"}, {options.OptHealInterval, "3"}, {options.OptDisperseQuiet, "5"}} {
		_, err := c.Set(ctx, "d", kv[0], kv[1])
		if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "is a distribute volume") {
			t.Errorf("set %s on a distribute volume: %v, want refused", kv[0], err)
		}
	}
	if after := infoJSON(t, c, "d"); !bytes.Equal(before, after) {
		t.Fatalf("refused options changed the volume:\n%s\n%s", before, after)
	}
	if _, err := c.Set(ctx, "d", options.OptPingTimeout, "3"); err != nil {
		t.Fatalf("an option for every type: %v", err)
	}
}

// TestFailedAddBrickChangesNothing: an add-brick whose last new brick
// cannot be one fails, volume info is byte for byte what it was, and the
// new bricks it had already marked are unmarked (usable at once).
func TestFailedAddBrickChangesNothing(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	replicaVolume(t, c, "rv", 3, 0, 3)
	before := infoJSON(t, c, "rv")
	fresh := brickDirs(t, 2)
	for _, bad := range []string{"/proc/self", "/etc"} {
		req := api.AddBrickRequest{Bricks: append(bricksOn(fresh), "localhost:"+bad), Force: true}
		if _, err := c.AddBrick(ctx, "rv", req); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("add-brick with %s: %v, want refused", bad, err)
		}
		if after := infoJSON(t, c, "rv"); !bytes.Equal(before, after) {
			t.Fatalf("volume info changed by a failed add-brick with %s:\n%s\n%s", bad, before, after)
		}
		for _, d := range fresh {
			if names, _ := listXattrs(d); strings.Contains(names, "trusted.mortar.") {
				t.Errorf("add-brick with %s left marks on %s: %s", bad, d, names)
			}
		}
	}
	if _, err := c.AddBrick(ctx, "rv", api.AddBrickRequest{Bricks: append(bricksOn(fresh), bricksOn(brickDirs(t, 1))...), Force: true}); err != nil {
		t.Fatalf("add-brick of the same directories once valid: %v", err)
	}
}
