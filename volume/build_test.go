package volume

import (
	"fmt"
	"github.com/mortarfs/mortar/volume/options"
	"strings"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/crypt"
	"github.com/mortarfs/mortar/layer/mdcache"
	"github.com/mortarfs/mortar/layer/nlcache"
	"github.com/mortarfs/mortar/layer/quickread"
	"github.com/mortarfs/mortar/layer/readdirahead"
	"github.com/mortarfs/mortar/layer/writebehind"
)

// stackOf names the layers from the top down to the first that is
// neither the negative-lookup cache nor quick-read.
func stackOf(top layer.Layer) string {
	switch l := top.(type) {
	case *readdirahead.Layer:
		return "readdirahead " + stackOf(l.Child)
	case *mdcache.Layer:
		return "mdcache " + stackOf(l.Child)
	case *nlcache.Layer:
		return "nlcache " + stackOf(l.Child)
	case *quickread.Layer:
		return "quickread " + stackOf(l.Child)
	case *writebehind.Layer:
		if l.Off() {
			return "writebehind(off) " + stackOf(l.Child)
		}
		return "writebehind " + stackOf(l.Child)
	}
	return fmt.Sprintf("%T", top)
}

// A dispersed spec builds (one disperse layer per set, under distribute);
// the bricks need not be up.
func TestBuildDisperse(t *testing.T) {
	for _, n := range []int{6, 12} {
		bs := bricks(n)
		for i := range bs {
			bs[i].Addr = "127.0.0.1:1" // nothing listens: connections fail in the background
		}
		g, err := Build(Spec{Name: "ec", ID: "id", Type: Disperse, Bricks: bs, Disperse: 6, Redundancy: 2}, BuildOptions{})
		if err != nil {
			t.Fatalf("%d bricks: %v", n, err)
		}
		if g.Top == nil || len(g.closers) != n {
			t.Errorf("%d bricks: graph %+v", n, g)
		}
		g.Close()
	}
	if _, err := Build(Spec{Name: "ec", ID: "id", Type: Disperse, Bricks: bricks(6), Disperse: 6, Redundancy: 3}, BuildOptions{}); err == nil {
		t.Error("disperse 6 redundancy 3 built")
	}
}

// Quick-read goes on top of distribute unless it is off, the volume is
// encrypted (it would keep ciphertext), or the graph moves files (Ciphertext: rebalance wants
// distribute on top). The negative-lookup cache goes on top of them, and
// the directory attribute cache on them, and readdir-ahead on top of all,
// unless they are off or the graph moves files.
func TestBuildQuickRead(t *testing.T) {
	bs := bricks(3)
	for i := range bs {
		bs[i].Addr = "127.0.0.1:1"
	}
	for _, tc := range []struct {
		name    string
		options map[string]string
		opts    BuildOptions
		want    string
	}{
		{"default", nil, BuildOptions{}, "readdirahead mdcache nlcache writebehind quickread *distribute.Distribute"},
		{"off", map[string]string{options.OptQuickRead: "off"}, BuildOptions{}, "readdirahead mdcache nlcache writebehind *distribute.Distribute"},
		{"nl-cache off", map[string]string{options.OptNlCache: "off"}, BuildOptions{}, "readdirahead mdcache writebehind quickread *distribute.Distribute"},
		{"stat-prefetch off", map[string]string{options.OptStatPrefetch: "off"}, BuildOptions{}, "readdirahead nlcache writebehind quickread *distribute.Distribute"},
		{"write-behind off", map[string]string{options.OptWriteBehind: "off"}, BuildOptions{}, "readdirahead mdcache nlcache writebehind(off) quickread *distribute.Distribute"},
		{"readdir-ahead off", map[string]string{options.OptReaddirAhead: "off"}, BuildOptions{}, "mdcache nlcache writebehind quickread *distribute.Distribute"},
		{"client caches off", map[string]string{options.OptClientCache: "off"}, BuildOptions{}, "writebehind(off) *distribute.Distribute"},
		{"encrypted", map[string]string{options.OptEncryption: "on"}, BuildOptions{Key: make([]byte, crypt.KeySize)}, "readdirahead mdcache nlcache writebehind *crypt.Layer"},
		{"rebalance", nil, BuildOptions{Ciphertext: true}, "*distribute.Distribute"},
		{"encrypted rebalance", map[string]string{options.OptEncryption: "on"}, BuildOptions{Ciphertext: true}, "*distribute.Distribute"},
	} {
		g, err := Build(Spec{Name: "r", ID: "id", Type: Replicate, Replica: 3, Bricks: bs, Options: tc.options}, tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := stackOf(g.Top); got != tc.want {
			t.Errorf("%s: top is %s, want %s", tc.name, got, tc.want)
		}
		g.Close()
	}
	bs = bricks(6)
	for i := range bs {
		bs[i].Addr = "127.0.0.1:1"
	}
	g, err := Build(Spec{Name: "ec", ID: "id", Type: Disperse, Bricks: bs, Disperse: 6, Redundancy: 2}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := stackOf(g.Top); got != "readdirahead mdcache nlcache writebehind quickread *distribute.Distribute" {
		t.Errorf("dispersed: top is %s", got)
	}
	g.Close()
}

// disperse.keep-undo is on unless set off.
func TestDisperseOptions(t *testing.T) {
	for value, want := range map[string]bool{"": false, "on": false, "off": true} {
		spec := Spec{Options: map[string]string{}}
		if value != "" {
			spec.Options[options.OptKeepUndo] = value
		}
		if got := disperseOptions(spec, nil).NoUndo; got != want {
			t.Errorf("%s %q: NoUndo %v, want %v", options.OptKeepUndo, value, got, want)
		}
	}
}

func TestQuickReadOptions(t *testing.T) {
	got := quickReadOptions(Spec{Options: map[string]string{options.OptQuickReadMaxFileSize: "4096", options.OptQuickReadCacheTimeout: "0.25"}})
	if got.MaxFileSize != 4096 || got.Timeout != 250*time.Millisecond {
		t.Errorf("set: %+v", got)
	}
	got = quickReadOptions(Spec{Options: map[string]string{options.OptQuickReadMaxFileSize: "big"}})
	if got.MaxFileSize != quickread.DefaultMaxFileSize || got.Timeout != quickread.DefaultTimeout {
		t.Errorf("unset or malformed: %+v", got)
	}
}

// Lock leases are on unless the volume turns them, or every client cache,
// off.
func TestBrickClientConfigLeases(t *testing.T) {
	for opts, want := range map[string]bool{"": false, options.OptLockLeases + "=off": true, options.OptClientCache + "=off": true} {
		spec := Spec{Options: map[string]string{}}
		if k, v, ok := strings.Cut(opts, "="); ok {
			spec.Options[k] = v
		}
		if got := BrickClientConfig(spec, Brick{}).NoLeases; got != want {
			t.Errorf("options %q: NoLeases %v, want %v", opts, got, want)
		}
	}
}
