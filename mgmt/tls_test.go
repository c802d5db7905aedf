package mgmt

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/tlsconf"
	"github.com/mortarfs/mortar/volume"
)

// testCA is a TLS directory made as `mortar tls` makes one: a CA and
// certificates signed by it.
type testCA struct {
	t   *testing.T
	dir string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	dir := t.TempDir()
	if err := tlsconf.InitCA(dir, "test"); err != nil {
		t.Fatal(err)
	}
	return &testCA{t: t, dir: dir}
}

// identity issues (once) and loads the certificate name of kind.
func (ca *testCA) identity(name string, kind tlsconf.Kind, hosts ...string) *tlsconf.Identity {
	ca.t.Helper()
	if _, err := os.Stat(tlsconf.CertPath(ca.dir, name)); err != nil {
		if err := tlsconf.Issue(ca.dir, name, kind, hosts, 1); err != nil {
			ca.t.Fatal(err)
		}
	}
	id, err := tlsconf.Load(ca.dir, name)
	if err != nil {
		ca.t.Fatal(err)
	}
	return id
}

func (ca *testCA) client(addr, name string) *api.Client {
	return api.NewTLSClient(addr, ca.identity(name, tlsconf.KindClient))
}

// A TLS cluster: nodes talk to each other (probe, forwarding, Raft) over
// TLS with node certificates; a client without a certificate, or with one
// of another CA, is refused at the handshake; a client certificate reads
// but does not change the cluster, and gets a volume's spec only if the
// volume's auth rules admit it.
func TestTLSCluster(t *testing.T) {
	ca := newTestCA(t)
	var nodes []*clusterNode
	for i := range 2 {
		host := []string{"127.0.0.2", "127.0.0.3"}[i]
		cn := &clusterNode{dir: t.TempDir(), bricks: t.TempDir(), host: host}
		cn.api, cn.raftA = apiAndRaft(t, host)
		id := ca.identity("node"+host, tlsconf.KindNode, host)
		n, err := Start(Config{DataDir: cn.dir, Listen: cn.api, RaftListen: cn.raftA, TLS: id, Logger: testLogger(t).With("node", host)})
		if err != nil {
			t.Fatal(err)
		}
		cn.n = n
		cn.c = api.NewTLSClient(cn.api, id)
		t.Cleanup(cn.stop)
		nodes = append(nodes, cn)
	}
	ctx := ctxT(t)
	if _, err := nodes[0].c.Probe(ctx, nodes[1].api); err != nil {
		t.Fatalf("probe over TLS: %v", err)
	}
	// A change through the follower is forwarded to the leader over TLS,
	// and committed by Raft over TLS.
	d := t.TempDir()
	if _, err := nodes[1].c.CreateVolume(ctx, api.CreateVolumeRequest{Name: "tv", Bricks: []string{nodes[0].host + ":" + d}, Force: true}); err != nil {
		t.Fatalf("create through the follower: %v", err)
	}

	// No certificate: refused at the handshake.
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := plain.Get("https://" + nodes[0].api + "/v1/volumes"); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate got %s", resp.Status)
	}
	// Plain HTTP: no answer a client could take for the API's.
	if resp, err := http.Get("http://" + nodes[0].api + "/v1/volumes"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered")
		}
	}
	// Another CA's certificate: refused.
	other := newTestCA(t)
	foreign := api.NewTLSClient(nodes[0].api, other.identity("mallory", tlsconf.KindNode, "127.0.0.1"))
	if _, err := foreign.List(ctx); err == nil {
		t.Fatal("a certificate of another CA was accepted")
	}

	// A client certificate reads, but does not change.
	alice := ca.client(nodes[1].api, "alice")
	if _, err := alice.List(ctx); err != nil {
		t.Fatalf("a client lists volumes: %v", err)
	}
	if _, err := alice.CreateVolume(ctx, api.CreateVolumeRequest{Name: "x", Bricks: []string{nodes[0].host + ":" + t.TempDir()}, Force: true}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("a client creates a volume: %v, want forbidden", err)
	}
	// The spec, only if the volume's rules admit the client.
	if _, err := nodes[0].c.Set(ctx, "tv", options.OptAuthAllow, "bob,carol-*"); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].c.Start(ctx, "tv", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the rule on the follower", func() error {
		_, err := alice.Spec(ctx, "tv")
		if !errors.Is(err, api.ErrForbidden) {
			return errors.New("alice still gets the spec")
		}
		return nil
	})
	carol := ca.client(nodes[1].api, "carol-laptop")
	var spec volume.Spec
	waitFor(t, 5*time.Second, "an allowed client's spec", func() error {
		var err error
		spec, err = carol.Spec(ctx, "tv")
		return err
	})
	// Its bricks take the allowed client over TLS.
	carolID := ca.identity("carol-laptop", tlsconf.KindClient)
	g, err := volume.Build(spec, volume.BuildOptions{Dial: carolID.Dialer(5 * time.Second), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	waitFor(t, 10*time.Second, "the brick over TLS", func() error {
		_, err := g.Top.Lookup(ctx, "/")
		return err
	})
	mustWrite(t, g.Top, "/secret", []byte("over TLS"))
	if got := mustRead(t, g.Top, "/secret"); string(got) != "over TLS" {
		t.Fatalf("read over TLS: %q", got)
	}
	// A plain client gets nothing from the brick.
	plainG, err := volume.Build(spec, volume.BuildOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plainG.Close() })
	neverReaches(t, plainG, "a plain client")
	if _, err := nodes[0].c.Set(ctx, "tv", options.OptAuthReject, "carol-laptop"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "reject to win", func() error {
		if _, err := carol.Spec(ctx, "tv"); !errors.Is(err, api.ErrForbidden) {
			return errors.New("carol still gets the spec")
		}
		return nil
	})
	// ... at the bricks too, for a client that kept the spec: a new
	// connection is refused at the handshake.
	waitFor(t, 5*time.Second, "the brick's rules to change", func() error {
		r, err := tlsconf.ReadAuthFile(nodes[0].n.authFile(spec.Bricks[0].ID))
		if err != nil || len(r.Reject) == 0 {
			return fmt.Errorf("rules %+v, %v", r, err)
		}
		return nil
	})
	again, err := volume.Build(spec, volume.BuildOptions{Dial: carolID.Dialer(5 * time.Second), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	neverReaches(t, again, "a rejected client")
}

// neverReaches checks that g's client does not reach its brick: lookups
// keep failing for as long as an admitted client takes to connect (a
// refusal is no event a test can wait on).
func neverReaches(t *testing.T, g *volume.Graph, who string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := g.Top.Lookup(ctxT(t), "/secret"); err == nil {
			t.Fatalf("%s reached a TLS brick", who)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
