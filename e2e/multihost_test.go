package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/internal/netlab"
)

// This file runs mortar on several "hosts": network namespaces of one
// machine made by internal/netlab, each with its own address (10.231.i.1)
// and a `mortar server` listening on port 7420 there. The volumes are
// mounted in the lab's client namespace (the mount points are in the
// ordinary file system tree). The tests skip only where the machine
// cannot make network namespaces.

// lab is a netlab.Lab of mortar servers, one per host, closed at the
// test's end (after the mounts made with mount are gone).
type lab struct {
	t   *testing.T
	ctx context.Context
	*netlab.Lab
}

// newMortarLab makes n hosts and starts a server on each, with more
// flags args.
func newMortarLab(t *testing.T, ctx context.Context, n int, args ...string) *lab {
	t.Helper()
	l, err := netlab.New(ctx, netlab.Config{Hosts: n})
	if errors.Is(err, netlab.ErrUnavailable) {
		t.Skipf("network namespaces cannot be made here, so no multi-host test: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range l.Hosts {
				if s := h.Server(); s != nil {
					t.Logf("log of host %d:\n%s", h.Index, s.LogTail(40))
				}
			}
		}
		for _, h := range l.Hosts {
			if s := h.Server(); s != nil {
				if err := s.Stop(10 * time.Second); err != nil {
					t.Errorf("host %d: %v\n%s", h.Index, err, s.LogTail(25))
				}
			}
		}
		if err := l.Close(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
	})
	for _, h := range l.Hosts {
		if _, err := h.StartServer(ctx, netlab.ServerConfig{Bin: mortarBin, LogLevel: "debug", Args: args}); err != nil {
			t.Fatalf("host %d: %v", h.Index, err)
		}
	}
	return &lab{t: t, ctx: ctx, Lab: l}
}

// addr is host h's management address.
func (l *lab) addr(h int) string { return l.Hosts[h].Server().Addr }

// mortar runs the CLI in host h's namespace against host h's server.
func (l *lab) mortar(h int, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
	defer cancel()
	return l.Hosts[h].Exec(ctx, mortarBin, append(args, "--server", l.addr(h))...)
}

func (l *lab) must(h int, args ...string) string {
	l.t.Helper()
	out, err := l.mortar(h, args...)
	if err != nil {
		l.t.Fatalf("host %d: mortar %s: %v\n%s", h, strings.Join(args, " "), err, l.logs())
	}
	return out
}

// logs is the end of every server's log, for failure messages.
func (l *lab) logs() string {
	var b strings.Builder
	for _, h := range l.Hosts {
		if s := h.Server(); s != nil {
			fmt.Fprintf(&b, "--- host %d (%s):\n%s\n", h.Index, s.Addr, s.LogTail(15))
		}
	}
	return b.String()
}

// get decodes the JSON answer of GET path on host h's API, asked from
// host h's own namespace.
func (l *lab) get(h int, path string, v any) error {
	ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.addr(h)+path, nil)
	if err != nil {
		return err
	}
	resp, err := l.Hosts[h].HTTPClient(5 * time.Second).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return json.Unmarshal(b, v)
}

// labPeer is what GET /v1/peers lists per node (the fields used here).
type labPeer struct {
	ID        string `json:"id"`
	Addr      string `json:"addr"`
	Connected bool   `json:"connected"`
	Leader    bool   `json:"leader"`
}

// connected lists the hosts that host h sees connected (itself included).
func (l *lab) connected(h int) []int {
	var peers []labPeer
	if err := l.get(h, "/v1/peers", &peers); err != nil {
		return nil
	}
	var hs []int
	for _, p := range peers {
		if i := l.hostOf(p.Addr); i >= 0 && p.Connected {
			hs = append(hs, i)
		}
	}
	slices.Sort(hs)
	return hs
}

// leader is the host that host h names the Raft leader in GET /v1/peers
// ("leader": true), -1 if none.
func (l *lab) leader(h int) int {
	var peers []labPeer
	if err := l.get(h, "/v1/peers", &peers); err != nil {
		return -1
	}
	for _, p := range peers {
		if p.Leader {
			return l.hostOf(p.Addr)
		}
	}
	return -1
}

// hostOf maps a node address (host:port) to its host index, -1 if none.
func (l *lab) hostOf(addr string) int {
	for _, h := range l.Hosts {
		if strings.HasPrefix(addr, h.Addr+":") || addr == h.Addr {
			return h.Index
		}
	}
	return -1
}

// brick makes and returns the brick directory of volume vol on host h
// (under the host's directory in the lab).
func (l *lab) brick(h int, vol string) string {
	d := filepath.Join(l.Dir, fmt.Sprintf("h%d", h), "bricks", vol)
	if err := os.MkdirAll(d, 0o755); err != nil {
		l.t.Fatal(err)
	}
	return d
}

// mount mounts vol (from host h's server) in the client namespace under
// the lab's directory, with the kernel caches off and the mount options
// opts (comma separated, may be empty), and unmounts it at the test's end.
func (l *lab) mount(h int, vol, opts string) string {
	l.t.Helper()
	mnt := filepath.Join(l.Dir, "mnt-"+vol)
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		l.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
	defer cancel()
	logf := filepath.Join(l.Dir, "mount-"+vol+".log")
	_, err := l.Client.Exec(ctx, mortarBin, "mount", "--log-file", logf,
		"-o", "attr-timeout=0,entry-timeout=0,negative-timeout=0"+opts, l.addr(h)+":/"+vol, mnt)
	if err != nil {
		b, _ := os.ReadFile(logf)
		l.t.Fatalf("mount %s: %v\n%s", vol, err, b)
	}
	l.t.Cleanup(func() {
		if l.t.Failed() {
			b, _ := os.ReadFile(logf)
			l.t.Logf("mount log of %s:\n%s", vol, lastLines(string(b), 30))
		}
		unmount(l.t, mnt)
	})
	return mnt
}

// refusedMount checks that vol, mounted from the client namespace through
// host h without the cluster secret or an auth.allow naming the client,
// is refused.
func (l *lab) refusedMount(h int, vol string) {
	l.t.Helper()
	mnt := filepath.Join(l.Dir, "refused-"+vol)
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		l.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
	defer cancel()
	out, err := l.Client.Exec(ctx, mortarBin, "mount", l.addr(h)+":/"+vol, mnt)
	if err == nil {
		unmount(l.t, mnt)
		l.t.Fatalf("a mount of %s from another machine without the secret or auth.allow succeeded: %s", vol, out)
	}
	if !strings.Contains(out+err.Error(), "auth.allow") {
		l.t.Errorf("the refused mount does not say how to get in: %v %s", err, out)
	}
}

// awaitLab polls cond with a deadline: Raft elections, joins and brick
// restarts have no event a test can subscribe to from outside.
func (l *lab) await(what string, limit time.Duration, cond func() bool) time.Duration {
	l.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			l.t.Fatalf("%s: not within %s\n%s", what, limit, l.logs())
		}
		select {
		case <-l.ctx.Done():
			l.t.Fatalf("%s: %v", what, l.ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return time.Since(start)
}

// try polls cond until it holds or limit passes, and says which.
func (l *lab) try(limit time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit || l.ctx.Err() != nil {
			return time.Since(start), false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start), true
}

// others is every host but those given.
func (l *lab) others(but ...int) []int {
	var hs []int
	for _, h := range l.Hosts {
		if !slices.Contains(but, h.Index) {
			hs = append(hs, h.Index)
		}
	}
	return hs
}

// readAll checks that every file of files reads back as its name.
func readAll(dir string, files []string) error {
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if string(b) != "content of "+f {
			return fmt.Errorf("%s holds %q", f, b)
		}
	}
	return nil
}

// writeFiles writes n files named prefix-i into dir, each holding
// "content of" its name, and returns their names.
func writeFiles(t *testing.T, dir, prefix string, n int) []string {
	t.Helper()
	names, err := tryWriteFiles(dir, prefix, n)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// tryWriteFiles is writeFiles, returning the first failure.
func tryWriteFiles(dir, prefix string, n int) ([]string, error) {
	var names []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%02d", prefix, i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte("content of "+name), 0o644); err != nil {
			return names, fmt.Errorf("write %s: %w", name, err)
		}
		names = append(names, name)
	}
	return names, nil
}

// TestMultiHostCluster: three hosts form a cluster with `peer probe`; a
// replica 3 volume and a distribute volume get one brick per host, a
// third volume one brick on host 2, and all three are mounted from the
// client namespace. Killing the Raft leader's host (SIGKILL of every
// process on it) leaves management working on the two others, the
// replicated volume serving every file and the distribute volume the
// files on the surviving hosts; the host, restarted, rejoins and its
// bricks serve again. With one host of three left, management changes
// fail saying there is no quorum or leader, and the volume on that host
// is still read and written.
func TestMultiHostCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := newMortarLab(t, ctx, 3)
	start := time.Now()
	l.formCluster()
	v := l.makeVolumes()
	t.Logf("cluster formed, volumes mounted and written in %s", time.Since(start).Round(time.Millisecond))
	lead := l.killLeader(v)
	l.restartHost(v, lead)
	l.lastHostStanding(v, 2)
}

// remoteRefused checks that host 0's node, listening on the lab's
// network, refuses another machine's requests (the client namespace's)
// without the cluster secret, and answers them with it: the attack of
// issue 21, a volume made from another machine on any directory.
func (l *lab) remoteRefused() {
	t := l.t
	ctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
	defer cancel()
	dir := l.brick(0, "loot")
	create := []string{"volume", "create", "loot", l.Hosts[0].Addr + ":" + dir, "force", "--server", l.addr(0)}
	out, err := l.Client.Exec(ctx, mortarBin, create...)
	if err == nil || !strings.Contains(out+err.Error(), "cluster secret") {
		t.Fatalf("volume create from another machine without the secret: %v %s; want refused", err, out)
	}
	for _, path := range []string{"/v1/node", "/v1/volumes"} {
		resp, err := l.Client.HTTPClient(5 * time.Second).Get("http://" + l.addr(0) + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET %s from another machine without the secret: %s, want 401", path, resp.Status)
		}
	}
	secret := filepath.Join(l.Hosts[0].Server().DataDir(), "secret")
	if out, err := l.Client.Exec(ctx, mortarBin, append(create, "--secret-file", secret)...); err != nil {
		t.Fatalf("volume create with the secret: %v %s", err, out)
	}
	l.must(0, "volume", "delete", "loot")
}

// formCluster probes hosts 1 and 2 from host 0 and checks that every
// host sees the three connected, in the API and in `peer status`.
func (l *lab) formCluster() {
	t := l.t
	l.remoteRefused()
	if out, err := l.mortar(0, "peer", "probe", l.Hosts[1].Addr); err == nil || !strings.Contains(out+err.Error(), "--peer-secret-file") {
		t.Fatalf("a probe without the new node's secret: %v %s; want refused, saying how", err, out)
	}
	for _, h := range []int{1, 2} {
		l.must(0, "peer", "probe", l.Hosts[h].Addr, "--peer-secret-file", filepath.Join(l.Hosts[h].Server().DataDir(), "secret"))
	}
	all := l.others()
	for _, h := range all {
		l.await(fmt.Sprintf("host %d sees 3 connected nodes", h), 20*time.Second, func() bool {
			return slices.Equal(l.connected(h), all)
		})
		out := l.must(h, "peer", "status")
		for _, o := range l.others(h) {
			if !strings.Contains(out, l.Hosts[o].Addr) {
				t.Errorf("peer status on host %d does not name host %d (%s):\n%s", h, o, l.Hosts[o].Addr, out)
			}
		}
		if n := strings.Count(out, "Connected"); n != 2 {
			t.Errorf("peer status on host %d shows %d peers connected, want 2:\n%s", h, n, out)
		}
	}
	pool := l.must(0, "pool", "list")
	for _, o := range l.others(0) {
		if !strings.Contains(pool, l.Hosts[o].Addr) {
			t.Errorf("pool list does not name %s:\n%s", l.Hosts[o].Addr, pool)
		}
	}
	if n := strings.Count(pool, "Connected"); n != 3 {
		t.Errorf("pool list shows %d nodes connected, want 3:\n%s", n, pool)
	}
}

// labVolumes are the mounted volumes of TestMultiHostCluster and the
// files written to them.
type labVolumes struct {
	repMnt, distMnt, soloMnt       string
	repFiles, distFiles, soloFiles []string
	onHost                         map[int][]string // dist files by the host of their brick
}

// makeVolumes creates (through host 1, which did not probe: any node
// takes management commands), starts, mounts and fills rep (replica 3,
// a brick per host), dist (distribute, a brick per host) and solo (one
// brick on host 2).
func (l *lab) makeVolumes() *labVolumes {
	t := l.t
	rep := []string{"volume", "create", "rep", "replica", "3"}
	dist := []string{"volume", "create", "dist"}
	for _, h := range l.others() {
		rep = append(rep, l.Hosts[h].Addr+":"+l.brick(h, "rep"))
		dist = append(dist, l.Hosts[h].Addr+":"+l.brick(h, "dist"))
	}
	solo := []string{"volume", "create", "solo", l.Hosts[2].Addr + ":" + l.brick(2, "solo")}
	for _, args := range [][]string{rep, dist, solo} {
		l.must(1, append(args, "force")...) // the lab's bricks are on the root file system
		l.must(1, "volume", "set", args[2], "network.ping-timeout", "2")
		l.must(1, "volume", "start", args[2])
	}
	// The client namespace is another machine: its mounts prove they may
	// use a volume with the cluster secret, or by an address auth.allow
	// names (solo; its spec comes from host 0, its brick is on host 2).
	l.refusedMount(0, "solo")
	l.must(1, "volume", "set", "solo", "auth.allow", "10.231.*.2")
	secret := ",secret-file=" + filepath.Join(l.Hosts[0].Server().DataDir(), "secret")
	v := &labVolumes{repMnt: l.mount(0, "rep", secret), distMnt: l.mount(0, "dist", secret), soloMnt: l.mount(0, "solo", ""),
		onHost: map[int][]string{}}
	v.repFiles = writeFiles(t, v.repMnt, "r", 12)
	v.distFiles = writeFiles(t, v.distMnt, "d", 12)
	v.soloFiles = writeFiles(t, v.soloMnt, "s", 3)
	for _, f := range v.distFiles {
		for _, h := range l.others() {
			if _, err := os.Stat(filepath.Join(l.brick(h, "dist"), f)); err == nil {
				v.onHost[h] = append(v.onHost[h], f)
			}
		}
	}
	if n := len(v.onHost[0]) + len(v.onHost[1]) + len(v.onHost[2]); n != len(v.distFiles) {
		t.Fatalf("dist files on the bricks: %v, want each of %d once", v.onHost, len(v.distFiles))
	}
	return v
}

// killLeader kills the Raft leader's host and checks that the two others
// elect a leader, take management changes, and serve the volumes. It
// returns the killed host.
func (l *lab) killLeader(v *labVolumes) int {
	t := l.t
	lead := l.leader(0)
	if lead < 0 {
		t.Fatalf("no leader in GET /v1/peers\n%s", l.logs())
	}
	alive := l.others(lead)
	t.Logf("leader is host %d; killing it", lead)
	if err := l.Hosts[lead].Kill(); err != nil {
		t.Fatal(err)
	}
	took := l.await("a surviving host leads", 20*time.Second, func() bool {
		return slices.Contains(alive, l.leader(alive[0]))
	})
	t.Logf("new leader: host %d, %s after the kill", l.leader(alive[0]), took.Round(time.Millisecond))
	for _, h := range alive {
		l.must(h, "volume", "set", "rep", "cluster.heal-interval", fmt.Sprintf("1.%d", h))
		if out := l.must(h, "volume", "info", "rep"); !strings.Contains(out, fmt.Sprintf("1.%d", h)) {
			t.Errorf("volume info on host %d does not show the option just set:\n%s", h, out)
		}
	}
	var repErr error
	if took, ok := l.try(20*time.Second, func() bool {
		repErr = readAll(v.repMnt, v.repFiles)
		return repErr == nil
	}); !ok {
		t.Errorf("replica 3 volume with host %d down: %v", lead, repErr)
	} else {
		t.Logf("every file of the replica 3 volume read %s after the new leader", took.Round(time.Millisecond))
	}
	v.repFiles = append(v.repFiles, writeFiles(t, v.repMnt, "r-after-kill", 2)...)
	survivors := append(slices.Clone(v.onHost[alive[0]]), v.onHost[alive[1]]...)
	var distErr error
	// Files of the distribute volume on the surviving hosts read, even
	// with the first brick's host (which answers for the root) down.
	if _, ok := l.try(10*time.Second, func() bool {
		distErr = readAll(v.distMnt, survivors)
		return distErr == nil
	}); !ok {
		t.Errorf("dist files on the surviving hosts %v (%v): %v", alive, v.onHost, distErr)
	}
	return lead
}

// restartHost restarts host h on its data and address and checks that
// every host sees it connected again and that its bricks serve again.
func (l *lab) restartHost(v *labVolumes, h int) {
	t := l.t
	if err := l.Hosts[h].Restart(l.ctx); err != nil {
		t.Fatal(err)
	}
	all := l.others()
	took := time.Duration(0)
	for _, o := range all {
		took += l.await(fmt.Sprintf("host %d sees the restarted host %d connected", o, h), 20*time.Second, func() bool {
			return slices.Equal(l.connected(o), all)
		})
	}
	t.Logf("host %d rejoined %s after its restart", h, took.Round(time.Millisecond))
	for _, o := range l.others(h) {
		if out := l.must(o, "peer", "status"); !strings.Contains(out, l.Hosts[h].Addr) || strings.Count(out, "(Connected)") != 2 {
			t.Errorf("peer status on host %d after host %d's restart:\n%s", o, h, out)
		}
	}
	l.await(fmt.Sprintf("the dist files on host %d read again", h), 30*time.Second, func() bool {
		return readAll(v.distMnt, v.onHost[h]) == nil
	})
	l.await("every file of the replica 3 volume reads", 20*time.Second, func() bool {
		return readAll(v.repMnt, v.repFiles) == nil
	})
}

// lastHostStanding kills every host but keep: a management change fails
// and says why, the volume whose brick is on keep is read and written,
// and the replica 3 volume answers at once (mortar's replicate refuses
// reads below a quorum of its replicas: ENOTCONN).
func (l *lab) lastHostStanding(v *labVolumes, keep int) {
	t := l.t
	for _, h := range l.others(keep) {
		if err := l.Hosts[h].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	out, err := l.mortar(keep, "volume", "set", "rep", "cluster.heal-interval", "3")
	t.Logf("volume set with 1 of 3 hosts: failed after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	if err == nil {
		t.Errorf("volume set with 1 of 3 hosts succeeded:\n%s", out)
	} else if lo := strings.ToLower(out); !strings.Contains(lo, "quorum") && !strings.Contains(lo, "no leader") {
		t.Errorf("volume set with 1 of 3 hosts: the error does not say no quorum / no leader: %v\n%s", err, out)
	}
	if err := readAll(v.soloMnt, v.soloFiles); err != nil {
		t.Errorf("volume on the last host: %v", err)
	}
	writeFiles(t, v.soloMnt, "s-alone", 2)
	start = time.Now()
	err = readAll(v.repMnt, v.repFiles[:1])
	t.Logf("replica 3 volume with 1 of 3 hosts: read %v after %s", err, time.Since(start).Round(time.Millisecond))
	if err != nil && !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("replica 3 volume with 1 of 3 hosts: %v, want the data or ENOTCONN", err)
	}
}

// TestMultiHostPartition cuts the Raft leader's link (packets dropped
// silently, processes running): the two others elect a leader and take
// changes, the cut-off node refuses changes saying it has no quorum or
// leader, and once the link is back it follows the cluster again and has
// the changes made meanwhile.
func TestMultiHostPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newMortarLab(t, ctx, 3)
	l.formCluster()
	lead := l.leader(0)
	if lead < 0 {
		t.Fatalf("no leader in GET /v1/peers\n%s", l.logs())
	}
	alive := l.others(lead)
	if err := l.CutLink(ctx, lead); err != nil {
		t.Fatal(err)
	}
	took := l.await("the connected hosts elect a leader", 20*time.Second, func() bool {
		return slices.Contains(alive, l.leader(alive[0]))
	})
	t.Logf("host %d cut off; host %d leads %s later", lead, l.leader(alive[0]), took.Round(time.Millisecond))
	create := []string{"volume", "create", "during-cut"}
	for _, h := range alive {
		create = append(create, l.Hosts[h].Addr+":"+l.brick(h, "during-cut"))
	}
	l.must(alive[1], append(create, "force")...)

	out, err := l.mortar(lead, "volume", "set", "during-cut", "cluster.heal-interval", "3")
	if lo := strings.ToLower(out); err == nil || (!strings.Contains(lo, "quorum") && !strings.Contains(lo, "leader")) {
		t.Errorf("a change on the cut-off host: %v\n%s; want a no quorum / no leader error", err, out)
	}

	if err := l.RestoreLink(ctx, lead); err != nil {
		t.Fatal(err)
	}
	all := l.others()
	took = l.await(fmt.Sprintf("host %d sees every node connected again", lead), 20*time.Second, func() bool {
		return slices.Equal(l.connected(lead), all) && slices.Contains(all, l.leader(lead))
	})
	t.Logf("link restored; host %d follows host %d %s later", lead, l.leader(lead), took.Round(time.Millisecond))
	l.await(fmt.Sprintf("host %d has the volume created while it was cut off", lead), 20*time.Second, func() bool {
		_, err := l.mortar(lead, "volume", "info", "during-cut")
		return err == nil
	})
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
