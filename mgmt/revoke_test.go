package mgmt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/tlsconf"
)

// machineDir copies what one machine of a TLS cluster holds of ca's
// directory (the CA's certificate, and certificate name with its key)
// into a directory of its own.
func (ca *testCA) machineDir(name string, kind tlsconf.Kind, hosts ...string) string {
	ca.t.Helper()
	ca.identity(name, kind, hosts...)
	dir := ca.t.TempDir()
	for _, f := range []string{tlsconf.CertPath("", "ca"), tlsconf.CertPath("", name), tlsconf.KeyPath("", name)} {
		data, err := os.ReadFile(filepath.Join(ca.dir, f))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f), data, 0o600)
		}
		if err != nil {
			ca.t.Fatal(err)
		}
	}
	return dir
}

// A certificate revoked through one node is refused by every node, each
// with its own TLS directory: the cluster keeps the serial, and each node
// adds it to its own list. Only a node certificate revokes; a bad serial
// is refused.
func TestRevocationReachesEveryNode(t *testing.T) {
	ca := newTestCA(t)
	var nodes []*clusterNode
	for i, host := range []string{"127.0.0.2", "127.0.0.3"} {
		cn := &clusterNode{dir: t.TempDir(), bricks: t.TempDir(), host: host}
		cn.api, cn.raftA = apiAndRaft(t, host)
		id, err := tlsconf.Load(ca.machineDir("node"+host, tlsconf.KindNode, host), "node"+host)
		if err != nil {
			t.Fatal(err)
		}
		n, err := Start(Config{DataDir: cn.dir, Listen: cn.api, RaftListen: cn.raftA, TLS: id, Logger: testLogger(t).With("node", i)})
		if err != nil {
			t.Fatal(err)
		}
		cn.n, cn.c = n, api.NewTLSClient(cn.api, id)
		t.Cleanup(cn.stop)
		nodes = append(nodes, cn)
	}
	ctx := ctxT(t)
	if _, err := nodes[0].c.Probe(ctx, nodes[1].api); err != nil {
		t.Fatal(err)
	}
	eveID, err := tlsconf.Load(ca.machineDir("eve", tlsconf.KindClient), "eve")
	if err != nil {
		t.Fatal(err)
	}
	eve := api.NewTLSClient(nodes[1].api, eveID)
	if _, err := eve.List(ctx); err != nil {
		t.Fatalf("eve before her revocation: %v", err)
	}
	cert, err := tlsconf.ReadCert(ca.dir, "eve")
	if err != nil {
		t.Fatal(err)
	}
	serial := cert.SerialNumber.Text(16)
	if err := eve.Revoke(ctx, serial, "eve"); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("a client certificate revokes: %v, want forbidden", err)
	}
	if err := nodes[0].c.Revoke(ctx, "not-hex", ""); !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("a bad serial: %v, want invalid", err)
	}
	if err := nodes[0].c.Revoke(ctx, serial, "eve, stolen laptop"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "eve refused by the other node", func() error {
		if _, err := api.NewTLSClient(nodes[1].api, eveID).List(ctx); err == nil {
			return errors.New("eve still lists the volumes")
		}
		return nil
	})
	for _, cn := range nodes {
		list, err := os.ReadFile(tlsconf.RevokedPath(cn.n.tls.Dir()))
		if err != nil || !containsLine(string(list), serial) {
			t.Fatalf("node %s's list: %q, %v; want serial %s", cn.host, list, err, serial)
		}
	}
	got, err := nodes[1].c.Revoked(ctx)
	if err != nil || got[serial] != "eve, stolen laptop" {
		t.Fatalf("the cluster's list: %v, %v", got, err)
	}
}

// containsLine reports whether some line of list begins with serial.
func containsLine(list, serial string) bool {
	for _, line := range strings.Split(list, "\n") {
		if strings.HasPrefix(line, serial+" ") {
			return true
		}
	}
	return false
}
