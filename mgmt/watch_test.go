package mgmt

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/volume"
)

// startedVolume creates and starts a one-brick volume gv0 and returns
// its spec.
func startedVolume(t *testing.T, c *api.Client) volume.Spec {
	t.Helper()
	ctx := ctxT(t)
	dirs := brickDirs(t, 1)
	if _, err := c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "gv0", Bricks: []string{"127.0.0.1:" + dirs[0]}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "gv0", false); err != nil {
		t.Fatal(err)
	}
	spec, err := c.Spec(ctx, "gv0")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

type watched struct {
	spec volume.Spec
	err  error
}

func watchAsync(ctx context.Context, c *api.Client, after uint64) <-chan watched {
	ch := make(chan watched, 1)
	go func() {
		spec, err := c.WatchSpec(ctx, "gv0", after)
		ch <- watched{spec, err}
	}()
	return ch
}

func TestWatchSpec(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	spec := startedVolume(t, c)

	// A watch of the current version waits for the next change.
	w := watchAsync(ctx, c, spec.Version)
	if _, err := c.Set(ctx, "gv0", options.OptAttrTimeout, "4"); err != nil {
		t.Fatal(err)
	}
	got := <-w
	if got.err != nil || got.spec.Version != spec.Version+1 || got.spec.Options[options.OptAttrTimeout] != "4" {
		t.Fatalf("watch after %d: %+v, %v", spec.Version, got.spec, got.err)
	}

	// watch asks with a wait of its own.
	watch := func(after uint64, wait time.Duration) (volume.Spec, error) {
		var s volume.Spec
		q := url.Values{"after": {strconv.FormatUint(after, 10)}, "wait": {wait.String()}}
		err := c.Do(ctx, http.MethodGet, api.VolPath("gv0", "spec")+"?"+q.Encode(), nil, &s)
		return s, err
	}
	// An older version gets the current spec at once.
	if s, err := watch(spec.Version, time.Hour); err != nil || s.Version != spec.Version+1 {
		t.Fatalf("watch after an old version: %+v, %v", s, err)
	}
	// No change within the wait: the current spec.
	if s, err := watch(spec.Version+1, 100*time.Millisecond); err != nil || s.Version != spec.Version+1 {
		t.Fatalf("watch that timed out: %+v, %v", s, err)
	}
	// Without after, as before: the current spec.
	if s, err := c.Spec(ctx, "gv0"); err != nil || s.Version != spec.Version+1 {
		t.Fatalf("spec: %+v, %v", s, err)
	}
	var out volume.Spec
	for _, q := range []string{"after=x", "after=1&wait=soon", "after=1&wait=-1s"} {
		if err := c.Do(ctx, http.MethodGet, api.VolPath("gv0", "spec")+"?"+q, nil, &out); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("watch ?%s: %v", q, err)
		}
	}
	if _, err := c.WatchSpec(ctx, "nope", 1); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("watch of a missing volume: %v", err)
	}

	// Stopping the volume ends a watch with ErrState, and so do later ones.
	w = watchAsync(ctx, c, spec.Version+1)
	if _, err := c.Stop(ctx, "gv0"); err != nil {
		t.Fatal(err)
	}
	if got := <-w; !errors.Is(got.err, api.ErrState) {
		t.Fatalf("watch of a volume being stopped: %+v, %v", got.spec, got.err)
	}
	if _, err := c.WatchSpec(ctx, "gv0", 0); !errors.Is(err, api.ErrState) {
		t.Fatalf("watch of a stopped volume: %v", err)
	}
}

// A node that shuts down ends its watches rather than waiting for them.
func TestWatchSpecEndsAtShutdown(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	spec := startedVolume(t, c)
	w := watchAsync(ctx, c, spec.Version)
	// The watch must be waiting on the server before the node closes: it
	// makes the node's notifier (a request's arrival is no event to wait
	// on).
	waitFor(t, 10*time.Second, "the watch to reach the node", func() error {
		if n.specs.waiting.Load() == 0 {
			return errors.New("no watch yet")
		}
		return nil
	})
	start := time.Now()
	n.Close()
	if took := time.Since(start); took >= shutdownTimeout {
		t.Fatalf("close took %v with a watch waiting", took)
	}
	if got := <-w; got.err == nil && got.spec.Version != spec.Version {
		t.Fatalf("watch at shutdown: %+v", got.spec)
	}
	if w := n.specs.waiting.Load(); w != 0 {
		t.Fatalf("%d watches still waiting on the closed node", w)
	}
}
