package wire

// Magic opens every client connection to a brick service. A node serves its
// management API (HTTP) and its bricks on one port and tells them apart by
// these first four bytes.
const Magic = "MRT1"
