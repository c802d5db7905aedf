// Package state is the cluster's state as every node of a mortar cluster
// keeps it: the nodes, the volumes with their bricks, options, layouts,
// tasks and fences, and the revoked certificates. It changes only by
// Commands, plain data applied in order by State.Apply, which is
// deterministic and does no I/O: the node (package mgmt) replicates the
// commands as the entries of a Raft log, does the work on disks and
// bricks before or after a command, and builds a started volume's spec
// for clients from it (State.Spec).
package state
