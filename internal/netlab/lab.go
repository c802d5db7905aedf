package netlab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrUnavailable marks an error of New meaning that this machine (or this
// user) cannot make network namespaces at all: not root, no iproute2, no
// namespace support. Tests skip on it; anything else is a failure.
var ErrUnavailable = errors.New("network namespaces unavailable")

// Config describes a lab.
type Config struct {
	// Hosts is the number of host namespaces, 1 to 250.
	Hosts int
	// RateMbit shapes both ends of every link to this many Mbit/s with a
	// token bucket; 0 leaves the links unshaped (veth speed).
	RateMbit int
}

// Lab is a star of network namespaces: see the package documentation.
// Its fields are read-only.
type Lab struct {
	// Client is the namespace every link ends in; it routes between hosts.
	// Its Addr is empty (it has one address per link: Hosts[i].LinkAddr).
	Client *Host
	// Hosts are the host namespaces; Hosts[i].Addr is 10.231.i.1.
	Hosts []*Host
	// RateMbit is the configured rate of every link (0: unshaped).
	RateMbit int
	// Dir is a work directory made for the lab (data directories, mount
	// points, logs), removed by Close after unmounting anything below it.
	Dir string

	base string // mlab<pid>-<seq>

	mu     sync.Mutex
	made   []string   // namespaces made, deleted by Close
	linkMu sync.Mutex // one link change at a time
}

const (
	// namePrefix starts every namespace and work directory of a lab.
	namePrefix = "mlab"
	// CmdLimit bounds one ip or tc command.
	CmdLimit = 15 * time.Second
	// subnet is the first two octets of every lab address.
	subnet = "10.231"
)

var labSeq atomic.Int64

// New makes the namespaces, links and qdiscs of a lab. It first removes
// what labs of dead processes left. On any error, what was made is
// removed before it returns.
func New(ctx context.Context, cfg Config) (_ *Lab, err error) {
	if cfg.Hosts < 1 || cfg.Hosts > 250 {
		return nil, fmt.Errorf("netlab: %d hosts (1..250)", cfg.Hosts)
	}
	if cfg.RateMbit < 0 {
		return nil, fmt.Errorf("netlab: rate %d Mbit/s", cfg.RateMbit)
	}
	if err := available(); err != nil {
		return nil, err
	}
	RemoveStale(ctx)
	l := &Lab{RateMbit: cfg.RateMbit,
		base: fmt.Sprintf("%s%d-%d", namePrefix, os.Getpid(), labSeq.Add(1))}
	l.Dir = filepath.Join(os.TempDir(), l.base)
	if err := os.MkdirAll(l.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	l.Client = &Host{lab: l, Name: l.base + "-cli", Index: -1}
	if err := l.addNS(ctx, l.Client.Name); err != nil {
		if errors.Is(err, exec.ErrNotFound) || strings.Contains(err.Error(), "ermission") ||
			strings.Contains(err.Error(), "not permitted") {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return nil, err
	}
	if _, err := l.Client.exec(ctx, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"); err != nil {
		return nil, err
	}
	for i := 0; i < cfg.Hosts; i++ {
		if err := l.addHost(ctx, i); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// available says why namespaces cannot be made here, if they cannot.
func available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root", ErrUnavailable)
	}
	for _, c := range []string{"ip", "tc", "nsenter"} {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("%w: %s is missing (iproute2, util-linux): %v", ErrUnavailable, c, err)
		}
	}
	return nil
}

// addNS creates a namespace and brings its loopback up.
func (l *Lab) addNS(ctx context.Context, name string) error {
	if _, err := runHost(ctx, "ip", "netns", "add", name); err != nil {
		return err
	}
	l.mu.Lock()
	l.made = append(l.made, name)
	l.mu.Unlock()
	_, err := runHost(ctx, "ip", "-n", name, "link", "set", "dev", "lo", "up")
	return err
}

// addHost makes host namespace i and its link to the client.
func (l *Lab) addHost(ctx context.Context, i int) error {
	h := &Host{lab: l, Index: i, Name: fmt.Sprintf("%s-h%d", l.base, i),
		Addr:     fmt.Sprintf("%s.%d.1", subnet, i),
		LinkAddr: fmt.Sprintf("%s.%d.2", subnet, i),
		dev:      "nl-h", cliDev: fmt.Sprintf("nl-c%d", i)}
	if err := l.addNS(ctx, h.Name); err != nil {
		return err
	}
	// Both ends are made inside their namespaces: nothing is ever added to
	// the machine's own namespace, and interface names need only be unique
	// within one namespace.
	steps := [][]string{
		{"ip", "link", "add", "name", h.cliDev, "netns", l.Client.Name, "type", "veth", "peer", "name", h.dev, "netns", h.Name},
		{"ip", "-n", l.Client.Name, "addr", "add", h.LinkAddr + "/24", "dev", h.cliDev},
		{"ip", "-n", h.Name, "addr", "add", h.Addr + "/24", "dev", h.dev},
		{"ip", "-n", l.Client.Name, "link", "set", "dev", h.cliDev, "up"},
		{"ip", "-n", h.Name, "link", "set", "dev", h.dev, "up"},
		{"ip", "-n", h.Name, "route", "add", subnet + ".0.0/16", "via", h.LinkAddr},
	}
	for _, s := range steps {
		if _, err := runHost(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	if l.RateMbit > 0 {
		if err := l.shape(ctx, h, Shape{RateMbit: l.RateMbit}); err != nil {
			return err
		}
	}
	l.Hosts = append(l.Hosts, h)
	return nil
}

// Host returns host i, or panics.
func (l *Lab) Host(i int) *Host { return l.Hosts[i] }

// LinkMBps is the configured rate of one link in MB/s (10^6 bytes), 0 if
// unshaped.
func (l *Lab) LinkMBps() float64 { return float64(l.RateMbit) / 8 }

// Names returns the namespace names of the hosts, in order.
func (l *Lab) Names() []string {
	var ns []string
	for _, h := range l.Hosts {
		ns = append(ns, h.Name)
	}
	return ns
}

// Addrs returns the addresses of the hosts, in order.
func (l *Lab) Addrs() []string {
	var as []string
	for _, h := range l.Hosts {
		as = append(as, h.Addr)
	}
	return as
}

// Close stops every server (SIGTERM, then SIGKILL after 10 s), kills
// whatever else still runs in the lab's namespaces, unmounts what is
// mounted under Dir, and deletes the namespaces and Dir. Each step is
// bounded in time; Close may be called more than once.
func (l *Lab) Close() error {
	errs := make([]error, len(l.Hosts))
	var wg sync.WaitGroup
	for i, h := range l.Hosts {
		if s := h.Server(); s != nil {
			wg.Go(func() { errs[i] = s.Stop(10 * time.Second) })
		}
	}
	wg.Wait()
	l.mu.Lock()
	made := l.made
	l.made = nil
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*CmdLimit)
	defer cancel()
	killIn(ctx, made)
	unmountUnder(l.Dir)
	if l.Dir != "" {
		if err := os.RemoveAll(l.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(made) - 1; i >= 0; i-- {
		if _, err := runHost(ctx, "ip", "netns", "del", made[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveStale removes what labs of processes that no longer run left
// behind: it kills the processes still in their namespaces, unmounts
// what is mounted under their work directories, and deletes both. New
// calls it; labs of live processes are left alone.
func RemoveStale(ctx context.Context) {
	stale := map[string][]string{} // base → namespaces
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if base, ok := staleBase(e.Name()); ok {
			stale[base] = append(stale[base], e.Name())
		}
	}
	dirs, _ := os.ReadDir(os.TempDir())
	for _, d := range dirs {
		if base, ok := staleBase(d.Name()); ok && d.IsDir() && d.Name() == base {
			if _, seen := stale[base]; !seen {
				stale[base] = nil
			}
		}
	}
	for base, nss := range stale {
		killIn(ctx, nss)
		dir := filepath.Join(os.TempDir(), base)
		unmountUnder(dir)
		os.RemoveAll(dir)
		for _, ns := range nss {
			runHost(ctx, "ip", "netns", "del", ns)
		}
	}
}

// staleBase parses mlab<pid>-<seq>[-role] and reports its base
// (mlab<pid>-<seq>) if process pid no longer runs.
func staleBase(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return "", false
	}
	f := strings.SplitN(rest, "-", 3)
	if len(f) < 2 {
		return "", false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return "", false
	}
	if _, err := strconv.Atoi(f[1]); err != nil {
		return "", false
	}
	if _, err := os.Stat("/proc/" + f[0]); err == nil {
		return "", false // its process still runs
	}
	return namePrefix + f[0] + "-" + f[1], true
}

// killIn SIGKILLs every process in the namespaces and waits (bounded by
// ctx) until they are gone, so that their ports and mounts are free.
func killIn(ctx context.Context, nss []string) {
	var pids []int
	for _, ns := range nss {
		pids = append(pids, nsPIDs(ctx, ns)...)
	}
	killAndWait(ctx, pids)
}
