// Package mgmt is mortar's management daemon: the part of `mortar server`
// that keeps the cluster state (nodes, volumes, bricks, options), runs the
// volume lifecycle (create, start, stop, delete, set), serves this node's
// bricks, and answers the HTTP API that the CLI and clients use (Client).
//
// # One port
//
// A node listens on one TCP port (DefaultPort). Each connection is told
// apart by its first four bytes: wire.Magic goes to the brick server (the
// data path), anything else to the HTTP API.
//
// # State
//
// The cluster State changes only by Commands applied in order by a Store.
// State.Apply is deterministic and does no I/O; everything that touches
// disks (marking bricks, opening them) happens in the node before or after
// the command. Today's Store is a JSON file in the data directory,
// rewritten atomically; a Raft log carrying the same Commands replaces it
// when nodes can join (peer probe). One node is a valid cluster.
//
// # Embedding
//
// Start runs a node in-process (tests and `mortar dev` do this):
//
//	n, err := mgmt.Start(mgmt.Config{DataDir: dir, Listen: "127.0.0.1:0", Logger: log})
//	...
//	c := mgmt.NewClient(n.Addr())
//	spec, err := c.Spec(ctx, "gv0")
package mgmt
