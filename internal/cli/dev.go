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

	"github.com/mortarfs/mortar/mgmt"
)

// devConfig is what `mortar dev` sets up.
type devConfig struct {
	Data     string
	Bricks   int
	Mount    string
	Volume   string
	Listen   string
	LogLevel string
}

func newDevCommand() *cobra.Command {
	var dc devConfig
	cmd := &cobra.Command{
		Use:   "dev [--data DIR] [--bricks N] [--mount DIR] [--volume NAME]",
		Short: "Run a one-machine mortar: a node, a volume over N bricks, mounted",
		Long: `Run a complete mortar on this machine in one process, for trying it out and
for development: a node (as "mortar server" would run), a distribute volume
over N brick directories under DIR/bricks, mounted at DIR/mnt.

The first run creates and starts the volume; later runs with the same --data
reuse it and its files. Ctrl-C (or SIGTERM) unmounts and stops everything.
Files written to the mount appear as plain files in the brick directories.
While it runs, the "mortar volume" commands work against it (--server is the
--listen address). Needs FUSE (/dev/fuse, fuse3) and, to mount, root.`,
		Args: usageArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runDev(cmd.OutOrStdout(), dc); err != nil {
				return fmt.Errorf("mortar dev: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dc.Data, "data", "mortar-dev", "directory for the node's state, the bricks and the log")
	f.IntVar(&dc.Bricks, "bricks", 3, "number of bricks of a new volume")
	f.StringVar(&dc.Mount, "mount", "", "mountpoint (default DATA/mnt)")
	f.StringVar(&dc.Volume, "volume", "dev", "volume name")
	f.StringVar(&dc.Listen, "listen", "127.0.0.1:"+strconv.Itoa(mgmt.DefaultPort), "address of the node (management API and bricks)")
	f.StringVar(&dc.LogLevel, "log-level", "info", "level of DATA/mortar.log: debug, info, warn or error")
	return cmd
}

// prepare fills defaults, makes the directories and returns the brick
// directories.
func (dc *devConfig) prepare() ([]string, error) {
	if dc.Bricks < 1 {
		return nil, fmt.Errorf("--bricks must be at least 1")
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

	node, err := mgmt.Start(mgmt.Config{DataDir: filepath.Join(dc.Data, "state"), Listen: dc.Listen, Logger: log})
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%w (another mortar runs there? try --listen 127.0.0.1:0)", err)
		}
		return err
	}
	defer node.Close()
	c := mgmt.NewClient(node.ListenAddr())
	vi, err := ensureDevVolume(context.Background(), c, dc.Volume, bricks, out)
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
	srv, graph, err := mountSpec(spec, req, log)
	if err != nil {
		return fmt.Errorf("%w (FUSE needs /dev/fuse and root; on Debian: apt-get install fuse3)", err)
	}
	defer graph.Close()
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

// ensureDevVolume creates the volume if it does not exist and starts it if
// it is not started.
func ensureDevVolume(ctx context.Context, c *mgmt.Client, name string, bricks []string, out io.Writer) (mgmt.VolumeInfo, error) {
	vi, err := c.Info(ctx, name)
	if errors.Is(err, mgmt.ErrNotFound) {
		req := mgmt.CreateVolumeRequest{Name: name}
		for _, b := range bricks {
			req.Bricks = append(req.Bricks, "localhost:"+b)
		}
		if vi, err = c.CreateVolume(ctx, req); err != nil {
			return vi, err
		}
		fmt.Fprintf(out, "created volume %s over %d bricks\n", name, len(bricks))
	} else if err != nil {
		return vi, err
	} else if len(vi.Bricks) != len(bricks) {
		fmt.Fprintf(out, "volume %s exists with %d bricks; --bricks applies to new volumes only\n", name, len(vi.Bricks))
	}
	if vi.Status != mgmt.StatusStarted {
		if vi, err = c.Start(ctx, name, false); err != nil {
			return vi, err
		}
	}
	return vi, nil
}

func printDevBanner(out io.Writer, dc devConfig, vi mgmt.VolumeInfo, server, logPath string) {
	self := "mortar"
	if strings.Contains(os.Args[0], "/") {
		self = os.Args[0]
	}
	var paths []string
	for _, b := range vi.Bricks {
		paths = append(paths, b.Path)
	}
	fmt.Fprintf(out, `
mortar dev: volume %q (%s, %d bricks) is mounted at %s

  bricks:          %s
  management API:  %s
  log:             %s

Try:
  echo hello > %s/hello && ls -l %s
  ls %s/*          (files are plain files on the bricks)
  %s volume info %s --server %s
  %s volume status %s --server %s

Ctrl-C unmounts and stops; running the same command again continues with the same data.
`, vi.Name, vi.Type, len(vi.Bricks), dc.Mount,
		strings.Join(paths, " "), server, logPath,
		dc.Mount, dc.Mount, filepath.Join(dc.Data, "bricks"),
		self, vi.Name, server, self, vi.Name, server)
}
