package bench

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestNetTopoShapes makes a two-server topology, checks the shaping with a
// small TCP transfer and that Close leaves no namespace behind. It needs
// root and iproute2, and is skipped otherwise.
func TestNetTopoShapes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("tc"); err != nil {
		t.Skip("needs tc")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topo, err := newNetTopo(ctx, 2, 100)
	if err != nil {
		t.Skipf("cannot make namespaces here: %v", err)
	}
	defer topo.Close()
	if got := topo.Setup(); len(got.Servers) != 2 || got.ServerAddrs[1] != "10.231.1.1" {
		t.Fatalf("setup = %+v", got)
	}
	up, down, err := topo.linkThroughput(ctx, 0, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100 Mbit/s link: up %.1f MB/s, down %.1f MB/s", up, down)
	for _, v := range []float64{up, down} {
		if v < 2 || v > 14 { // a loaded machine slows it; unshaped it would be GB/s
			t.Errorf("shaped to 12.5 MB/s, measured %.1f MB/s", v)
		}
	}
	if err := topo.Close(); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), strings.TrimSuffix(topo.Client, "cli")) {
		t.Fatalf("namespaces left: %s", out)
	}
}
