package cli

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mortarfs/mortar/mgmt"
)

// run executes the mortar command line and returns its output and error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestVolumeCommands(t *testing.T) {
	n, err := mgmt.Start(mgmt.Config{
		DataDir: t.TempDir(),
		Listen:  "127.0.0.1:0",
		Logger:  slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	srv := "--server=" + n.ListenAddr()
	b1, b2 := filepath.Join(t.TempDir(), "b1"), filepath.Join(t.TempDir(), "b2")
	os.Mkdir(b1, 0o755)
	os.Mkdir(b2, 0o755)

	steps := []struct {
		args    []string
		want    []string // substrings of the output, or of the error
		wantErr bool
	}{
		{[]string{"volume", "list", srv}, []string{"No volumes present"}, false},
		{[]string{"volume", "create", "gv0", "localhost:" + b1, "127.0.0.1:" + b2, srv}, []string{"volume create: gv0: success: please start the volume"}, false},
		{[]string{"volume", "create", "gv1", "replica", "3", "localhost:" + b1, srv}, []string{"volume create: gv1: failed: replicated volumes are not supported yet"}, true},
		{[]string{"volume", "start", "gv0", srv}, []string{"volume start: gv0: success"}, false},
		{[]string{"volume", "set", "gv0", "performance.attr-timeout", "3", srv}, []string{"volume set: success"}, false},
		{[]string{"volume", "set", "gv0", "nonsense", "3", srv}, []string{"known options: network.ping-timeout"}, true},
		{[]string{"volume", "info", "gv0", srv}, []string{
			"Volume Name: gv0\n", "Type: Distribute\n", "Status: Started\n", "Number of Bricks: 2\n",
			"Bricks:\nBrick1: localhost:" + b1 + "\nBrick2: 127.0.0.1:" + b2 + "\n",
			"Options Reconfigured:\nperformance.attr-timeout: 3\n",
		}, false},
		{[]string{"volume", "status", srv}, []string{"Status of volume: gv0 (started)", "Brick localhost:" + b1, " Y "}, false},
		{[]string{"volume", "list", srv}, []string{"gv0\n"}, false},
		{[]string{"volume", "delete", "gv0", srv}, []string{"volume delete: gv0: failed: volume gv0 is started; stop it first"}, true},
		{[]string{"volume", "stop", "gv0", srv}, []string{"volume stop: gv0: success"}, false},
		{[]string{"volume", "delete", "gv0", srv}, []string{"volume delete: gv0: success"}, false},
		{[]string{"volume", "info", "gv0", srv}, []string{"volume info: gv0: failed: volume gv0 does not exist"}, true},
		{[]string{"volume", "start", srv}, []string{"usage: mortar volume start NAME [force]"}, true},
		{[]string{"volume", "start", "gv0", "now", srv}, []string{"only \"force\" may follow"}, true},
	}
	for _, s := range steps {
		out, err := run(t, s.args...)
		if (err != nil) != s.wantErr {
			t.Fatalf("mortar %s: err %v, output:\n%s", strings.Join(s.args, " "), err, out)
		}
		if err != nil {
			out += err.Error()
		}
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				t.Errorf("mortar %s: output lacks %q:\n%s", strings.Join(s.args, " "), w, out)
			}
		}
	}
}

func TestServerUnreachable(t *testing.T) {
	_, err := run(t, "volume", "list", "--server", "127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "cannot reach mortar server at 127.0.0.1:1") {
		t.Fatalf("unreachable server: %v", err)
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil || !strings.HasPrefix(out, "mortar dev (go") {
		t.Fatalf("version: %q, %v", out, err)
	}
}
