package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/mortarfs/mortar/volume"
)

// WatchSlack is how much longer than the server's wait a watch request
// may take (the answer's way back, a busy server).
const WatchSlack = 15 * time.Second

// WatchSpec waits until the spec of the started volume name has a version
// above after and returns it. When the server's wait (DefaultSpecWait)
// passes first it returns the current spec, whose Version is then after or
// less: callers compare versions and watch again. A volume that is not
// started, or is stopped meanwhile, fails with ErrState.
//
// A node older than the watch answers at once with the current spec;
// callers that loop should not ask again at once after an unchanged answer.
func (c *Client) WatchSpec(ctx context.Context, name string, after uint64) (volume.Spec, error) {
	return c.watchSpec(ctx, name, after, DefaultSpecWait, watcherQuery{})
}

// SpecFollower returns the watch of volume name's spec for
// volume.Live.Follow, which names the follower to the nodes (a random id)
// and tells them the version runs returns (the follower's running graph:
// Live.Version), so that the leader waits for it to run a new layout
// before files move (mgmt/takeup.go).
func (c *Client) SpecFollower(name string, runs func() uint64) func(ctx context.Context, after uint64) (volume.Spec, error) {
	var b [8]byte
	rand.Read(b[:])
	w := watcherQuery{id: hex.EncodeToString(b[:]), runs: runs}
	return func(ctx context.Context, after uint64) (volume.Spec, error) {
		return c.watchSpec(ctx, name, after, DefaultSpecWait, w)
	}
}

// watcherQuery names a spec follower on its watches (zero: nobody).
type watcherQuery struct {
	id   string
	runs func() uint64
}

// watchSpec is WatchSpec with the server's wait and the watcher given.
func (c *Client) watchSpec(ctx context.Context, name string, after uint64, wait time.Duration, w watcherQuery) (volume.Spec, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+WatchSlack)
	defer cancel()
	q := url.Values{}
	q.Set("after", strconv.FormatUint(after, 10))
	q.Set("wait", wait.String())
	if w.id != "" {
		q.Set("client", w.id)
		q.Set("runs", strconv.FormatUint(w.runs(), 10))
	}
	var out volume.Spec
	err := c.Do(ctx, http.MethodGet, VolPath(name, "spec")+"?"+q.Encode(), nil, &out)
	return out, err
}
