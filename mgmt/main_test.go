package mgmt

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/mgmt/brickrun"
	"github.com/mortarfs/mortar/tlsconf"
)

// TestMain lets the test binary be a brick process: a node started with
// Config.BrickExec = the test binary runs `TESTBINARY brick FLAGS`, which
// serves the brick as `mortar brick` would.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "brick" {
		if err := testBrickMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "brick:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testBrickMain parses the flags BrickArgs makes and runs RunBrick.
func testBrickMain(args []string) error {
	var cfg brickrun.Config
	var level string
	var readyFd int
	fs := flag.NewFlagSet("brick", flag.ContinueOnError)
	fs.StringVar(&cfg.Volume, "volume", "", "")
	fs.StringVar(&cfg.VolumeID, "volume-id", "", "")
	fs.StringVar(&cfg.BrickID, "brick-id", "", "")
	fs.StringVar(&cfg.Path, "path", "", "")
	fs.StringVar(&cfg.Listen, "listen", "", "")
	fs.BoolVar(&cfg.Arbiter, "arbiter", false, "")
	fs.BoolVar(&cfg.Disperse, "disperse", false, "")
	fs.BoolVar(&cfg.Replicated, "replicated", false, "")
	fs.StringVar(&level, "log-level", "", "")
	fs.IntVar(&readyFd, "ready-fd", 0, "")
	fs.StringVar(&cfg.TLSDir, "tls-dir", "", "")
	fs.StringVar(&cfg.TLSName, "tls-name", "", "")
	fs.StringVar(&cfg.AuthFile, "auth-file", "", "")
	var allow, reject string
	fs.StringVar(&allow, "auth-allow", "", "")
	fs.StringVar(&reject, "auth-reject", "", "")
	fs.IntVar(&cfg.MaxConnsPerClient, "max-conns-per-client", 0, "")
	fs.StringVar(&cfg.Reserve, "reserve", "", "")
	fs.StringVar(&cfg.ReserveFile, "reserve-file", "", "")
	fs.StringVar(&cfg.FenceFile, "fence-file", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if cfg.Auth, err = tlsconf.ParseAuth(allow, reject); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	return brickrun.Run(ctx, cfg, os.NewFile(uintptr(readyFd), "ready"))
}
