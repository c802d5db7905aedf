package wire

// Magic opens every client connection to a brick: a connection that does
// not start with it is not mortar's and is closed at once.
const Magic = "MRT1"
