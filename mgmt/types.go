package mgmt

// The types of the HTTP API, shared by the server and the Client.

// CreateVolumeRequest asks for a new volume. The counts are GlusterFS's
// volume-type keywords: Replica N makes replica sets of N consecutive
// bricks (distributed-replicate with more than one set); Arbiter 1 with
// Replica 3 (or GlusterFS's older "replica 2 arbiter 1") makes the third
// brick of every set an arbiter. Disperse (-1: "disperse" without a
// count), DisperseData and Redundancy are refused until mortar has
// dispersed volumes.
type CreateVolumeRequest struct {
	Name string `json:"name"`
	// Bricks are "host:/path"; every host must name a node of the cluster.
	Bricks       []string `json:"bricks"`
	Replica      int      `json:"replica,omitempty"`
	Arbiter      int      `json:"arbiter,omitempty"`
	Disperse     int      `json:"disperse,omitempty"`
	DisperseData int      `json:"disperse_data,omitempty"`
	Redundancy   int      `json:"redundancy,omitempty"`
	// Force allows a brick at the root of a file system ("/").
	Force bool `json:"force,omitempty"`
}

// StartRequest is the body of a start request.
type StartRequest struct {
	// Force starts the bricks that are not running on a volume that is
	// already started, instead of refusing.
	Force bool `json:"force,omitempty"`
}

// SetOptionRequest is the body of a set-option request.
type SetOptionRequest struct {
	Value string `json:"value"`
}

// VolumeInfo describes a volume.
type VolumeInfo struct {
	Name        string            `json:"name"`
	ID          string            `json:"id"`
	Type        string            `json:"type"` // "distribute" or "replicate"
	Replica     int               `json:"replica,omitempty"`
	Status      string            `json:"status"`
	Bricks      []BrickInfo       `json:"bricks"`
	Options     map[string]string `json:"options,omitempty"`
	SpecVersion uint64            `json:"spec_version"`
}

// BrickInfo describes one brick of a volume.
type BrickInfo struct {
	ID   string `json:"id"`
	Host string `json:"host"`
	Path string `json:"path"`
	// Addr is where clients reach the brick: the advertised host of its
	// node and the brick's own Port ("" until the brick first starts).
	Addr    string `json:"addr"`
	Port    int    `json:"port,omitempty"`
	Arbiter bool   `json:"arbiter,omitempty"`
}

// Name returns the brick as the operator writes it, host:/path.
func (b BrickInfo) Name() string { return b.Host + ":" + b.Path }

// VolumeStatus is the live state of a volume's bricks.
type VolumeStatus struct {
	Name   string        `json:"name"`
	ID     string        `json:"id"`
	Status string        `json:"status"`
	Bricks []BrickStatus `json:"bricks"`
}

// BrickStatus is the live state of one brick.
type BrickStatus struct {
	BrickInfo
	Online bool `json:"online"`
	// PID is the brick's process (0 when offline, or when the node runs
	// its bricks in-process).
	PID int `json:"pid,omitempty"`
	// Error says why a brick that should run does not: why it did not
	// start, or how its process ended.
	Error string     `json:"error,omitempty"`
	Disk  *DiskUsage `json:"disk,omitempty"`
}

// DiskUsage is what statfs(2) says about a brick's file system, in bytes
// and inodes.
type DiskUsage struct {
	Total      uint64 `json:"total"`
	Free       uint64 `json:"free"`
	Avail      uint64 `json:"avail"`
	Inodes     uint64 `json:"inodes"`
	InodesFree uint64 `json:"inodes_free"`
}

// NodeInfo describes the node that answers.
type NodeInfo struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

// errorBody is what the API answers on failure.
type errorBody struct {
	Error string `json:"error"`
	// Kind names the marker error (see markers), if any.
	Kind string `json:"kind,omitempty"`
}
