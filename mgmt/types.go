package mgmt

import "time"

// The types of the HTTP API, shared by the server and the Client.

// CreateVolumeRequest asks for a new volume. The counts are GlusterFS's
// volume-type keywords: Replica N makes replica sets of N consecutive
// bricks (distributed-replicate with more than one set); Arbiter 1 with
// Replica 3 (or GlusterFS's older "replica 2 arbiter 1") makes the third
// brick of every set an arbiter. Disperse N makes disperse sets of N
// consecutive bricks (-1: "disperse" without a count, one set of all the
// bricks), DisperseData K with Redundancy M sets of K+M; Redundancy is
// how many bricks of a set may be lost (default: a third of the set,
// at least 1) and must stay below half the set. Disperse and replica do
// not mix.
type CreateVolumeRequest struct {
	Name string `json:"name"`
	// Bricks are "host:/path"; every host must name a node of the cluster.
	Bricks       []string `json:"bricks"`
	Replica      int      `json:"replica,omitempty"`
	Arbiter      int      `json:"arbiter,omitempty"`
	Disperse     int      `json:"disperse,omitempty"`
	DisperseData int      `json:"disperse_data,omitempty"`
	Redundancy   int      `json:"redundancy,omitempty"`
	// Force allows brick directories that are not empty (their files
	// become the volume's) or are on the root file system.
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
	Type        string            `json:"type"` // "distribute", "replicate" or "disperse"
	Replica     int               `json:"replica,omitempty"`
	Disperse    int               `json:"disperse,omitempty"`   // bricks per disperse set
	Redundancy  int               `json:"redundancy,omitempty"` // bricks of a disperse set that may be lost
	Status      string            `json:"status"`
	Bricks      []BrickInfo       `json:"bricks"`
	Options     map[string]string `json:"options,omitempty"`
	SpecVersion uint64            `json:"spec_version"`
	// Warnings are notes for the operator in the answer to a create (a
	// geometry that works but is slow); other answers leave it empty.
	Warnings []string `json:"warnings,omitempty"`
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
	Raft string `json:"raft,omitempty"` // address of its Raft traffic
	// Leader is the id of the node that leads the cluster now ("": none
	// known, the cluster has no quorum).
	Leader string `json:"leader,omitempty"`
	// Peers counts the nodes of its cluster (itself included), Volumes
	// the volumes.
	Peers   int `json:"peers"`
	Volumes int `json:"volumes"`
}

// errorBody is what the API answers on failure.
type errorBody struct {
	Error string `json:"error"`
	// Kind names the marker error (see markers), if any.
	Kind string `json:"kind,omitempty"`
}

// HealRequest is the body of POST /v1/volumes/{name}/heal.
type HealRequest struct {
	// Full crawls every replica set from the root in the background
	// instead of healing what the heal indexes list.
	Full bool `json:"full,omitempty"`
}

// HealInfo is what a volume's heal daemon knows: each brick's heal index
// and the daemon's counters.
type HealInfo struct {
	Name   string      `json:"name"`
	Bricks []HealBrick `json:"bricks"`
	// Healed and Failed count inodes since the heal daemon (re)started
	// (Since): the node started, the volume started or a heal option
	// changed. HealedBytes counts the file data written to bricks healed
	// (for a dispersed file, the fragment records rewritten).
	Healed      uint64    `json:"healed"`
	Failed      uint64    `json:"failed"`
	HealedBytes uint64    `json:"healed_bytes"`
	Since       time.Time `json:"since,omitzero"`
	// InProgress is how many entries are being healed now.
	InProgress int `json:"in_progress"`
	// SplitBrain is how many inodes were in split-brain when last looked
	// at.
	SplitBrain int `json:"split_brain"`
	// LastScan is when the heal indexes were last scanned (zero: never).
	LastScan time.Time `json:"last_scan,omitzero"`
	// Full is the last full heal, if any since the daemon started.
	Full *FullHeal `json:"full,omitempty"`
	// Safe says whether one brick may be taken down now without losing
	// quorum or a copy (see SafeToTakeDown); Unsafe says why not.
	Safe   bool   `json:"safe_to_take_down"`
	Unsafe string `json:"unsafe,omitempty"`
}

// Pending sums the entries of every brick's heal index.
func (h HealInfo) Pending() int {
	n := 0
	for _, b := range h.Bricks {
		n += b.Entries
	}
	return n
}

// HealBrick is one brick's list of inodes that need healing (or, in a
// SplitBrainInfo, that are in split-brain).
type HealBrick struct {
	Name   string `json:"name"` // host:/path
	Set    int    `json:"set"`  // index of its replica set
	Online bool   `json:"online"`
	// Entries counts the inodes; Paths lists them (at most
	// MaxHealPaths, "<gfid:...>" for an inode whose path is unknown).
	Entries int      `json:"entries"`
	Paths   []string `json:"paths,omitempty"`
	// Error says why the brick's list could not be read.
	Error string `json:"error,omitempty"`
}

// FullHeal is the state of a full heal (a crawl of every replica set).
type FullHeal struct {
	Running bool `json:"running"`
	// Again: another crawl was asked for during this one and follows it.
	Again    bool      `json:"again,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	// Looked counts the inodes the heal daemon looked at since this
	// crawl began: the crawl's progress (index heals meanwhile count too).
	Looked uint64 `json:"looked"`
	// Error is why the last crawl did not finish cleanly.
	Error string `json:"error,omitempty"`
}

// SplitBrainInfo lists a volume's inodes in split-brain, per brick and
// with each copy's details.
type SplitBrainInfo struct {
	Name    string            `json:"name"`
	Bricks  []HealBrick       `json:"bricks"`
	Entries []SplitBrainEntry `json:"entries"`
}

// SplitBrainEntry is an inode whose copies blame each other (or disagree
// on its identity with no copy to decide).
type SplitBrainEntry struct {
	Set    int              `json:"set"`
	Path   string           `json:"path"`
	Gfid   string           `json:"gfid"`
	Copies []SplitBrainCopy `json:"copies"`
}

// SplitBrainCopy is one brick's copy of an inode in split-brain.
type SplitBrainCopy struct {
	Brick string    `json:"brick"`
	Error string    `json:"error,omitempty"` // no copy there, or the brick is down
	Gfid  string    `json:"gfid,omitempty"`
	Size  uint64    `json:"size"`
	Mtime time.Time `json:"mtime,omitzero"`
	// Blames are the bricks this copy says missed changes.
	Blames []string `json:"blames,omitempty"`
}

// Split-brain resolution policies (SplitBrainRequest.Policy), as
// GlusterFS names them.
const (
	PolicyLatestMtime = "latest-mtime"
	PolicyBiggerFile  = "bigger-file"
	PolicySourceBrick = "source-brick"
)

// SplitBrainRequest asks to resolve split-brains: Path with the newest
// copy (latest-mtime) or the biggest (bigger-file); or with the copy on
// brick Source (source-brick), for Path or, without one, for every
// split-brain of Source's replica set.
type SplitBrainRequest struct {
	Policy string `json:"policy"`
	Source string `json:"source,omitempty"` // host:/path
	Path   string `json:"path,omitempty"`
}

// SplitBrainResolved lists the paths a resolution healed.
type SplitBrainResolved struct {
	Paths []string `json:"paths"`
}

// ResetBrickRequest is the body of POST /v1/volumes/{name}/reset-brick.
type ResetBrickRequest struct {
	Brick string `json:"brick"` // host:/path
}
