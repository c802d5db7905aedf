package mgmt

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/mortarfs/mortar/volume"
)

// watchSlack is how much longer than the server's wait a watch request
// may take (the answer's way back, a busy server).
const watchSlack = 15 * time.Second

// WatchSpec waits until the spec of the started volume name has a version
// above after and returns it. When the server's wait (DefaultSpecWait)
// passes first it returns the current spec, whose Version is then after or
// less: callers compare versions and watch again. A volume that is not
// started, or is stopped meanwhile, fails with ErrState.
//
// A node older than the watch answers at once with the current spec;
// callers that loop should not ask again at once after an unchanged answer.
func (c *Client) WatchSpec(ctx context.Context, name string, after uint64) (volume.Spec, error) {
	return c.watchSpec(ctx, name, after, DefaultSpecWait)
}

// watchSpec is WatchSpec with the server's wait given.
func (c *Client) watchSpec(ctx context.Context, name string, after uint64, wait time.Duration) (volume.Spec, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+watchSlack)
	defer cancel()
	q := url.Values{}
	q.Set("after", strconv.FormatUint(after, 10))
	q.Set("wait", wait.String())
	var out volume.Spec
	err := c.do(ctx, http.MethodGet, volPath(name, "spec")+"?"+q.Encode(), nil, &out)
	return out, err
}
