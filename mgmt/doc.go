// Package mgmt is mortar's management daemon: the part of `mortar server`
// that keeps the cluster state (nodes, volumes, bricks, options), runs the
// volume lifecycle (create, start, stop, delete, set), runs this node's
// bricks, and answers the HTTP API that the CLI and clients use (its
// contract and typed client are package mgmt/api).
//
// # Ports and brick processes
//
// The HTTP API listens on the node's port (api.DefaultPort). Every brick
// listens on a port of its own, chosen free when the brick first starts and
// kept in the state, so that a brick that restarts comes back at the
// address clients have in their spec (the node's advertised host and the
// brick's port).
//
// With Config.BrickExec set (as `mortar server` does), bricks run outside
// the node: with Config.BrickMultiplex (the server's default) all in one
// child process, `mortar brick-host` (brickrun.RunHost, driven by its mux runner),
// as GlusterFS's brick multiplexing; without it each in a child process of
// its own, `mortar brick` (brickrun.Run), like GlusterFS's glusterfsd.
// `volume start` returns once every brick reported that it listens; a
// brick that dies stays offline, with its exit status in `volume status`,
// until `volume start NAME force`. With Config.KeepBricks (the server's
// default) the brick host outlives the node: a node that dies, stops or
// is upgraded leaves it serving, and takes its bricks over when it starts
// again (over the host's unix control socket); otherwise brick processes
// get SIGKILL when the node's process dies, and the node starts them
// again when it starts.
// Without BrickExec, bricks run inside the node, each on its own listener,
// which is what tests and embedding programs use; KillBrick ends one
// abruptly in every mode.
//
// # State
//
// The cluster state (package mgmt/state) changes only by state.Commands
// applied in order by a Store. state.State.Apply is deterministic and
// does no I/O; everything that touches disks (marking bricks, opening
// them) happens in the node before or after the command; a brick's port
// is recorded by a command too. The Store is a Raft log (package
// mgmt/raftstore, hashicorp/raft over bbolt in DATA/raft): every node is
// a voter, and one node is a valid cluster of its own until `peer probe`
// joins it to another. Each node also writes the
// state it applied to DATA/state.json, which it starts its bricks from
// when it restarts without a quorum.
//
// The package still does several jobs at once (issue 16): the HTTP
// API's server (api.go), request forwarding to the leader (cluster.go),
// the volume lifecycle (volumes.go), starting and watching this node's
// bricks (bricks.go; how they run is package mgmt/brickrun), starting
// the heal daemons and passing heal commands to them (heal.go,
// healcmd.go; the daemon is package mgmt/healdaemon) and the leader's
// side of rebalance and remove-brick tasks (rebalance.go, takeup.go; a
// node's part, moving its files, is package mgmt/rebalance).
//
// # Embedding
//
// Start runs a node in-process (tests and `mortar dev` do this):
//
//	n, err := mgmt.Start(mgmt.Config{DataDir: dir, Listen: "127.0.0.1:0", Logger: log})
//	...
//	c := api.NewClient(n.Addr())
//	spec, err := c.Spec(ctx, "gv0")
package mgmt
