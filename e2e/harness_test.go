// Package e2e tests the real mortar binary end to end: server processes on
// 127.0.0.1, volumes created with the CLI, FUSE mounts made with
// `mortar mount` and `mount -t mortar`, and real programs (cp, tar, git,
// sqlite3) working on them.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/fusebridge/posixtest"
	"github.com/mortarfs/mortar/tlsconf"
)

// mortarBin is the binary under test, built once by TestMain.
var mortarBin string

// tlsDir, with MORTAR_TEST_TLS=1, is a TLS directory made by TestMain: the
// servers run with the node certificate "node" (which the CLI presents
// too: changes need a node certificate) and mounts present the client
// certificate "client". Every test then runs on a TLS cluster.
var tlsDir string

// setupTLS makes tlsDir's CA and certificates in dir.
func setupTLS(dir string) error {
	if err := tlsconf.InitCA(dir, "e2e"); err != nil {
		return err
	}
	if err := tlsconf.Issue(dir, "node", tlsconf.KindNode, []string{"127.0.0.1", "localhost"}, 1); err != nil {
		return err
	}
	return tlsconf.Issue(dir, "client", tlsconf.KindClient, nil, 1)
}

func TestMain(m *testing.M) {
	posixtest.HelperMain()
	dir, err := os.MkdirTemp("", "mortar-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mortarBin = filepath.Join(dir, "mortar")
	if bin := os.Getenv("MORTAR_TEST_BIN"); bin != "" {
		// A binary built elsewhere (another tree, a release) under test.
		mortarBin = bin
	} else {
		build := exec.Command("go", "build", "-o", mortarBin, "../cmd/mortar")
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building mortar:", err)
			os.Exit(1)
		}
	}
	if os.Getenv("MORTAR_TEST_TLS") == "1" {
		tlsDir = filepath.Join(dir, "tls")
		if err := setupTLS(tlsDir); err != nil {
			fmt.Fprintln(os.Stderr, "making TLS certificates:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// node is a `mortar server` process.
type node struct {
	t    *testing.T
	data string
	addr string
	cmd  *exec.Cmd
	exit chan error
	// defaults: started without --listen (addr is then the default).
	defaults bool
	// multiplex: every brick in one process (the default); without it,
	// started with --brick-multiplex=false.
	multiplex bool
	// keep: with multiplex, the bricks outlive the server (the default);
	// without it, started with --keep-bricks=false, so that no brick
	// host outlives the test.
	keep bool
	// steps: what a test did, kept with the logs (keepLogs).
	steps []string
}

// step notes what the test does now, with the time, for keepLogs.
func (n *node) step(format string, args ...any) {
	n.steps = append(n.steps, time.Now().UTC().Format("15:04:05.000000 ")+fmt.Sprintf(format, args...))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startNode starts a server on a fresh data directory.
func startNode(t *testing.T) *node {
	t.Helper()
	n := &node{t: t, data: t.TempDir(), addr: freeAddr(t)}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *node) start() {
	n.t.Helper()
	log, err := os.OpenFile(filepath.Join(n.data, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	defer log.Close()
	n.cmd = exec.Command(mortarBin, "server", "--data", filepath.Join(n.data, "state"), "--log-level", "debug")
	if !n.defaults {
		n.cmd.Args = append(n.cmd.Args, "--listen", n.addr)
	}
	if tlsDir != "" {
		n.cmd.Args = append(n.cmd.Args, "--tls-dir", tlsDir, "--tls-name", "node")
	}
	if !n.multiplex {
		// A process per brick, so that a test can kill one alone.
		n.cmd.Args = append(n.cmd.Args, "--brick-multiplex=false")
	} else if !n.keep {
		n.cmd.Args = append(n.cmd.Args, "--keep-bricks=false")
	}
	n.cmd.Stdout, n.cmd.Stderr = log, log
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.exit = make(chan error, 1)
	go func(c *exec.Cmd, exit chan error) { exit <- c.Wait() }(n.cmd, n.exit)
	n.waitReady()
}

// waitReady polls the management API: a starting process has no event to
// wait on.
func (n *node) waitReady() {
	n.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-n.exit:
			n.t.Fatalf("mortar server exited: %v\n%s", err, n.log())
		default:
		}
		resp, err := apiGet(n.addr, "/v1/node")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.t.Fatalf("mortar server at %s not ready\n%s", n.addr, n.log())
}

// apiGet GETs path from the node at addr, over TLS with the node
// certificate when tlsDir is set.
func apiGet(addr, path string) (*http.Response, error) {
	if tlsDir == "" {
		return http.Get("http://" + addr + path)
	}
	id, err := tlsconf.Load(tlsDir, "node")
	if err != nil {
		return nil, err
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: id.ClientConfig()}}
	return c.Get("https://" + addr + path)
}

func (n *node) log() string {
	b, _ := os.ReadFile(filepath.Join(n.data, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// keepLogs copies the node's server, mount and brick logs and vol's
// bricks (with their extended attributes), which go with the test's
// temporary directory, to a directory of their own under the system's
// temporary directory, with the steps the test noted, for a failure to
// be looked into; it returns that directory.
func (n *node) keepLogs(vol string) string {
	keep := filepath.Join(os.TempDir(), fmt.Sprintf("mortar-e2e-%s-%d", vol, time.Now().UnixNano()))
	if err := os.MkdirAll(keep, 0o755); err != nil {
		return "(not kept: " + err.Error() + ")"
	}
	logs, _ := filepath.Glob(filepath.Join(n.data, "*.log"))
	bricks, _ := filepath.Glob(filepath.Join(n.data, "state", "logs", "bricks", "*.log"))
	for _, l := range append(logs, bricks...) {
		if b, err := os.ReadFile(l); err == nil {
			os.WriteFile(filepath.Join(keep, filepath.Base(l)), b, 0o644)
		}
	}
	os.WriteFile(filepath.Join(keep, "steps.log"), []byte(strings.Join(n.steps, "\n")+"\n"), 0o644)
	dirs, _ := filepath.Glob(filepath.Join(n.data, vol+"-b*"))
	if len(dirs) > 0 {
		exec.Command("cp", append([]string{"-a"}, append(dirs, keep)...)...).Run() //nolint:errcheck // best effort
	}
	return keep
}

// kill stops the server with SIGKILL, as a crash would.
func (n *node) kill() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Kill()
	<-n.exit
	n.cmd = nil
}

func (n *node) stop() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exit:
	case <-time.After(10 * time.Second):
		n.t.Errorf("mortar server did not stop on SIGTERM\n%s", n.log())
		n.kill()
	}
	n.cmd = nil
}

// mortar runs the CLI against this node and returns its output.
func (n *node) mortar(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mortarBin, args...)
	cmd.Env = append(os.Environ(), "MORTAR_SERVER="+n.addr)
	if tlsDir != "" && args[0] != "mount" {
		cmd.Env = append(cmd.Env, "MORTAR_TLS_DIR="+tlsDir, "MORTAR_TLS_NAME=node")
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (n *node) must(args ...string) string {
	n.t.Helper()
	out, err := n.mortar(args...)
	if err != nil {
		n.t.Fatalf("mortar %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// volume creates and starts a distribute volume over nbricks bricks.
func (n *node) volume(name string, nbricks int) []string {
	n.t.Helper()
	return n.createVolume(name, nbricks, nil, nil)
}

// createVolume creates a volume over nbricks new brick directories, with
// the type keywords given (e.g. "replica", "3"), sets the options given as
// key, value pairs, and starts it. The directories are on the root file
// system, so the create says force.
func (n *node) createVolume(name string, nbricks int, keywords, opts []string) []string {
	n.t.Helper()
	args := append([]string{"volume", "create", name}, keywords...)
	var bricks []string
	for i := 1; i <= nbricks; i++ {
		b := filepath.Join(n.data, fmt.Sprintf("%s-b%d", name, i))
		if err := os.MkdirAll(b, 0o755); err != nil {
			n.t.Fatal(err)
		}
		bricks = append(bricks, b)
		args = append(args, "127.0.0.1:"+b)
	}
	n.must(append(args, "force")...)
	for i := 0; i+1 < len(opts); i += 2 {
		n.must("volume", "set", name, opts[i], opts[i+1])
	}
	n.must("volume", "start", name)
	return bricks
}

func (n *node) target(vol string) string { return n.addr + ":/" + vol }

// mountDir makes a mountpoint that uid 65534 can reach (the POSIX suite
// checks permissions as that user).
func mountDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mortar-mnt")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.Remove(dir) })
	return dir
}

// mount mounts a volume with `mortar mount` (in the background, as a user
// would) and unmounts it at cleanup.
func (n *node) mount(vol string, opts ...string) string {
	n.t.Helper()
	mnt := mountDir(n.t)
	args := []string{"mount", "--log-file", filepath.Join(n.data, "mount-"+filepath.Base(mnt)+".log")}
	for _, o := range opts {
		args = append(args, "-o", o)
	}
	if tlsDir != "" {
		args = append(args, "-o", "tls-dir="+tlsDir+",tls-name=client")
	}
	n.must(append(args, n.target(vol), mnt)...)
	n.t.Cleanup(func() { unmount(n.t, mnt) })
	return mnt
}

// unmount unmounts mnt, lazily if it is busy.
func unmount(t *testing.T, mnt string) {
	if !isMounted(mnt) {
		return
	}
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Logf("umount %s: %v %s; unmounting lazily", mnt, err, out)
		exec.Command("umount", "-l", mnt).Run()
	}
}

func isMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	return bytes.Contains(b, []byte(" "+dir+" "))
}

// sh runs a shell command line in dir and fails the test on error.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

func need(t *testing.T, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s is not installed (scripts/test installs it)", c)
		}
	}
}

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }
