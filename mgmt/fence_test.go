package mgmt

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// A client cut off from the cluster keeps the layout it had. Once a
// rebalance has fenced that layout off, the bricks refuse it new names
// (it would make them where the new layout does not look: lost once the
// previous layout is dropped), in a directory it leased too; a client
// that follows the spec makes names as before.
func TestStaleClientFencedByRebalance(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	dirs := twoOfThree(t, c)
	stale := mountVolume(t, c, "dv") // a graph that never follows the spec
	live := liveClient(t, c, "dv")
	mustMkdir(t, live, "/d")
	mustMkdir(t, stale, "/own") // leased to the stale client, with create-behind
	for i := range 40 {
		mustWrite(t, stale, fmt.Sprintf("/f%d", i), []byte{byte(i)})
	}
	if _, err := c.AddBrick(ctx, "dv", AddBrickRequest{Bricks: []string{"localhost:" + dirs[2]}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rebalance(ctx, "dv", RebalanceRequest{Action: ActionStart}); err != nil {
		t.Fatal(err)
	}
	if rs := waitTask(t, c, "dv"); rs.Task.Status != TaskCompleted || rs.Nodes[0].Moved == 0 {
		t.Fatalf("rebalance: %+v %+v", rs.Task, rs.Nodes)
	}
	v := n.store.State().Volumes["dv"]
	if v.Fence == 0 || v.Fence > v.SpecVersion {
		t.Fatalf("fence %d, spec version %d", v.Fence, v.SpecVersion)
	}
	for _, b := range v.Bricks {
		data, err := os.ReadFile(n.fenceFile(b.ID))
		if err != nil || string(data) != strconv.FormatUint(v.Fence, 10) {
			t.Fatalf("brick %s's fence file: %q, %v; want %d", b.Name(), data, err, v.Fence)
		}
	}
	for i := range 20 {
		for _, dir := range []string{"/d", "/own", ""} {
			p := fmt.Sprintf("%s/new%d", dir, i)
			if err := writeFile(ctx, stale, p, []byte("x")); layer.UserErrno(err) != syscall.EIO {
				t.Fatalf("a client on the old layout wrote %s: %v, want refused", p, err)
			}
			if _, err := live.Lookup(ctx, p); !errors.Is(err, syscall.ENOENT) {
				t.Fatalf("a refused create made %s: %v", p, err)
			}
		}
	}
	if _, err := stale.Mkdir(ctx, "/d/sub", layer.MkdirIn{Mode: 0o755}); !errors.Is(err, layer.ErrFenced) {
		t.Fatalf("mkdir by a client on the old layout: %v, want ErrFenced", err)
	}
	mustWrite(t, live, "/d/new0", []byte("y"))
	mustMkdir(t, live, "/d/sub")
}
