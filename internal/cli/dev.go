package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/layer/disperse"
	"github.com/mortarfs/mortar/mgmt"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume"
)

// devConfig is what `mortar dev` sets up.
type devConfig struct {
	Data   string
	Bricks int
	// BricksSet: --bricks was given (else a replicated volume gets one
	// replica set).
	BricksSet bool
	Replica   int  // 0: distribute
	Arbiter   bool // the third brick of every set is an arbiter
	// Disperse is the size of a disperse set (0: not dispersed), and
	// Redundancy how many bricks of it may be lost (0: the default).
	Disperse   int
	Redundancy int
	Mount      string
	Volume     string
	Listen     string
	LogLevel   string
	Multiplex  bool // every brick in one process
}

func newDevCommand() *cobra.Command {
	var dc devConfig
	cmd := &cobra.Command{
		Use:   "dev [--data DIR] [--bricks N] [--replica N [--arbiter] | --disperse N [--redundancy M]] [--mount DIR] [--volume NAME]",
		Short: "Run a one-machine mortar: a node, a volume over N bricks, mounted",
		Long: `Run a complete mortar on this machine in one command, for trying it out and
for development: a node (as "mortar server" would run, with a process per
brick), a volume over N brick directories under DIR/bricks, and its mount at
DIR/mnt, served by this process.

The volume is a distribute volume over --bricks N (default 3); with
--replica N it is replicated: sets of N bricks, one set unless --bricks asks
for more (a multiple of N). --arbiter (with replica 3, the default then) makes
the third brick of every set an arbiter. With --disperse N it is dispersed
(erasure-coded): sets of N bricks that survive --redundancy M of them down
(default: a third of N, at least 1; below half of N), one set unless --bricks
asks for more (a multiple of N).

The first run creates and starts the volume; later runs with the same --data
reuse it and its files (--bricks, --replica, --arbiter, --disperse and
--redundancy apply to a new volume only). Ctrl-C (or SIGTERM) unmounts and
stops everything. Files written to the mount appear as plain files in the
brick directories (fragments of them for a dispersed volume). While it
runs, the "mortar volume" commands work against it (--server is the --listen
address): "mortar volume status" shows the brick processes, which can be
killed to see a replica go down, and "mortar volume start NAME force" brings
them back. Needs FUSE (/dev/fuse, fuse3) and, to mount, root.

The bricks are made with force (as "mortar volume create ... force"): they
may be on the root file system, which "mortar volume create" refuses
without it, since a brick filling up would fill the disk the machine runs
from. That is fine for trying mortar out; keep real data on a disk or
partition of its own.`,
		Example: `  mortar dev
  mortar dev --replica 3
  mortar dev --replica 3 --arbiter --bricks 6 --data /tmp/arb
  mortar dev --disperse 6 --redundancy 2 --data /tmp/ec`,
		Args: usageArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			dc.BricksSet = cmd.Flags().Changed("bricks")
			if err := runDev(cmd.OutOrStdout(), dc); err != nil {
				return fmt.Errorf("mortar dev: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dc.Data, "data", "mortar-dev", "directory for the node's state, the bricks and the log")
	f.IntVar(&dc.Bricks, "bricks", 3, "number of bricks of a new volume (with --replica N or --disperse N and no --bricks: N)")
	f.IntVar(&dc.Replica, "replica", 0, "make a new volume replicated, in sets of N bricks (2 to 16)")
	f.BoolVar(&dc.Arbiter, "arbiter", false, "with replica 3 (implied): the third brick of every set is an arbiter")
	f.IntVar(&dc.Disperse, "disperse", 0, "make a new volume dispersed (erasure-coded), in sets of N bricks (not with --replica)")
	f.IntVar(&dc.Redundancy, "redundancy", 0, "with --disperse: bricks of a set that may be lost (default: a third of the set, at least 1)")
	f.StringVar(&dc.Mount, "mount", "", "mountpoint (default DATA/mnt)")
	f.StringVar(&dc.Volume, "volume", "dev", "volume name")
	f.StringVar(&dc.Listen, "listen", "127.0.0.1:"+strconv.Itoa(api.DefaultPort), "address of the node's management API; bricks listen on its host")
	f.StringVar(&dc.LogLevel, "log-level", "info", "level of DATA/mortar.log and the brick logs: debug, info, warn or error")
	f.BoolVar(&dc.Multiplex, "brick-multiplex", true, "serve every brick in one process (=false: one process per brick; see mortar server --help)")
	return cmd
}

// prepare fills defaults, makes the directories and returns the brick
// directories.
func (dc *devConfig) prepare() ([]string, error) {
	if err := dc.checkLayout(); err != nil {
		return nil, err
	}
	if err := mgmt.CheckVolumeName(dc.Volume); err != nil {
		return nil, err
	}
	var err error
	if dc.Data, err = filepath.Abs(dc.Data); err != nil {
		return nil, err
	}
	if dc.Mount == "" {
		dc.Mount = filepath.Join(dc.Data, "mnt")
	}
	if dc.Mount, err = filepath.Abs(dc.Mount); err != nil {
		return nil, err
	}
	var bricks []string
	for i := 1; i <= dc.Bricks; i++ {
		bricks = append(bricks, filepath.Join(dc.Data, "bricks", "b"+strconv.Itoa(i)))
	}
	for _, d := range append([]string{filepath.Join(dc.Data, "state")}, bricks...) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := prepareMountpoint(dc.Mount); err != nil {
		return nil, err
	}
	return bricks, nil
}

// checkLayout checks --bricks, --replica, --arbiter, --disperse and
// --redundancy, filling in the defaults they imply.
func (dc *devConfig) checkLayout() error {
	switch {
	case dc.Disperse != 0 && (dc.Replica != 0 || dc.Arbiter):
		return fmt.Errorf("--disperse and --replica (or --arbiter) do not go together: a volume is either replicated or dispersed")
	case dc.Redundancy != 0 && dc.Disperse == 0:
		return fmt.Errorf("--redundancy needs --disperse N")
	case dc.Disperse != 0:
		return dc.checkDisperse()
	}
	if dc.Arbiter && dc.Replica == 0 {
		dc.Replica = 3
	}
	switch {
	case dc.Arbiter && dc.Replica != 3:
		return fmt.Errorf("--arbiter needs --replica 3 (two data bricks and an arbiter per set)")
	case dc.Replica < 0 || dc.Replica == 1 || dc.Replica > volume.MaxReplica:
		return fmt.Errorf("--replica must be 2 to %d", volume.MaxReplica)
	case dc.Replica > 0 && !dc.BricksSet:
		dc.Bricks = dc.Replica
	}
	if dc.Bricks < 1 {
		return fmt.Errorf("--bricks must be at least 1")
	}
	if dc.Replica > 0 && dc.Bricks%dc.Replica != 0 {
		return fmt.Errorf("--bricks %d is not a multiple of --replica %d", dc.Bricks, dc.Replica)
	}
	return nil
}

// checkDisperse checks --disperse and --redundancy (and --bricks against
// them), filling in the defaults.
func (dc *devConfig) checkDisperse() error {
	if dc.Redundancy == 0 {
		dc.Redundancy = mgmt.DefaultRedundancy(dc.Disperse)
	}
	if _, _, err := disperse.NewGeometry(dc.Disperse, dc.Redundancy); err != nil {
		return fmt.Errorf("--disperse %d --redundancy %d: %w", dc.Disperse, dc.Redundancy, err)
	}
	if dc.Disperse > volume.MaxDisperse {
		return fmt.Errorf("--disperse must be at most %d", volume.MaxDisperse)
	}
	if !dc.BricksSet {
		dc.Bricks = dc.Disperse
	}
	if dc.Bricks < 1 || dc.Bricks%dc.Disperse != 0 {
		return fmt.Errorf("--bricks %d is not a multiple of --disperse %d", dc.Bricks, dc.Disperse)
	}
	return nil
}

// prepareMountpoint makes the mountpoint, detaching a mount left behind by
// a run that died.
func prepareMountpoint(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, syscall.ENOTCONN) {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("mountpoint %s holds a dead mount and unmounting it failed: %w", dir, err)
		}
	}
	return os.MkdirAll(dir, 0o755)
}

func runDev(out io.Writer, dc devConfig) error {
	bricks, err := dc.prepare()
	if err != nil {
		return err
	}
	logPath := filepath.Join(dc.Data, "mortar.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	log, err := newLogger(logf, dc.LogLevel)
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable (to run bricks): %w", err)
	}
	node, err := mgmt.Start(mgmt.Config{
		DataDir:        filepath.Join(dc.Data, "state"),
		Listen:         dc.Listen,
		Logger:         log,
		BrickExec:      exe,
		BrickMultiplex: dc.Multiplex,
		BrickLogLevel:  dc.LogLevel,
	})
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%w (another mortar runs there? try --listen 127.0.0.1:0)", err)
		}
		return err
	}
	defer node.Close()
	c := api.NewClient(node.ListenAddr())
	vi, err := ensureDevVolume(context.Background(), c, dc.request(bricks), out)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), specTimeout)
	spec, err := c.Spec(ctx, dc.Volume)
	cancel()
	if err != nil {
		return err
	}
	req := mountRequest{Source: c.Addr() + ":/" + dc.Volume, Server: c.Addr(), Volume: dc.Volume, Mountpoint: dc.Mount}
	srv, vol, err := mountSpec(spec, req, log)
	if err != nil {
		return fmt.Errorf("%w (FUSE needs /dev/fuse and root; on Debian: apt-get install fuse3)", err)
	}
	defer vol.Close()
	printDevBanner(out, dc, vi, c.Addr(), logPath)
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	select {
	case sig := <-sigs:
		fmt.Fprintf(out, "\n%s: unmounting %s and stopping\n", sig, dc.Mount)
		unmountOnExit(srv, dc.Mount, log)
		<-done
	case <-done:
		fmt.Fprintf(out, "%s was unmounted; stopping\n", dc.Mount)
	}
	return nil
}

// request is the create request of the dev volume over bricks. It says
// force: the bricks are directories under --data, a try-out on the user's
// own machine, most often on its root file system.
func (dc *devConfig) request(bricks []string) api.CreateVolumeRequest {
	req := api.CreateVolumeRequest{Name: dc.Volume, Replica: dc.Replica, Disperse: dc.Disperse, Redundancy: dc.Redundancy, Force: true}
	if dc.Arbiter {
		req.Arbiter = 1
	}
	for _, b := range bricks {
		req.Bricks = append(req.Bricks, "localhost:"+b)
	}
	return req
}

// ensureDevVolume creates the volume if it does not exist and starts it if
// it is not started.
func ensureDevVolume(ctx context.Context, c *api.Client, req api.CreateVolumeRequest, out io.Writer) (api.VolumeInfo, error) {
	vi, err := c.Info(ctx, req.Name)
	if errors.Is(err, api.ErrNotFound) {
		if vi, err = c.CreateVolume(ctx, req); err != nil {
			return vi, err
		}
		fmt.Fprintf(out, "created volume %s (%s) over %d bricks\n", req.Name, typeName(vi), len(req.Bricks))
		for _, w := range vi.Warnings {
			fmt.Fprintf(out, "warning: %s\n", w)
		}
	} else if err != nil {
		return vi, err
	} else if len(vi.Bricks) != len(req.Bricks) || vi.Replica != req.Replica || vi.Disperse != req.Disperse || vi.Redundancy != req.Redundancy {
		fmt.Fprintf(out, "volume %s exists (%s, %s bricks); --bricks, --replica, --arbiter, --disperse and --redundancy apply to new volumes only\n", req.Name, typeName(vi), brickCount(vi))
	}
	if vi.Status != api.StatusStarted {
		if vi, err = c.Start(ctx, req.Name, false); err != nil {
			return vi, err
		}
	}
	return vi, nil
}

func printDevBanner(out io.Writer, dc devConfig, vi api.VolumeInfo, server, logPath string) {
	self := "mortar"
	if strings.Contains(os.Args[0], "/") {
		self = os.Args[0]
	}
	var paths []string
	for _, b := range vi.Bricks {
		paths = append(paths, b.Path)
	}
	onBricks := "files are plain files on the bricks"
	if vi.Type == volume.Disperse {
		onBricks = "each brick holds a fragment of every file"
	}
	fmt.Fprintf(out, `
mortar dev: volume %q (%s, %s bricks) is mounted at %s

  bricks:          %s
  management API:  %s
  log:             %s (bricks: %s)

Try:
  echo hello > %s/hello && ls -l %s
  ls %s/*          (%s)
  %s volume info %s --server %s
  %s volume status %s --server %s

Ctrl-C unmounts and stops; running the same command again continues with the same data.
`, vi.Name, typeName(vi), brickCount(vi), dc.Mount,
		strings.Join(paths, " "), server, logPath, filepath.Join(dc.Data, "state", "logs", "bricks"),
		dc.Mount, dc.Mount, filepath.Join(dc.Data, "bricks"), onBricks,
		self, vi.Name, server, self, vi.Name, server)
}
