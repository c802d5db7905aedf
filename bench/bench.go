// Package bench re-runs the seed papers' experiments (../shared/SEEDS.md)
// on mortar, the local file system (directly, and through a FUSE loopback
// mount: the FUSE ceiling) and GlusterFS, side by side in one run, and
// writes a report: report.md (tables with mortar/GlusterFS, mortar/local
// and mortar/FUSE passthrough ratios), results.csv (tidy rows) and PNG
// plots.
//
// Every number is measured in the run that reports it; a target that
// cannot be set up, or an experiment that fails on one target, is reported
// as such and the others go on.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"
)

// Layout is the shape of volume an experiment asks a target for.
type Layout struct {
	Kind       string // "distribute", "replicate" or "disperse"
	Bricks     int    // number of bricks (distribute), set size otherwise
	Replica    int    // replicate: copies
	Redundancy int    // disperse: parity bricks (data = Bricks - Redundancy)
}

// String names the layout in tables: "distribute x3", "replica 3",
// "disperse 4+2".
func (l Layout) String() string {
	switch l.Kind {
	case "replicate":
		return fmt.Sprintf("replica %d", l.Replica)
	case "disperse":
		return fmt.Sprintf("disperse %d+%d", l.Bricks-l.Redundancy, l.Redundancy)
	}
	return fmt.Sprintf("distribute x%d", l.Bricks)
}

// BrickCount is the number of bricks a volume of the layout is made of
// (at least one).
func (l Layout) BrickCount() int {
	if l.Kind == "replicate" {
		return max(l.Bricks, l.Replica, 1)
	}
	return max(l.Bricks, 1)
}

// Keywords are the volume-type words of `volume create` for the layout,
// the same for mortar and GlusterFS: "replica 3", "disperse 6 redundancy
// 2", none for distribute.
func (l Layout) Keywords() []string {
	switch l.Kind {
	case "replicate":
		return []string{"replica", strconv.Itoa(l.Replica)}
	case "disperse":
		return []string{"disperse", strconv.Itoa(l.Bricks), "redundancy", strconv.Itoa(l.Redundancy)}
	}
	return nil
}

// sameBricks is a distribute layout over the bricks of l: what the
// mortar-distribute target measures in place of a replicated or dispersed
// volume, so that the cost of the redundancy shows in one run.
func sameBricks(l Layout) Layout {
	return Layout{Kind: "distribute", Bricks: l.BrickCount()}
}

// SetupOptions are per-experiment knobs a target may or may not support.
type SetupOptions struct {
	// NoClientCache asks for client caches off (seed 001 measured so).
	NoClientCache bool
	// Encryption asks for encryption at rest (seed 000).
	Encryption bool
	// Net, if set, puts servers and client in network namespaces joined by
	// a shaped link (network-limited experiments); nil means loopback.
	Net *NetSetup
}

// NetSetup says where a target's processes run for network-limited
// experiments. The namespaces exist already (made by the experiment); a
// target runs its server processes with `nsenter --net=/run/netns/<Server>`
// listening on ServerAddr (and, for several servers, Servers[i] with
// ServerAddrs[i]), and its client mount process with
// `nsenter --net=/run/netns/<Client>`. The mount point itself is in the
// ordinary mount namespace, so the benchmark process uses it as usual.
type NetSetup struct {
	Client      string   // client namespace name
	Servers     []string // one namespace per server
	ServerAddrs []string // the address each server listens on, inside its namespace
}

// ErrUnsupported marks a target that cannot provide what was asked; the
// report shows "n/a" with the reason.
var ErrUnsupported = errors.New("not supported")

// Unsupported returns an error wrapping ErrUnsupported with a reason.
func Unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}

// Target is a file system under test.
type Target interface {
	// Name is one of TargetNames: "local", "fuse-passthrough", "mortar",
	// "mortar-distribute" or "glusterfs".
	Name() string
	// Available checks (and installs, where it may) what the target needs;
	// an error means every experiment reports the target as unavailable.
	Available(ctx context.Context) error
	// Mount sets up a volume of the given layout with its bricks under
	// work and returns the directory to run the experiment in.
	Mount(ctx context.Context, work string, layout Layout, opts SetupOptions) (Mount, error)
}

// Mount is a set-up target: a directory to measure, torn down by Close.
type Mount interface {
	Dir() string
	// Version is the target's version for the report header.
	Version() string
	Close() error
}

// Result is one measured value: a row of results.csv.
type Result struct {
	Experiment string
	Target     string
	Layout     string
	Params     string // "bs=4k threads=8", sorted key=value pairs
	Metric     string // "write", "read", "ops/s write" ...
	Value      float64
	Unit       string // "MB/s", "ops/s", "s", "IOPS", "ms"
	Repetition int
}

// Failure is an experiment that could not run on a target.
type Failure struct {
	Experiment, Target, Layout string
	Params                     string // set when only some parameters failed
	Err                        error
}

// Note is a line an experiment adds to its section of the report: how a
// target was measured ("fio: libaio, direct=1"), why a row means what it
// means ("local: no network, the baseline"), or a measured property of the
// set-up ("link measured: 11.9 MB/s"). Target and Layout may be empty.
type Note struct {
	Experiment, Target, Layout string
	Text                       string
}

// Experiment is one paper's experiment.
type Experiment struct {
	Name  string // "seed002", used on the command line
	Title string // a line for the report
	Paper string // what the paper measured, for the report
	Run   func(ctx context.Context, r *Runner) error
}

// Runner is what an experiment gets: the targets, a place to work, and
// where to record results.
type Runner struct {
	Targets []Target
	Work    string // parent directory for bricks, mounts, files
	Quick   bool   // smoke run: fewer sizes, repetitions and files
	Reps    int    // repetitions per measurement
	// Layout, if set, replaces the volume layouts of the loopback
	// experiments (seed000, seed002, seed003, metadata) with this one.
	Layout *Layout
	// FioCorners runs only the corners of seed003's fio matrix, at full
	// size and runtime unless Quick.
	FioCorners bool
	Log        *slog.Logger
	Out        io.Writer // progress lines for the terminal

	exp      string
	results  []Result
	failures []Failure
	notes    []Note
	versions map[string]string
	started  time.Time
}
