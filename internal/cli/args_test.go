package cli

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/brickrun"
	"github.com/mortarfs/mortar/volume/options"

	"github.com/mortarfs/mortar/volume"
)

func TestParseCreateArgs(t *testing.T) {
	cases := []struct {
		args []string
		want api.CreateVolumeRequest
	}{
		{
			[]string{"gv0", "h:/b1", "h:/b2"},
			api.CreateVolumeRequest{Name: "gv0", Bricks: []string{"h:/b1", "h:/b2"}},
		},
		{
			[]string{"gv0", "replica", "3", "arbiter", "1", "h:/b1", "h:/b2", "h:/b3", "force"},
			api.CreateVolumeRequest{Name: "gv0", Replica: 3, Arbiter: 1, Bricks: []string{"h:/b1", "h:/b2", "h:/b3"}, Force: true},
		},
		{
			[]string{"gv0", "disperse", "h:/b1", "h:/b2", "h:/b3"},
			api.CreateVolumeRequest{Name: "gv0", Disperse: -1, Bricks: []string{"h:/b1", "h:/b2", "h:/b3"}},
		},
		{
			[]string{"gv0", "disperse-data", "4", "redundancy", "2", "transport", "tcp", "[::1]:/b1"},
			api.CreateVolumeRequest{Name: "gv0", DisperseData: 4, Redundancy: 2, Bricks: []string{"[::1]:/b1"}},
		},
		{
			[]string{"gv0", "disperse", "6", "redundancy", "2", "h:/b1", "h:/b2", "h:/b3", "h:/b4", "h:/b5", "h:/b6"},
			api.CreateVolumeRequest{Name: "gv0", Disperse: 6, Redundancy: 2, Bricks: []string{"h:/b1", "h:/b2", "h:/b3", "h:/b4", "h:/b5", "h:/b6"}},
		},
		{
			[]string{"gv0", "disperse", "6", "disperse-data", "4", "h:/b1"},
			api.CreateVolumeRequest{Name: "gv0", Disperse: 6, DisperseData: 4, Bricks: []string{"h:/b1"}},
		},
		{
			[]string{"gv0", "REPLICA", "2", "h:/b1", "h:/b2"},
			api.CreateVolumeRequest{Name: "gv0", Replica: 2, Bricks: []string{"h:/b1", "h:/b2"}},
		},
	}
	for _, c := range cases {
		got, err := parseCreateArgs(c.args)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseCreateArgs(%q) = %+v, %v; want %+v", c.args, got, err, c.want)
		}
	}
	bad := map[string][]string{
		"needs a positive count": {"gv0", "replica", "h:/b1"},
		"given twice":            {"gv0", "replica", "2", "replica", "2", "h:/b1"},
		"unexpected argument":    {"gv0", "/data/b1"},
		"no bricks":              {"gv0", "force"},
		"transport tcp":          {"gv0", "transport", "rdma", "h:/b1"},
		"redundancy needs":       {"gv0", "disperse", "6", "redundancy", "h:/b1"},
		"disperse-data needs":    {"gv0", "disperse-data", "0", "h:/b1"},
		"disperse given twice":   {"gv0", "disperse", "disperse", "3", "h:/b1"},
	}
	for msg, args := range bad {
		if _, err := parseCreateArgs(args); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("parseCreateArgs(%q) = %v; want an error with %q", args, err, msg)
		}
	}
}

func TestParseMountOptions(t *testing.T) {
	o, err := parseMountOptions([]string{"defaults,_netdev,attr-timeout=2.5", "entry-timeout=0,x-systemd.automount,negative-timeout=1,log-file=/tmp/m.log,debug"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.AttrTimeout == nil || *o.AttrTimeout != 2500*time.Millisecond {
		t.Errorf("attr-timeout = %v", o.AttrTimeout)
	}
	if o.EntryTimeout == nil || *o.EntryTimeout != 0 || o.NegativeTimeout == nil || *o.NegativeTimeout != time.Second {
		t.Errorf("entry/negative timeouts = %v %v", o.EntryTimeout, o.NegativeTimeout)
	}
	if o.LogFile != "/tmp/m.log" || !o.Debug {
		t.Errorf("options = %+v", o)
	}
	for opt, msg := range map[string]string{
		"bogus":             "unknown mount option",
		"attr-timeout=soon": "number of seconds",
		"attr-timeout":      "number of seconds",
		"ro":                "not supported yet",
	} {
		if _, err := parseMountOptions([]string{opt}, false); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("option %q: %v; want %q", opt, err, msg)
		}
	}
	if _, err := parseMountOptions([]string{"bogus,noatime"}, true); err != nil {
		t.Errorf("sloppy: %v", err)
	}
}

func TestParseSource(t *testing.T) {
	cases := []struct{ in, server, name string }{
		{"localhost:/gv0", "localhost:7420", "gv0"},
		{"server1:7500:/gv0", "server1:7500", "gv0"},
		{"[::1]:/gv0", "[::1]:7420", "gv0"},
		{"[::1]:7500:/gv0", "[::1]:7500", "gv0"},
		{"10.0.0.5:/a.b-c", "10.0.0.5:7420", "a.b-c"},
	}
	for _, c := range cases {
		s, n, err := parseSource(c.in)
		if err != nil || s != c.server || n != c.name {
			t.Errorf("parseSource(%q) = %q, %q, %v", c.in, s, n, err)
		}
	}
	for _, in := range []string{"gv0", "host:gv0", ":/gv0", "host:/", "host:/a/b"} {
		if _, _, err := parseSource(in); err == nil {
			t.Errorf("parseSource(%q) succeeded", in)
		}
	}
}

func TestParseHelperArgs(t *testing.T) {
	// As mount(8) calls it: mount -t mortar -o defaults,_netdev h:/gv0 /mnt/gv0
	h, err := parseHelperArgs([]string{"h:/gv0", "/mnt/gv0", "-o", "rw,_netdev,attr-timeout=1"})
	if err != nil {
		t.Fatal(err)
	}
	want := helperArgs{Source: "h:/gv0", Dir: "/mnt/gv0", Options: []string{"rw,_netdev,attr-timeout=1"}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("got %+v, want %+v", h, want)
	}
	h, err = parseHelperArgs([]string{"-sfnv", "-oro", "-t", "mortar", "h:/gv0", "/mnt"})
	if err != nil || !h.Sloppy || !h.Fake || !h.Verbose || h.Options[0] != "ro" || h.Dir != "/mnt" {
		t.Errorf("got %+v, %v", h, err)
	}
	for _, args := range [][]string{{"h:/gv0"}, {"h:/gv0", "/mnt", "extra"}, {"h:/gv0", "/mnt", "-o"}, {"h:/gv0", "/mnt", "-x"}, {"-N", "/proc/1/ns/mnt", "h:/gv0", "/mnt"}} {
		if _, err := parseHelperArgs(args); err == nil {
			t.Errorf("parseHelperArgs(%q) succeeded", args)
		}
	}
}

func TestMountRequestAndLog(t *testing.T) {
	req, err := newMountRequest("h:/gv0", "/mnt/data/gv0", []string{"defaults,log-level=debug"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if req.Server != "h:7420" || req.Volume != "gv0" || req.Mountpoint != "/mnt/data/gv0" || req.Opts.LogLevel != "debug" {
		t.Errorf("request = %+v", req)
	}
	if !strings.HasSuffix(req.LogFile, "/mount-gv0-mnt-data-gv0.log") {
		t.Errorf("log file = %s", req.LogFile)
	}
	// mount -f (fake) checks without mounting.
	if code := mountHelperMain([]string{"h:/gv0", t.TempDir(), "-f", "-o", "defaults"}, &strings.Builder{}); code != 0 {
		t.Errorf("fake mount exit status %d", code)
	}
	var stderr strings.Builder
	if code := mountHelperMain([]string{"h:/gv0", "/nonexistent/dir", "-f"}, &stderr); code == 0 || !strings.Contains(stderr.String(), "mount.mortar: mountpoint") {
		t.Errorf("missing mountpoint: %d %q", code, stderr.String())
	}
}

// TestMainAsMountHelper: invoked as mount.mortar, the binary parses
// mount(8)'s arguments (here with -f, mount's "fake": check, do not mount).
func TestMainAsMountHelper(t *testing.T) {
	if code := Main([]string{"/sbin/mount.mortar", "h:/gv0", t.TempDir(), "-f", "-o", "defaults,_netdev"}); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}

func TestDevLayout(t *testing.T) {
	good := []struct {
		dc                   devConfig
		bricks, replica      int
		arbiter, wantArbiter bool
	}{
		{devConfig{Bricks: 3}, 3, 0, false, false},
		{devConfig{Bricks: 3, Replica: 2}, 2, 2, false, false},
		{devConfig{Bricks: 6, BricksSet: true, Replica: 3}, 6, 3, false, false},
		{devConfig{Bricks: 3, Arbiter: true}, 3, 3, true, true},
		{devConfig{Bricks: 9, BricksSet: true, Replica: 3, Arbiter: true}, 9, 3, true, true},
	}
	for _, g := range good {
		dc := g.dc
		if err := dc.checkLayout(); err != nil || dc.Bricks != g.bricks || dc.Replica != g.replica || dc.Arbiter != g.wantArbiter {
			t.Errorf("checkLayout(%+v) = %v → %+v", g.dc, err, dc)
		}
		req := dc.request([]string{"/b"})
		if req.Replica != g.replica || (req.Arbiter == 1) != g.wantArbiter || req.Bricks[0] != "localhost:/b" {
			t.Errorf("request of %+v = %+v", dc, req)
		}
	}
	bad := map[string]devConfig{
		"not a multiple":      {Bricks: 4, BricksSet: true, Replica: 3},
		"must be 2 to 16":     {Bricks: 1, Replica: 1},
		"needs --replica 3":   {Bricks: 2, Replica: 2, Arbiter: true},
		"at least 1":          {Bricks: 0},
		"must be 2 to 16 ":    {Bricks: 17, Replica: 17},
		"must be 2 to 16  ":   {Bricks: 3, Replica: -3},
		"needs --replica 3  ": {Bricks: 4, BricksSet: true, Replica: 4, Arbiter: true},
	}
	for msg, dc := range bad {
		if err := dc.checkLayout(); err == nil || !strings.Contains(err.Error(), strings.TrimSpace(msg)) {
			t.Errorf("checkLayout(%+v) = %v; want %q", dc, err, strings.TrimSpace(msg))
		}
	}
}

func TestDevDisperseLayout(t *testing.T) {
	good := []struct {
		dc                           devConfig
		bricks, disperse, redundancy int
	}{
		{devConfig{Bricks: 3, Disperse: 6, Redundancy: 2}, 6, 6, 2},
		{devConfig{Bricks: 3, Disperse: 6}, 6, 6, 2}, // redundancy: a third
		{devConfig{Bricks: 3, Disperse: 3}, 3, 3, 1},
		{devConfig{Bricks: 12, BricksSet: true, Disperse: 6, Redundancy: 2}, 12, 6, 2},
		{devConfig{Bricks: 7, Disperse: 7, Redundancy: 3}, 7, 7, 3},
	}
	for _, g := range good {
		dc := g.dc
		if err := dc.checkLayout(); err != nil || dc.Bricks != g.bricks || dc.Disperse != g.disperse || dc.Redundancy != g.redundancy || dc.Replica != 0 {
			t.Errorf("checkLayout(%+v) = %v → %+v", g.dc, err, dc)
			continue
		}
		req := dc.request([]string{"/b"})
		if req.Disperse != g.disperse || req.Redundancy != g.redundancy || req.Replica != 0 || req.Arbiter != 0 {
			t.Errorf("request of %+v = %+v", dc, req)
		}
	}
	bad := map[string]devConfig{
		"do not go together":  {Bricks: 6, Disperse: 6, Replica: 3},
		"do not go together ": {Bricks: 6, Disperse: 6, Arbiter: true},
		"--redundancy needs":  {Bricks: 6, Redundancy: 2},
		"not below half":      {Bricks: 6, Disperse: 6, Redundancy: 3},
		"at least 3 bricks":   {Bricks: 2, Disperse: 2},
		"not a multiple":      {Bricks: 8, BricksSet: true, Disperse: 6, Redundancy: 2},
		"at least 1":          {Bricks: 6, Disperse: 6, Redundancy: -1},
		"at most 63":          {Bricks: 65, Disperse: 65, Redundancy: 2},
		"at least 3 bricks  ": {Bricks: 6, Disperse: -6},
		"not a multiple  ":    {Bricks: 0, BricksSet: true, Disperse: 3},
	}
	for msg, dc := range bad {
		if err := dc.checkLayout(); err == nil || !strings.Contains(err.Error(), strings.TrimSpace(msg)) {
			t.Errorf("checkLayout(%+v) = %v; want %q", dc, err, strings.TrimSpace(msg))
		}
	}
}

// The brick command accepts exactly the arguments the node runs it with.
func TestBrickArgs(t *testing.T) {
	for _, kind := range []string{"arbiter", "disperse", "plain", "tls"} {
		want := brickrun.Config{Volume: "gv0", VolumeID: "vid", BrickID: "bid", Path: "/data/b1", Listen: "127.0.0.1:0",
			Arbiter: kind == "arbiter", Disperse: kind == "disperse"}
		if kind == "tls" {
			want.TLSDir, want.TLSName, want.AuthFile, want.MaxConnsPerClient = "/etc/mortar/tls", "node1", "/var/lib/mortar/auth/bid.auth", 9
		}
		args := brickrun.Args(want, "debug")
		if args[0] != "brick" {
			t.Fatalf("args %q do not start with the brick command", args)
		}
		cmd := newBrickCommand()
		if err := cmd.ParseFlags(args[1:]); err != nil {
			t.Fatalf("parse %q: %v", args, err)
		}
		f := cmd.Flags()
		flags := map[string]string{"volume": "gv0", "volume-id": "vid", "brick-id": "bid", "path": "/data/b1", "listen": "127.0.0.1:0",
			"arbiter": strconv.FormatBool(want.Arbiter), "disperse": strconv.FormatBool(want.Disperse), "log-level": "debug", "ready-fd": "3",
			"tls-dir": want.TLSDir, "tls-name": want.TLSName, "auth-file": want.AuthFile, "max-conns-per-client": strconv.Itoa(want.MaxConnsPerClient)}
		for flag, v := range flags {
			if got := f.Lookup(flag).Value.String(); got != v {
				t.Errorf("%s brick: --%s = %q, want %q", kind, flag, got, v)
			}
		}
	}
	if !newBrickCommand().Hidden {
		t.Error("mortar brick shows in help")
	}
	// Run by hand on a directory that is no brick, it says why.
	_, err := run(t, "brick", "--volume-id", "v", "--brick-id", "b", "--path", t.TempDir(), "--listen", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "mortar brick") {
		t.Errorf("brick on an unmarked dir: %v", err)
	}
}

// performance.client-cache off makes the kernel cache timeouts 0 unless
// the volume or -o sets them.
func TestFuseOptionsClientCacheOff(t *testing.T) {
	spec := volume.Spec{Options: map[string]string{options.OptClientCache: "off", "performance.entry-timeout": "2"}}
	two := 3 * time.Second
	o := fuseOptions(spec, mountRequest{Opts: mountOptions{NegativeTimeout: &two}}, nil)
	if o.AttrTimeout >= 0 || o.EntryTimeout != 2*time.Second || o.NegativeTimeout != two {
		t.Errorf("client caches off: attr %v entry %v negative %v; want off, 2s (set), 3s (-o)", o.AttrTimeout, o.EntryTimeout, o.NegativeTimeout)
	}
	o = fuseOptions(volume.Spec{}, mountRequest{}, nil)
	if o.AttrTimeout != time.Second || o.EntryTimeout != time.Second || o.NegativeTimeout >= 0 {
		t.Errorf("defaults: attr %v entry %v negative %v", o.AttrTimeout, o.EntryTimeout, o.NegativeTimeout)
	}
}
