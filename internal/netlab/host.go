package netlab

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Host is one namespace of a lab: a host (Index ≥ 0) or the client
// (Index -1).
type Host struct {
	// Name is the namespace's name (/run/netns/<Name>).
	Name string
	// Index is the host's place in Lab.Hosts; -1 for the client.
	Index int
	// Addr is the host's address (10.231.Index.1); empty for the client.
	Addr string
	// LinkAddr is the client's address on this host's link
	// (10.231.Index.2), the host's gateway.
	LinkAddr string

	lab         *Lab
	dev, cliDev string // this host's end of its link, and the client's end

	server *Server // guarded by lab.mu
	cut    bool    // the link has its drop filters; guarded by lab.linkMu
	sink   bool    // the namespace has its sink device; guarded by lab.linkMu
}

// Command returns a command running name with args in h's network
// namespace (nsenter --net; the mount namespace is the caller's), in a
// process group of its own, with LC_ALL=C. It is not tied to a context:
// use Exec for short commands.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return Command(h.Name, name, args...)
}

// Exec runs a short command in h's namespace and returns its combined
// output; the error carries the command line and the output's end. The
// command's process group is killed if ctx ends first.
func (h *Host) Exec(ctx context.Context, name string, args ...string) (string, error) {
	return Exec(ctx, h.Name, name, args...)
}

// exec is Exec bounded by CmdLimit, for the lab's own ip and tc commands.
func (h *Host) exec(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, CmdLimit)
	defer cancel()
	return Exec(ctx, h.Name, name, args...)
}

// Dial connects to addr from inside h's namespace.
func (h *Host) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return DialIn(ctx, h.Name, network, addr)
}

// Listen listens on addr inside h's namespace.
func (h *Host) Listen(network, addr string) (ln net.Listener, err error) {
	err = InNetns(h.Name, func() (err error) {
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// HTTPClient returns an HTTP client whose connections are made from h's
// namespace (no keep-alive: a killed server leaves no stale connection).
func (h *Host) HTTPClient(timeout time.Duration) *http.Client {
	return HTTPClientIn(h.Name, timeout)
}

// Server returns the server started on h, or nil.
func (h *Host) Server() *Server {
	h.lab.mu.Lock()
	defer h.lab.mu.Unlock()
	return h.server
}

// Command returns a command running name with args in network namespace
// ns ("" = the caller's), as Host.Command.
func Command(ns, name string, args ...string) *exec.Cmd {
	if ns != "" {
		args = append([]string{"--net=/run/netns/" + ns, name}, args...)
		name = "nsenter"
	}
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

// Exec runs a short command in namespace ns ("" = the caller's), as
// Host.Exec.
func Exec(ctx context.Context, ns, name string, args ...string) (string, error) {
	cmd := Command(ns, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := StartAndWait(ctx, cmd); err != nil {
		where := ""
		if ns != "" {
			where = " (in " + ns + ")"
		}
		return out.String(), fmt.Errorf("%s %s%s: %w: %s", name, strings.Join(args, " "), where, err,
			strings.TrimSpace(LastLines(out.String(), 6)))
	}
	return out.String(), nil
}

// runHost runs one ip/tc command in the machine's own namespace.
func runHost(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, CmdLimit)
	defer cancel()
	return Exec(ctx, "", name, args...)
}

// StartAndWait runs cmd, killing its process group if ctx ends first.
func StartAndWait(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return ctx.Err()
	}
}

// LastLines returns the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// InNetns runs fn on an OS thread that has entered namespace ns ("" =
// stay). Sockets made by fn stay in ns after it returns. The thread
// stays locked and so ends with its goroutine: it never goes back to the
// scheduler in the wrong namespace.
func InNetns(ns string, fn func() error) error {
	if ns == "" {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// DialIn connects to addr from inside namespace ns ("" = the caller's).
func DialIn(ctx context.Context, ns, network, addr string) (c net.Conn, err error) {
	err = InNetns(ns, func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// HTTPClientIn returns an HTTP client whose connections are made from
// namespace ns ("" = the caller's), without keep-alive.
func HTTPClientIn(ns string, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialIn(ctx, ns, network, addr)
		},
		DisableKeepAlives: true,
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

// nsPIDs lists the processes in namespace ns, this one excepted.
func nsPIDs(ctx context.Context, ns string) []int {
	out, err := runHost(ctx, "ip", "netns", "pids", ns)
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killAndWait SIGKILLs pids and waits, until ctx ends, for them to be
// gone (or zombies, which hold no port, file or mount).
func killAndWait(ctx context.Context, pids []int) {
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range pids {
		for alive(pid) && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// unmountUnder lazily unmounts every mount at or below dir (deepest
// first), so that removing dir cannot reach into a mounted volume.
func unmountUnder(dir string) {
	if dir == "" {
		return
	}
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	var mps []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			mps = append(mps, f[1])
		}
	}
	for i := len(mps) - 1; i >= 0; i-- {
		syscall.Unmount(mps[i], syscall.MNT_DETACH)
	}
}
