// Package brickrun runs a node's bricks. A brick is served by Open and
// Served (its posix storage, the brick-side layers, and the wire server on
// a listener of its own); Run is the body of a brick process (`mortar
// brick`), RunHost that of a brick host (`mortar brick-host`, many bricks
// in one process, as GlusterFS's brick multiplexing), driven over a unix
// control socket, one JSON object per line each way. The Runners start
// bricks for the node: in a brick host (which can serve on when the node
// stops and be taken over when the node starts again) or each in a
// process of its own (Processes), or in the node's process (InProc). What a brick is asked to serve is a Config, and Args
// turns it into the flags of `mortar brick`.
package brickrun
