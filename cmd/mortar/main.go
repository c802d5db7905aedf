// Command mortar is mortar's single binary: server, volume management,
// mount (also as mount.mortar, mount(8)'s helper) and the dev cluster.
// See internal/cli.
package main

import (
	"os"

	"github.com/mortarfs/mortar/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args)) }
