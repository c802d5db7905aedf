package mgmt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
)

// Before files move under a new layout the leader waits until every
// client that follows the spec runs it: a follower that was answered the
// new spec and has not watched again holds the move back; once it
// watches again (it runs the layout), the files move.
func TestRebalanceWaitsForFollowersToTakeTheLayout(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	dirs := twoOfThree(t, c)
	top := mountVolume(t, c, "dv")
	for i := range 40 {
		mustWrite(t, top, fmt.Sprintf("/f%d", i), []byte{byte(i)})
	}
	spec, err := c.Spec(ctx, "dv")
	if err != nil {
		t.Fatal(err)
	}
	var running atomic.Uint64 // the version of the graph the follower runs
	running.Store(spec.Version)
	follow := c.SpecFollower("dv", running.Load)
	answered := make(chan uint64, 1)
	go func() {
		s, err := follow(ctx, spec.Version) // then runs spec.Version, never watches again
		if err != nil {
			t.Error(err)
		}
		answered <- s.Version
	}()
	waitFor(t, 20*time.Second, "the follower watching", func() error {
		if l := n.watchers.lagging("dv", spec.Version+1); len(l.Clients) != 1 {
			return fmt.Errorf("lagging %+v", l)
		}
		return nil
	})
	if _, err := c.AddBrick(ctx, "dv", api.AddBrickRequest{Bricks: []string{"localhost:" + dirs[2]}, Force: true}); err != nil {
		t.Fatal(err)
	}
	added := <-answered
	// It runs the spec before add-brick's: the leader's wait for it does
	// not end (here cut short) while it does not watch again, nor when it
	// watches again still running the old graph (it failed to build the
	// new one).
	go follow(ctx, added)
	waitFor(t, 20*time.Second, "the follower watching again", func() error {
		if w := n.watchers.byVolSnapshot("dv"); len(w) != 1 || w[0].runs != spec.Version {
			return fmt.Errorf("watchers %+v", w)
		}
		return nil
	})
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = n.takeUp(short, "dv", added, func() bool { return true })
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a follower that runs version %d to take %d: %v, want it waiting", spec.Version, added, err)
	}
	if _, err := c.Rebalance(ctx, "dv", api.RebalanceRequest{Action: api.ActionStart}); err != nil {
		t.Fatal(err)
	}
	var layoutAt uint64
	waitFor(t, 20*time.Second, "the new layout", func() error {
		s, err := c.Spec(ctx, "dv")
		if err == nil && s.Previous == nil {
			err = fmt.Errorf("no previous layout yet")
		}
		layoutAt = s.Version
		return err
	})
	lag := n.laggingEverywhere(ctx, "dv", layoutAt, 0)
	rs, err := c.RebalanceStatus(ctx, "dv")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rs.Nodes {
		if p.Moved > 0 {
			t.Fatalf("files moved while a follower ran the old layout: %+v", p)
		}
	}
	if len(lag.Clients) != 1 {
		t.Fatalf("lagging clients: %+v, want the follower", lag)
	}
	running.Store(layoutAt) // it runs the new layout now, and says so
	go follow(ctx, layoutAt)
	rs = waitTask(t, c, "dv")
	if rs.Task.Status != api.TaskCompleted || rs.Task.Error != "" || len(rs.Nodes) == 0 || rs.Nodes[0].Moved == 0 {
		t.Fatalf("rebalance: %+v %+v", rs.Task, rs.Nodes)
	}
	if l := n.watchers.lagging("dv", layoutAt); slices.Contains(l.Clients, lag.Clients[0]) {
		t.Fatalf("the follower still lags: %+v", l)
	}
}

// byVolSnapshot returns copies of what w knows of vol's clients.
func (w *watchers) byVolSnapshot(vol string) []watcher {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []watcher
	for _, c := range w.byVol[vol] {
		out = append(out, *c)
	}
	return out
}

// Clients without an id are kept apart (by their connection): one that
// leaves does not hide the others, which get the old grace.
func TestAnonymousWatchersKeptApart(t *testing.T) {
	var w watchers
	w.arrived("v", "~127.0.0.1:1000", 3)
	w.arrived("v", "~127.0.0.1:1001", 3)
	w.left("v", "~127.0.0.1:1000")
	if l := w.lagging("v", 4); !l.Anonymous || len(l.Clients) != 0 {
		t.Fatalf("lagging: %+v, want clients without an id", l)
	}
}

// A node that does not answer the question (an older one: 404; or one
// that hangs) counts as one with clients without an id: the leader gives
// them the old grace, and a hung node does not stretch the wait past its
// bound (each question is bounded, and all are asked at once).
func TestTakeUpWithNodesThatDoNotAnswer(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	twoOfThree(t, c)
	old := httptest.NewServer(http.NotFoundHandler())
	defer old.Close()
	for id, addr := range map[string]string{"old": old.Listener.Addr().String(), "hung": hungListener(t)} {
		if err := n.store.Apply(state.Command{Op: state.OpSetNode, Node: &state.Node{ID: id, Addr: addr}}); err != nil {
			t.Fatal(err)
		}
	}
	if l := n.laggingEverywhere(ctx, "dv", 1<<40, 0); !l.Anonymous {
		t.Fatalf("lagging with nodes that do not answer: %+v, want them taken as clients without an id", l)
	}
	start := time.Now()
	if err := n.takeUp(ctx, "dv", 1<<40, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < clientCatchUp || took >= clientTakeUpMax {
		t.Fatalf("takeUp took %v: want the grace (%v), within the bound (%v)", took, clientCatchUp, clientTakeUpMax)
	}
}

// hungListener returns the address of a listener that takes connections
// and never answers, until the test ends.
func hungListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, conn)
		}
	}()
	return ln.Addr().String()
}
