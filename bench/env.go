package bench

import (
	"bufio"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Env describes the machine and the run, for the report's header.
type Env struct {
	Date        time.Time
	Duration    time.Duration
	CPU         string
	Cores       int
	Kernel      string
	LocalFS     string // file system of the work directory: "ext4 on /dev/vda"
	Work        string
	Mortar      string // mortar's version and commit
	Passthrough string // what the fuse-passthrough target is ("go-fuse v2.12.1 loopback ..."), "" if not run
	GlusterFS   string // "glusterfs 10.3", or why there is none
	Quick       bool
	Reps        int
	Command     string
	Load        string // load averages at the start and the end of the run
}

// collectEnv reads the machine's description.
func collectEnv(work string) Env {
	e := Env{Date: time.Now(), Cores: runtime.NumCPU(), CPU: cpuModel(), Work: work, LocalFS: fsDescription(work)}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.Kernel = strings.TrimSpace(string(b))
	}
	e.Load = loadAvg()
	return e
}

// loadAvg is the 1, 5 and 15 minute load averages: other work on the
// machine during a run makes its numbers noisy, and the report says so.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return ""
}

// cpuModel is the "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// binaryCommit is the VCS revision the Go binary at path was built from
// (12 digits, "+dirty" when the tree had changes); for a binary built
// without VCS stamping (-buildvcs=false), the HEAD of the git work tree
// the binary lies in, said so; else "".
func binaryCommit(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return ""
	}
	if c := stampedCommit(bi); c != "" {
		return c
	}
	dir := filepath.Dir(path)
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += "+dirty"
	}
	return c + " (HEAD of the binary's work tree; the binary has no VCS stamp)"
}

func stampedCommit(bi *buildinfo.BuildInfo) string {
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}
