// Package sim runs a whole volume in one process, driven by one seed
// (issue 15's simulation testing): the client stack volume.Build makes
// (distribute over replicate or disperse, client caches off), the brick
// servers with their posix storage in temporary directories, and the
// healer, connected by an in-memory network (net.Pipe) whose links the run
// controls.
//
// A run takes Steps random steps from its seed. Most are operations of
// several clients, one at a time: whole-file writes, writes into and
// truncations of existing files, renames, unlinks, files held open and
// written across steps, reads and listings checked against a model of
// what the clients were told. The others inject or lift faults: brick
// crashes and restarts (at least one brick of each set stays up),
// partitions between a client and a brick, slow links, clients crashing
// between operations (files left open), and clients dying in the middle
// of writing a file (each of its links dies after a random number of
// further writes, so the operation reaches some bricks and not others).
// After each fault the run waits until every client sees the network as
// it is, so that operations find the same state whatever the timing of
// reconnections: a seed replays the same steps with the same outcomes
// (Report.History; TestSimReplays checks it) up to the first client
// dying in the middle of a write: how much of that write reached each
// brick depends on how write-behind batched it, and the goroutines
// inside a step are not scheduled by the run, so from there a race can
// play out differently (in 20 seeds of disperse 2 + 1 run twice, one
// did).
//
// At the end every fault is lifted, the files held open are closed, and
// the healer runs. The run fails (a violation) if a client was told
// something the model says is wrong (a read of an acknowledged file
// that differs or fails with every brick up, a listing that lacks a file
// or shows a removed one, an operation that hangs), if heal leaves a set's
// bricks different or anything in split-brain, or if the files do not
// read back as the model says through every client afterwards. A
// difference that an index heal leaves (nothing marked it) but a full
// heal repairs is reported, not failed (Report.Unmarked).
//
// With Config.FullDisks the faults also fill bricks' disks (a brick then
// refuses new data and inodes with ENOSPC, as one at its reserve does,
// and still records marks) and free them (shapes replica3x2-full and
// disperse2+1-full; docs/REPLICATION.md, "Simulation", says what they
// found).
//
// With Config.Grow the volume starts with its last set just added (in no
// range of the layout) and the faults include a rebalance's steps, as
// mgmt's rebalance task takes them: fix-layout, the new layout (with the
// previous one) to every client (a new graph each, the old one kept for
// the files open through it, as volume.Live does), the walk that moves
// the files (distribute.Rebalance over its own graph, parked after every
// directory so that it interleaves with the clients' steps), started
// again when it left files behind, and the previous layout dropped when
// it left none. At the end the rebalance is run to completion with every
// fault lifted (it must leave no file behind), and the volume healed and
// checked again (shapes replica3x2-grow and disperse2+1x2-grow). With
// Config.Shrink the same steps drain the last set instead (remove-brick:
// the layout without it, no fix-layout) and, once a walk leaves nothing
// and the set's own directories hold no file (distribute.Remaining, as
// mgmt checks), remove it from the volume (shapes *-shrink).
//
// Not simulated yet: clocks, the management daemon itself, a client slow
// to take a new layout, time itself (the run uses the real clock and the
// real protocol timeouts).
package sim
