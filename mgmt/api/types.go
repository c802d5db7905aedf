package api

import (
	"time"

	"github.com/mortarfs/mortar/layer/distribute"
	"github.com/mortarfs/mortar/volume"
)

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

// Volume statuses (VolumeInfo.Status).
const (
	StatusCreated = "created"
	StatusStarted = "started"
	StatusStopped = "stopped"
)

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

// ErrorBody is what the API answers on failure.
type ErrorBody struct {
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
	// heal.MaxListed, "<gfid:...>" for an inode whose path is unknown).
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

// ViaHeader marks a request one node forwarded to another (its value is
// the sender's id), so it is never forwarded twice.
const ViaHeader = "X-Mortar-Via"

// JoinRequest asks a node to leave its one-node cluster and wait to be
// added to the cluster of node Leader.
type JoinRequest struct {
	Leader string `json:"leader"` // id of the node that probes
	// SealedSecret is the cluster's secret, which the joining node takes
	// over (nodes without TLS), sealed under the joining node's own secret
	// (see ProbeLabel); Secret is it in clear, sent only over loopback.
	SealedSecret []byte `json:"sealed_secret,omitempty"`
	Secret       string `json:"secret,omitempty"`
}

// DefaultPort is the port a node's management API listens on. Each brick
// listens on a port of its own, chosen free when it first starts and kept.
// (GlusterFS uses 24007 for glusterd; mortar stays clear of it.)
const DefaultPort = 7420

// Task kinds and statuses.
const (
	TaskRebalance   = "rebalance"
	TaskFixLayout   = "fix-layout"
	TaskRemoveBrick = "remove-brick"

	TaskRunning   = "in progress"
	TaskCompleted = "completed"
	TaskFailed    = "failed"
	TaskStopped   = "stopped"
)

// Task is a volume's rebalance (or fix-layout, or remove-brick drain).
type Task struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Status string `json:"status"`
	// Removing lists the ids of the bricks a remove-brick drains.
	Removing []string `json:"removing,omitempty"`
	// Error says why the task failed or what it could not move.
	Error   string    `json:"error,omitempty"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
}

// Clients follow their volume's spec with a long poll:
//
//	GET /v1/volumes/{name}/spec?after=N[&wait=DURATION][&client=ID&runs=V]
//
// answers as soon as the spec's version is above N: at once if it is
// already, else when a change gets there. When wait (default 30s, at most
// 5m; a Go duration or seconds) passes first, it answers with the current
// spec, whose version is then N or less: the client compares versions and
// asks again. A volume that is not started (or is stopped while the client
// waits) has no spec: the answer is an ErrState error. Without after, the
// endpoint answers at once with the current spec, as for a mount. A
// client that names itself tells which spec it runs (mgmt/takeup.go).
const (
	// DefaultSpecWait is how long a spec watch waits for a change.
	DefaultSpecWait = 30 * time.Second
	// MaxSpecWait is the longest wait a watch may ask for.
	MaxSpecWait = 5 * time.Minute
)

// ProbeRequest asks to add the node at Host ("host" or "host:port") to
// the cluster.
type ProbeRequest struct {
	Host string `json:"host"`
	// Secret is the probed node's own cluster secret (its DATA/secret),
	// which a node without TLS requires of a caller on another machine:
	// the probe proves with it that the operator controls that node, and
	// hands the node this cluster's secret. Not needed with TLS, nor for
	// a node on this machine's loopback. Without TLS it crosses the
	// network only as SealedSecret (see ProbeLabel); ProbeNode seals it.
	Secret string `json:"secret,omitempty"`
	// SealedSecret is Secret sealed under the cluster secret.
	SealedSecret []byte `json:"sealed_secret,omitempty"`
}

// PeerInfo describes one node of the cluster.
type PeerInfo struct {
	ID   string `json:"id"`
	Addr string `json:"addr"` // management API, host:port
	Raft string `json:"raft"` // Raft traffic, host:port
	// Connected: the node answered the node that made this list just now.
	Connected bool `json:"connected"`
	Leader    bool `json:"leader,omitempty"`
	// Self marks the node that made the list.
	Self bool `json:"self,omitempty"`
	// Error says why the node did not answer.
	Error string `json:"error,omitempty"`
}

// ReplaceBrickRequest is the body of POST /v1/volumes/{name}/replace-brick:
// brick Source ("host:/path") of a replicated or dispersed volume is
// replaced by the new, empty directory Destination ("host:/path", on any
// node of the cluster). Force allows a Destination on the root file
// system (the CLI's required "commit force" sets it, as in GlusterFS); it
// must be empty all the same.
type ReplaceBrickRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	Force       bool   `json:"force,omitempty"`
}

// AddBrickRequest asks to append bricks (whole replica or disperse sets)
// to a volume.
type AddBrickRequest struct {
	Bricks []string `json:"bricks"`
	// Force allows brick directories that are not empty or are on the
	// root file system, as in CreateVolumeRequest.
	Force bool `json:"force,omitempty"`
}

// Rebalance actions.
const (
	ActionStart  = "start"
	ActionStop   = "stop"
	ActionCommit = "commit"
)

// RebalanceRequest starts or stops a volume's rebalance; FixLayout
// starts only its first phase (new directories get their place on the new
// sets; no file moves).
type RebalanceRequest struct {
	Action    string `json:"action"`
	FixLayout bool   `json:"fix_layout,omitempty"`
}

// RemoveBrickRequest drains bricks (start), stops that, or removes them
// once drained (commit; with Force, even if files could not be moved:
// they stay in the removed bricks' directories).
type RemoveBrickRequest struct {
	Action string   `json:"action"`
	Bricks []string `json:"bricks"`
	Force  bool     `json:"force,omitempty"`
}

// RebalanceStatus is a volume's task and each node's part of it.
type RebalanceStatus struct {
	Name  string         `json:"name"`
	Task  *Task          `json:"task,omitempty"`
	Nodes []NodeProgress `json:"nodes"`
}

// NodeProgress is one node's part of a task.
type NodeProgress struct {
	Node   string `json:"node"`
	Host   string `json:"host"`
	TaskID string `json:"task_id,omitempty"`
	Status string `json:"status"` // not started, in progress, completed, failed, stopped
	distribute.RebalanceStats
	Started time.Time `json:"started,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
	// Elapsed is the run time in seconds; Rate files scanned per second;
	// ETA the seconds left, estimated from the inodes its bricks use (-1:
	// unknown).
	Elapsed float64 `json:"elapsed"`
	Rate    float64 `json:"rate"`
	ETA     float64 `json:"eta"`
	// Estimate is how many entries the node's source bricks hold (their
	// used inodes), the base of ETA.
	Estimate uint64 `json:"estimate,omitempty"`
	Error    string `json:"error,omitempty"`
	// Checkpoint is where a resumed run starts.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// LocalMigrateRequest asks a node to move the misplaced files whose data
// is on the sets Sources (ids), with the graph of Spec.
type LocalMigrateRequest struct {
	Task    Task        `json:"task"`
	Spec    volume.Spec `json:"spec"`
	Sources []string    `json:"sources"`
}

// RevokeRequest revokes the certificate of serial number Serial
// (lower-case hexadecimal), Note saying which (its name, when).
type RevokeRequest struct {
	Serial string `json:"serial"`
	Note   string `json:"note,omitempty"`
}
