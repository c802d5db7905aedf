package layer

import "syscall"

// ErrFenced is a brick's answer to an operation that makes a name
// (create, mknod, mkdir, symlink, link, rename) sent through a connection
// whose layout generation is below the volume's fence (wire.ChallengeSize
// says how a client gives its generation): the client places names by a
// layout the volume has left behind, and a rebalance may already have
// passed the directory. The client must run a newer spec of the volume
// and try again there (volume.Live does, once).
const ErrFenced = syscall.EKEYEXPIRED
