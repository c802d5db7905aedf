package mgmt

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume"
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
	if _, err := c.AddBrick(ctx, "dv", api.AddBrickRequest{Bricks: []string{"localhost:" + dirs[2]}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rebalance(ctx, "dv", api.RebalanceRequest{Action: api.ActionStart}); err != nil {
		t.Fatal(err)
	}
	if rs := waitTask(t, c, "dv"); rs.Task.Status != api.TaskCompleted || rs.Nodes[0].Moved == 0 {
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

// Nodes serving bricks of the volume that cannot say their bricks have
// the fence — one that does not answer (down while its bricks serve, or
// hung), one older than fences (it answers without saying) — count as
// unfenced, for the leader to wait for and log; a node serving none of
// the volume's bricks does not (a review, 2026-11-28).
func TestNodesThatCannotTellCountUnfenced(t *testing.T) {
	n, _ := startNode(t, t.TempDir())
	ctx := ctxT(t)
	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`)) // knows /lagging, not fences
	}))
	defer older.Close()
	nodes := map[string]string{"older": older.Listener.Addr().String(), "hung": hungListener(t), "idle": older.Listener.Addr().String()}
	for id, addr := range nodes {
		if err := n.store.Apply(state.Command{Op: state.OpSetNode, Node: &state.Node{ID: id, Addr: addr}}); err != nil {
			t.Fatal(err)
		}
	}
	v := &state.Volume{Name: "sv", ID: "5e5e5e5e-0000-1111-2222-333333333333", Type: volume.Distribute, Bricks: []state.Brick{
		{ID: "b-older", Node: "older", Host: "h1", Path: "/b"}, {ID: "b-hung", Node: "hung", Host: "h2", Path: "/b"}}}
	if err := n.store.Apply(state.Command{Op: state.OpCreateVolume, Volume: v}); err != nil {
		t.Fatal(err)
	}
	l := n.laggingEverywhere(ctx, "sv", 1, 1)
	slices.Sort(l.Unfenced)
	if !slices.Equal(l.Unfenced, []string{"hung", "older"}) {
		t.Fatalf("unfenced %v, want hung and older (not idle, nor this node)", l.Unfenced)
	}
	if l := n.laggingEverywhere(ctx, "sv", 1, 0); len(l.Unfenced) != 0 {
		t.Fatalf("no fence asked about: unfenced %v", l.Unfenced)
	}
}
