package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/mortarfs/mortar/client"
	"github.com/mortarfs/mortar/mgmt"
	"github.com/mortarfs/mortar/mgmt/api"
)

// startNode runs a one-node cluster in this process with a started
// distribute volume "gv0" over two bricks, as `mortar server` plus
// `mortar volume create ... force` and `start` would (force: the bricks
// are temp dirs, most likely on the root file system); it returns the node's address.
func startNode(dir string) (*mgmt.Node, error) {
	node, err := mgmt.Start(mgmt.Config{DataDir: filepath.Join(dir, "state"), Listen: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	var bricks []string
	for _, b := range []string{"b1", "b2"} {
		p := filepath.Join(dir, b)
		if err := os.Mkdir(p, 0o755); err != nil {
			return nil, err
		}
		bricks = append(bricks, "127.0.0.1:"+p)
	}
	ctx := context.Background()
	mc := api.NewClient(node.Addr())
	if _, err := mc.CreateVolume(ctx, api.CreateVolumeRequest{Name: "gv0", Bricks: bricks, Force: true}); err != nil {
		return nil, err
	}
	if _, err := mc.Start(ctx, "gv0", false); err != nil {
		return nil, err
	}
	return node, nil
}

// Open a volume by SERVER:/NAME and use it like a file system, without
// FUSE.
func Example() {
	dir, _ := os.MkdirTemp("", "mortar-example")
	defer os.RemoveAll(dir)
	node, err := startNode(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()

	ctx := context.Background()
	vol, err := client.Open(ctx, node.Addr()+":/gv0", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer vol.Close()

	if err := vol.MkdirAll(ctx, "docs/2026", 0o755); err != nil {
		log.Fatal(err)
	}
	if err := vol.WriteFile(ctx, "docs/2026/hello.txt", []byte("hello, mortar\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := vol.Rename(ctx, "docs/2026/hello.txt", "docs/greeting.txt"); err != nil {
		log.Fatal(err)
	}
	data, err := vol.ReadFile(ctx, "docs/greeting.txt")
	if err != nil {
		log.Fatal(err)
	}
	entries, _ := vol.ReadDir(ctx, "docs")
	for _, e := range entries {
		fmt.Println(e.Name(), e.IsDir())
	}
	fmt.Print(string(data))
	// Output:
	// 2026 true
	// greeting.txt false
	// hello, mortar
}
