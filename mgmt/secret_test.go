package mgmt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/internal/wiretap"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/volume"
)

// remote is an address no machine running the tests has (TEST-NET-1).
const remote = "192.0.2.7:40000"

// callAs sends a request to n's API as if it came from addr, through the
// node's real handler, with the cluster secret when secret is set.
func callAs(n *Node, addr, method, path, body, secret string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = addr
	r.Host = n.Addr()
	if secret != "" {
		api.SignRequest(r, []byte(body), secret)
	}
	w := httptest.NewRecorder()
	n.handler().ServeHTTP(w, r)
	return w
}

// TestRemoteCallersNeedTheSecret: a plain node refuses every request from
// another machine that lacks the cluster secret (the attack of issue 21:
// create a volume on any directory, start it, mount it), serves one that
// has it, and serves its own machine.
func TestRemoteCallersNeedTheSecret(t *testing.T) {
	dataDir := t.TempDir()
	n, c := startNode(t, dataDir)
	dirs := brickDirs(t, 1)
	create := `{"name":"loot","bricks":["localhost:` + dirs[0] + `"],"force":true}` // a temp dir: the root file system
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/volumes", create},
		{http.MethodGet, "/v1/volumes", ""},
		{http.MethodGet, "/v1/node", ""},
		{http.MethodPost, "/v1/peers", `{"host":"192.0.2.9"}`},
		{http.MethodPost, "/v1/cluster/join", `{"leader":"x"}`},
		{http.MethodPost, "/v1/local/bricks/mark", `{}`},
	} {
		for _, wrong := range []string{"", strings.Repeat("0", 64), "short"} {
			w := callAs(n, remote, c.method, c.path, c.body, wrong)
			if w.Code != http.StatusUnauthorized {
				t.Errorf("%s %s from %s with secret %q: %d %s, want 401", c.method, c.path, remote, wrong, w.Code, w.Body)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dirs[0], ".mortar")); !os.IsNotExist(err) {
		t.Fatalf("a refused create touched the directory: %v", err)
	}
	if got := len(n.store.State().Volumes); got != 0 {
		t.Fatalf("%d volumes after refused creates", got)
	}
	secret, err := api.ReadSecretFile(filepath.Join(dataDir, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dataDir, "secret")); st.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode %v, want 0600", st.Mode().Perm())
	}
	if w := callAs(n, remote, http.MethodPost, "/v1/volumes", create, secret); w.Code != http.StatusCreated {
		t.Fatalf("create with the secret: %d %s", w.Code, w.Body)
	}
	if _, err := c.Info(ctxT(t), "loot"); err != nil {
		t.Fatalf("info from loopback, as root: %v", err)
	}
}

// TestSpecByAddress: without the secret, a machine may fetch a volume's
// spec only when auth.allow names it; auth.allow and auth.reject apply to
// local mounts too; the secret never shows in volume info.
func TestSpecByAddress(t *testing.T) {
	n, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	startedVolume(t, c)
	spec := "/v1/volumes/gv0/spec"
	expect := func(addr string, want int) {
		t.Helper()
		if w := callAs(n, addr, http.MethodGet, spec, "", ""); w.Code != want {
			t.Fatalf("spec from %s: %d %s, want %d", addr, w.Code, w.Body, want)
		}
	}
	expect(remote, http.StatusUnauthorized)
	if _, err := c.Spec(ctx, "gv0"); err != nil {
		t.Fatalf("spec from loopback: %v", err)
	}
	if _, err := c.Set(ctx, "gv0", options.OptAuthAllow, "192.0.2.0/24"); err != nil {
		t.Fatal(err)
	}
	expect(remote, http.StatusOK)
	expect("198.51.100.1:1", http.StatusForbidden)
	if _, err := c.Spec(ctx, "gv0"); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("spec from loopback, not in auth.allow: %v, want forbidden", err)
	}
	if _, err := c.Set(ctx, "gv0", options.OptAuthReject, "192.0.2.7"); err != nil {
		t.Fatal(err)
	}
	expect(remote, http.StatusForbidden)

	vi, err := c.Info(ctx, "gv0")
	if err != nil {
		t.Fatal(err)
	}
	shown, _ := json.Marshal(vi)
	secret := n.store.State().Volumes["gv0"].Secret
	if len(secret) != 64 || bytes.Contains(shown, []byte(secret)) {
		t.Fatalf("volume secret %q, or shown in volume info: %s", secret, shown)
	}
}

// TestBrickNeedsVolumeSecret: a brick admits only clients proving the
// volume's secret, which never crosses the wire; a change of auth.allow closes the connections it now
// refuses (mounts already connected), and a client it admits again works.
func TestBrickNeedsVolumeSecret(t *testing.T) {
	_, c := startNode(t, t.TempDir())
	ctx := ctxT(t)
	spec := startedVolume(t, c)
	if spec.Secret == "" {
		t.Fatal("the spec carries no volume secret")
	}
	for _, wrong := range []string{"", newSecret()} {
		bad := spec
		bad.Secret = wrong
		cfg := volume.BrickClientConfig(bad, bad.Bricks[0])
		cfg.ConnectWait = 500 * time.Millisecond
		if _, err := newTestClient(t, cfg).Lookup(ctx, "/"); err == nil {
			t.Fatalf("a client with secret %q was admitted", wrong)
		}
	}
	rec := &wiretap.Tap{}
	cfg := volume.BrickClientConfig(spec, spec.Bricks[0])
	cfg.Dial = rec.Dial
	good := newTestClient(t, cfg)
	if _, err := good.Lookup(ctx, "/"); err != nil {
		t.Fatalf("a client with the volume's secret: %v", err)
	}
	rec.MustNotShow(t, spec.Secret)
	if _, err := c.Set(ctx, "gv0", options.OptAuthAllow, "10.1.1.1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the brick dropping the connection auth.allow now refuses", func() error {
		if _, err := good.Lookup(ctx, "/"); err == nil {
			return errors.New("the lookup still works")
		}
		return nil
	})
	if _, err := c.Spec(ctx, "gv0"); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("spec from 127.0.0.1 with auth.allow 10.1.1.1: %v, want forbidden", err)
	}
	if _, err := c.Set(ctx, "gv0", options.OptAuthAllow, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the admitted client reconnecting", func() error {
		_, err := good.Lookup(ctx, "/")
		return err
	})
}

// TestSignedRequests: a request from another machine signed with the
// cluster secret is served once; the same bytes replayed are refused, as
// are a wrong secret, a time over five minutes away, a signature for
// another node, and a changed body; the secret never crosses the wire.
func TestSignedRequests(t *testing.T) {
	n, _ := startNode(t, t.TempDir())
	secret := n.secret()
	rec := &wiretap.Tap{}
	cl := api.NewClient(n.ListenAddr()).WithSecret(secret).WithHTTP(&http.Client{Transport: &http.Transport{DialContext: rec.Dial}})
	if _, err := cl.Node(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	rec.MustNotShow(t, secret)
	recorded, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(rec.Sent())))
	if err != nil {
		t.Fatal(err)
	}
	serve := func(r *http.Request) *httptest.ResponseRecorder {
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		n.handler().ServeHTTP(w, r)
		return w
	}
	if w := serve(recorded); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "replayed") {
		t.Fatalf("the recorded request sent again from another machine: %d %s, want 401 replayed", w.Code, w.Body)
	}
	create := `{"name":"v","bricks":["localhost:/nonexistent"]}`
	signed := func(host, body string, at time.Time) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/v1/volumes", strings.NewReader(body))
		r.Host = host
		api.SignAt(r, []byte(create), secret, at)
		return r
	}
	now := time.Now()
	for _, c := range []struct {
		name string
		r    *http.Request
		want string
	}{
		{"wrong secret", func() *http.Request {
			r := signed(n.Addr(), create, now)
			api.SignRequest(r, []byte(create), newSecret())
			return r
		}(), "not of this cluster's secret"},
		{"too old", signed(n.Addr(), create, now.Add(-6*time.Minute)), "±5m0s"},
		{"from the future", signed(n.Addr(), create, now.Add(6*time.Minute)), "±5m0s"},
		{"before the node started", signed(n.Addr(), create, now.Add(-time.Minute)), "before this process started"},
		{"another node", signed("127.0.0.1:1", create, now), "not this node"},
		{"changed body", signed(n.Addr(), strings.Replace(create, `"v"`, `"w"`, 1), now), "altered"},
		{"clear secret", func() *http.Request {
			r := signed(n.Addr(), create, now)
			r.Header.Set("Authorization", "Mortar "+secret) // as clients before signatures sent it
			return r
		}(), "signed requests"},
	} {
		if w := serve(c.r); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s: %d %s, want 401 %q", c.name, w.Code, w.Body, c.want)
		}
	}
	if w := serve(signed(n.Addr(), create, now)); w.Code == http.StatusUnauthorized {
		t.Fatalf("a request signed now: %d %s", w.Code, w.Body)
	}
}

// newTestClient starts a protocol client closed at the test's end.
func newTestClient(t *testing.T, cfg protocol.Config) *protocol.Client {
	pc := protocol.New(cfg)
	t.Cleanup(func() { pc.Close() })
	return pc
}

// TestLocalNonRootRefused: on the node's own machine, a user other than
// root gets nothing from the API without the cluster secret (a volume's
// spec holds its secret, which opens its bricks); root does.
func TestLocalNonRootRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to call as another user")
	}
	n, _ := startNode(t, t.TempDir())
	get := func(uid uint32, path string) string {
		t.Helper()
		host, port, _ := net.SplitHostPort(n.ListenAddr())
		script := `exec 3<>/dev/tcp/` + host + `/` + port + `; printf 'GET ` + path + ` HTTP/1.0\r\n\r\n' >&3; head -1 <&3`
		cmd := exec.Command("bash", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("as uid %d: %v %s", uid, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, path := range []string{"/v1/node", "/v1/volumes"} {
		if got := get(65534, path); !strings.Contains(got, " 403 ") {
			t.Errorf("GET %s as uid 65534 on this machine: %q, want 403", path, got)
		}
		if got := get(0, path); !strings.Contains(got, " 200 ") {
			t.Errorf("GET %s as root on this machine: %q, want 200", path, got)
		}
	}
}

// TestProbeSealsSecrets: a probe moves the probed node's secret and the
// cluster's without either crossing the network in clear — from a CLI
// holding the cluster secret, and from a CLI on a node's machine whose
// node forwards the probe to the leader — and a CLI holding neither
// refuses to send the probed node's secret to another machine.
func TestProbeSealsSecrets(t *testing.T) {
	nodes := startCluster(t, 2)
	ctx := ctxT(t)
	leader := leaderOf(t, nodes)
	other := nodes[0]
	if other == leader {
		other = nodes[1]
	}
	cluster := leader.n.secret()
	// client gives the caller's client, whose requests may go through
	// the tap (what the caller sends is recorded too).
	probe := func(via *clusterNode, host string, client func(*wiretap.Tap) *api.Client) {
		t.Helper()
		lone := &clusterNode{dir: t.TempDir(), bricks: t.TempDir(), host: host}
		lone.api, lone.raftA = apiAndRaft(t, host)
		lone.start(t)
		t.Cleanup(lone.stop)
		own := lone.n.secret()
		rec := &wiretap.Tap{}
		leader.n.peerHTTP = &http.Client{Transport: &http.Transport{DialContext: rec.Dial}}
		via.n.peerHTTP = &http.Client{Transport: &http.Transport{DialContext: rec.Dial}}
		if _, err := client(rec).ProbeNode(ctx, api.ProbeRequest{Host: lone.api, Secret: own}); err != nil {
			t.Fatalf("probe %s through %s: %v", host, via.host, err)
		}
		if got := lone.n.secret(); got != cluster {
			t.Fatalf("the probed node's secret is %.8s…, not the cluster's", got)
		}
		rec.MustNotShow(t, own, cluster)
	}
	probe(leader, "127.0.0.7", func(rec *wiretap.Tap) *api.Client {
		return api.NewClient(leader.api).WithSecret(cluster).WithHTTP(&http.Client{Transport: &http.Transport{DialContext: rec.Dial}})
	})
	probe(other, "127.0.0.8", func(*wiretap.Tap) *api.Client { return api.NewClient(other.api) }) // forwarded to the leader

	far := api.NewClient("192.0.2.7:7420")
	if _, err := far.ProbeNode(ctx, api.ProbeRequest{Host: "x", Secret: newSecret()}); err == nil || !strings.Contains(err.Error(), "must not cross the network in clear") {
		t.Fatalf("a probe with a clear secret to another machine: %v, want refused", err)
	}
}
