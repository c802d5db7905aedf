package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fioJob is one fio run: Jobs processes (fio's numjobs, the paper's
// "threads"), each on its own file of SizeMiB in Dir, for Runtime.
type fioJob struct {
	Dir     string
	Pattern string // read, write, randread, randwrite
	BS      string // "4k" .. "1m"
	Jobs    int
	SizeMiB int // per job
	Runtime time.Duration
	IODepth int
	Engine  string // "libaio" or "psync"
	Direct  bool
}

// args is fio's command line. The files are named by job number only, so
// every pattern and block size with the same Jobs reuses the files laid
// out once (fio lays a file out only when it is missing or short).
func (j fioJob) args(output string) []string {
	direct := "0"
	if j.Direct {
		direct = "1"
	}
	a := []string{
		"--name=mbench", "--directory=" + j.Dir, "--filename_format=mbench.$jobnum",
		"--rw=" + j.Pattern, "--bs=" + j.BS, "--numjobs=" + strconv.Itoa(j.Jobs),
		"--size=" + strconv.Itoa(j.SizeMiB) + "M", "--iodepth=" + strconv.Itoa(j.IODepth),
		"--ioengine=" + j.Engine, "--direct=" + direct,
		"--runtime=" + strconv.Itoa(int(j.Runtime.Seconds())), "--time_based",
		"--group_reporting", "--randrepeat=0", "--norandommap", "--fallocate=none",
		"--output-format=json", "--output=" + output,
	}
	if !j.Direct && strings.Contains(j.Pattern, "write") {
		// Without O_DIRECT the writes would end in the page cache: flush
		// them inside the measured run.
		a = append(a, "--end_fsync=1")
	}
	return a
}

// limit bounds one run: the runtime, laying the files out at no less than
// 2 MB/s, and a minute of slack.
func (j fioJob) limit() time.Duration {
	layout := time.Duration(j.Jobs*j.SizeMiB/2) * time.Second
	return j.Runtime + layout + time.Minute
}

// fioResult is what one run measured, for the pattern's direction.
type fioResult struct {
	BandwidthMBps float64 // 10^6 bytes per second
	IOPS          float64
	LatMeanMs     float64 // total latency (submission + completion), mean
	LatP99Ms      float64 // completion latency, 99th percentile
	Version       string
}

// fioOutput is the part of fio's --output-format=json that is read.
type fioOutput struct {
	Version string `json:"fio version"`
	Jobs    []struct {
		Name  string  `json:"jobname"`
		Error int     `json:"error"`
		Read  fioStat `json:"read"`
		Write fioStat `json:"write"`
	} `json:"jobs"`
}

type fioStat struct {
	BWBytes float64 `json:"bw_bytes"`
	IOPS    float64 `json:"iops"`
	IOBytes int64   `json:"io_bytes"`
	Lat     struct {
		Mean float64 `json:"mean"`
	} `json:"lat_ns"`
	Clat struct {
		Mean       float64            `json:"mean"`
		Percentile map[string]float64 `json:"percentile"`
	} `json:"clat_ns"`
}

// parseFio reads fio's JSON output (anything before the first '{', such
// as warnings, is skipped) for a run of pattern with group_reporting.
func parseFio(data []byte, pattern string) (fioResult, error) {
	i := bytes.IndexByte(data, '{')
	if i < 0 {
		return fioResult{}, fmt.Errorf("fio: no JSON in output: %q", shorten(string(data), 200))
	}
	var out fioOutput
	if err := json.Unmarshal(data[i:], &out); err != nil {
		return fioResult{}, fmt.Errorf("fio: parse JSON: %w", err)
	}
	if len(out.Jobs) == 0 {
		return fioResult{}, errors.New("fio: no job in output")
	}
	job := out.Jobs[0]
	if job.Error != 0 {
		return fioResult{}, fmt.Errorf("fio: job error %d", job.Error)
	}
	st := job.Read
	if strings.Contains(pattern, "write") {
		st = job.Write
	}
	if st.IOBytes == 0 {
		return fioResult{}, fmt.Errorf("fio: no %s I/O done", pattern)
	}
	return fioResult{
		BandwidthMBps: st.BWBytes / 1e6,
		IOPS:          st.IOPS,
		LatMeanMs:     st.Lat.Mean / 1e6,
		LatP99Ms:      st.Clat.Percentile["99.000000"] / 1e6,
		Version:       out.Version,
	}, nil
}

// runFio runs one job, bounded by j.limit(), and parses its output.
func runFio(ctx context.Context, j fioJob) (fioResult, error) {
	if err := os.MkdirAll(j.Dir, 0o755); err != nil {
		return fioResult{}, err
	}
	tmp, err := os.MkdirTemp("", "mbench-fio-")
	if err != nil {
		return fioResult{}, err
	}
	defer os.RemoveAll(tmp)
	output := filepath.Join(tmp, "out.json")
	ctx, cancel := context.WithTimeout(ctx, j.limit())
	defer cancel()
	cmd := exec.CommandContext(ctx, "fio", j.args(output)...)
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	runErr := cmd.Run()
	data, _ := os.ReadFile(output)
	res, perr := parseFio(data, j.Pattern)
	if runErr != nil || perr != nil {
		if ctx.Err() != nil {
			return fioResult{}, fmt.Errorf("fio %s bs=%s: no result within %s", j.Pattern, j.BS, j.limit())
		}
		return fioResult{}, fmt.Errorf("fio %s bs=%s jobs=%d (%s, direct=%v): %v %v: %s",
			j.Pattern, j.BS, j.Jobs, j.Engine, j.Direct, runErr, perr, shorten(stderr.String(), 400))
	}
	return res, nil
}

// runFioAdapt runs j with libaio and O_DIRECT first; if the target refuses
// that, it runs it again with psync and the page cache, and sets *engine
// so that the rest of the matrix on this target goes straight to psync.
func runFioAdapt(ctx context.Context, j fioJob, engine *fioEngine) (fioResult, error) {
	if engine.set {
		j.Engine, j.Direct = engine.name, engine.direct
		return runFio(ctx, j)
	}
	j.Engine, j.Direct = "libaio", true
	res, err := runFio(ctx, j)
	if err == nil || ctx.Err() != nil {
		*engine = fioEngine{set: err == nil, name: j.Engine, direct: j.Direct}
		return res, err
	}
	first := err
	j.Engine, j.Direct = "psync", false
	res, err = runFio(ctx, j)
	if err != nil {
		return res, fmt.Errorf("%v; with psync: %v", first, err)
	}
	*engine = fioEngine{set: true, name: j.Engine, direct: j.Direct, why: first.Error()}
	return res, nil
}

// fioEngine is the engine settled on for one target and layout.
type fioEngine struct {
	set    bool
	name   string
	direct bool
	why    string // why libaio + O_DIRECT was not used
}

func (e fioEngine) String() string {
	s := fmt.Sprintf("fio ioengine=%s direct=%v", e.name, map[bool]int{false: 0, true: 1}[e.direct])
	if e.name == "psync" {
		s += " (iodepth has no effect with a synchronous engine)"
	}
	if e.why != "" {
		s += "; libaio with direct=1 failed: " + shorten(e.why, 200)
	}
	return s
}

// aptOnce makes sure `apt-get update` runs at most once per process.
var aptOnce struct {
	sync.Mutex
	updated bool
}

// ensureTool finds cmd on PATH, installing Debian package pkg with apt-get
// if it is missing and this process is root. The error says why the tool
// cannot be had.
func ensureTool(ctx context.Context, cmd, pkg string) error {
	if _, err := exec.LookPath(cmd); err == nil {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s is not installed (apt-get install %s needs root)", cmd, pkg)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("%s is not installed and there is no apt-get", cmd)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	aptOnce.Lock()
	defer aptOnce.Unlock()
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if !aptOnce.updated {
		c := exec.CommandContext(ctx, "apt-get", "update", "-qq")
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get update: %v: %s", err, shorten(string(out), 300))
		}
		aptOnce.updated = true
	}
	c := exec.CommandContext(ctx, "apt-get", "install", "-y", "-qq", pkg)
	c.Env = env
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install %s: %v: %s", pkg, err, shorten(string(out), 300))
	}
	if _, err := exec.LookPath(cmd); err != nil {
		return fmt.Errorf("%s still missing after apt-get install %s", cmd, pkg)
	}
	return nil
}
