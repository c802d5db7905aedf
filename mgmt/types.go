package mgmt

// The types of the HTTP API, shared by the server and the Client.

// CreateVolumeRequest asks for a new volume. The counts are GlusterFS's
// volume-type keywords (Disperse -1: "disperse" without a count); mortar
// refuses them until it has those volume types.
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
	Type        string            `json:"type"`
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
	Addr string `json:"addr"` // where the node serving it listens
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
	// Error says why a brick that should run does not.
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
