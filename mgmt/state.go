package mgmt

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"

	"github.com/mortarfs/mortar/volume"
)

// Volume statuses.
const (
	StatusCreated = "created"
	StatusStarted = "started"
	StatusStopped = "stopped"
)

// State is the cluster state: the nodes and the volumes. It changes only
// through Apply, which is deterministic: the same commands applied in the
// same order to equal states give equal states. That is what lets the file
// store of today be replaced by a replicated log (Raft) carrying the same
// commands.
type State struct {
	// Index counts the commands applied so far.
	Index   uint64                  `json:"index"`
	Nodes   map[string]NodeState    `json:"nodes"`
	Volumes map[string]*VolumeState `json:"volumes"`
}

// NodeState is one node (peer) of the cluster.
type NodeState struct {
	ID   string `json:"id"`
	Addr string `json:"addr"` // advertised host:port
}

// VolumeState is one volume as the cluster keeps it.
type VolumeState struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	Type string `json:"type"`
	// Replica is the size of a replica set (Replicate volumes): the sets
	// are Bricks[0:Replica], Bricks[Replica:2*Replica], ...
	Replica int `json:"replica,omitempty"`
	// Disperse is the size of a disperse set and Redundancy how many of
	// its bricks may be lost (Disperse volumes): the sets are
	// Bricks[0:Disperse], Bricks[Disperse:2*Disperse], ...
	Disperse   int               `json:"disperse,omitempty"`
	Redundancy int               `json:"redundancy,omitempty"`
	Bricks     []BrickState      `json:"bricks"`
	Options    map[string]string `json:"options"`
	Status     string            `json:"status"`
	// SpecVersion increases with every change clients must follow.
	SpecVersion uint64 `json:"spec_version"`
}

// BrickState is one brick of a volume.
type BrickState struct {
	ID   string `json:"id"`
	Node string `json:"node"` // id of the node that serves it
	Host string `json:"host"` // host as the operator named it
	Path string `json:"path"`
	// Arbiter bricks hold names and metadata but no file data.
	Arbiter bool `json:"arbiter,omitempty"`
	// Port is the TCP port the brick listens on, chosen when it first
	// starts and kept, so that clients find it again after a restart
	// (0: never started).
	Port int `json:"port,omitempty"`
}

// Name returns the brick as the operator writes it, host:/path.
func (b BrickState) Name() string { return b.Host + ":" + b.Path }

// Command operations.
const (
	// OpSetNode adds a node or changes its address (Node).
	OpSetNode = "set-node"
	// OpCreateVolume adds a volume (Volume) in status created.
	OpCreateVolume = "create-volume"
	// OpSetStatus changes volume Name to Status.
	OpSetStatus = "set-status"
	// OpSetOption sets option Key of volume Name to Value.
	OpSetOption = "set-option"
	// OpDeleteVolume removes volume Name, which must not be started.
	OpDeleteVolume = "delete-volume"
	// OpSetBrickPort records Port as the port of brick Brick of volume
	// Name.
	OpSetBrickPort = "set-brick-port"
)

// Command is one change to the State. Commands are plain data, so that
// they can be logged, replicated and replayed.
type Command struct {
	Op     string       `json:"op"`
	Node   *NodeState   `json:"node,omitempty"`
	Volume *VolumeState `json:"volume,omitempty"`
	Name   string       `json:"name,omitempty"`
	Status string       `json:"status,omitempty"`
	Key    string       `json:"key,omitempty"`
	Value  string       `json:"value,omitempty"`
	Brick  string       `json:"brick,omitempty"`
	Port   int          `json:"port,omitempty"`
}

// NewState returns an empty state.
func NewState() *State {
	return &State{Nodes: map[string]NodeState{}, Volumes: map[string]*VolumeState{}}
}

// Clone returns a deep copy of s.
func (s *State) Clone() *State {
	c := &State{Index: s.Index, Nodes: maps.Clone(s.Nodes), Volumes: make(map[string]*VolumeState, len(s.Volumes))}
	if c.Nodes == nil {
		c.Nodes = map[string]NodeState{}
	}
	for name, v := range s.Volumes {
		c.Volumes[name] = v.Clone()
	}
	return c
}

// Clone returns a deep copy of v.
func (v *VolumeState) Clone() *VolumeState {
	c := *v
	c.Bricks = slices.Clone(v.Bricks)
	c.Options = maps.Clone(v.Options)
	return &c
}

// VolumeNames returns the names of the volumes, sorted.
func (s *State) VolumeNames() []string {
	names := make([]string, 0, len(s.Volumes))
	for name := range s.Volumes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// BrickAt returns the volume and brick that use path on node, if any.
func (s *State) BrickAt(node, path string) (*VolumeState, BrickState, bool) {
	for _, name := range s.VolumeNames() {
		v := s.Volumes[name]
		for _, b := range v.Bricks {
			if b.Node == node && b.Path == path {
				return v, b, true
			}
		}
	}
	return nil, BrickState{}, false
}

// Apply applies cmd to s. On error s is unchanged.
func (s *State) Apply(cmd Command) error {
	var err error
	switch cmd.Op {
	case OpSetNode:
		err = s.setNode(cmd.Node)
	case OpCreateVolume:
		err = s.createVolume(cmd.Volume)
	case OpSetStatus:
		err = s.setStatus(cmd.Name, cmd.Status)
	case OpSetOption:
		err = s.setOption(cmd.Name, cmd.Key, cmd.Value)
	case OpDeleteVolume:
		err = s.deleteVolume(cmd.Name)
	case OpSetBrickPort:
		err = s.setBrickPort(cmd.Name, cmd.Brick, cmd.Port)
	default:
		err = fmt.Errorf("unknown command %q", cmd.Op)
	}
	if err != nil {
		return err
	}
	s.Index++
	return nil
}

func (s *State) setNode(n *NodeState) error {
	if n == nil || n.ID == "" || n.Addr == "" {
		return fmt.Errorf("set-node: node id and address are required")
	}
	old, known := s.Nodes[n.ID]
	s.Nodes[n.ID] = *n
	oldHost, _ := splitHostPortDefault(old.Addr)
	newHost, _ := splitHostPortDefault(n.Addr)
	if known && oldHost != newHost {
		// Clients reach the node's bricks at the new host: every volume
		// with a brick there has a new spec. (The bricks' ports are their
		// own; the node's API port is not in specs.)
		for _, v := range s.Volumes {
			if slices.ContainsFunc(v.Bricks, func(b BrickState) bool { return b.Node == n.ID }) {
				v.SpecVersion++
			}
		}
	}
	return nil
}

func (s *State) createVolume(v *VolumeState) error {
	if v == nil || v.Name == "" || v.ID == "" {
		return fmt.Errorf("create-volume: volume name and id are required")
	}
	if _, ok := s.Volumes[v.Name]; ok {
		return errorf(ErrExists, "volume %s already exists", v.Name)
	}
	if len(v.Bricks) == 0 {
		return errorf(ErrInvalid, "volume %s: no bricks given", v.Name)
	}
	seen := map[string]bool{}
	for _, b := range v.Bricks {
		if _, ok := s.Nodes[b.Node]; !ok {
			return fmt.Errorf("create-volume %s: brick %s on unknown node %q", v.Name, b.Name(), b.Node)
		}
		if seen[b.Node+"\x00"+b.Path] || seen[b.ID] {
			return errorf(ErrInvalid, "volume %s: duplicate brick %s", v.Name, b.Name())
		}
		seen[b.Node+"\x00"+b.Path], seen[b.ID] = true, true
		if other, _, ok := s.BrickAt(b.Node, b.Path); ok {
			return errorf(ErrInvalid, "brick %s is already part of volume %s", b.Name(), other.Name)
		}
	}
	spec := layoutSpec(v)
	if err := spec.Validate(); err != nil {
		return errorf(ErrInvalid, "%w", err)
	}
	c := v.Clone()
	c.Status = StatusCreated
	c.SpecVersion = 1
	if c.Options == nil {
		c.Options = map[string]string{}
	}
	s.Volumes[c.Name] = c
	return nil
}

func (s *State) volume(name string) (*VolumeState, error) {
	v, ok := s.Volumes[name]
	if !ok {
		return nil, errorf(ErrNotFound, "volume %s does not exist", name)
	}
	return v, nil
}

func (s *State) setStatus(name, status string) error {
	v, err := s.volume(name)
	if err != nil {
		return err
	}
	switch {
	case status == StatusStarted && v.Status == StatusStarted:
		return errorf(ErrState, "volume %s is already started", name)
	case status == StatusStopped && v.Status != StatusStarted:
		return errorf(ErrState, "volume %s is not started", name)
	case status != StatusStarted && status != StatusStopped:
		return fmt.Errorf("set-status %s: bad status %q", name, status)
	}
	v.Status = status
	return nil
}

func (s *State) setOption(name, key, value string) error {
	v, err := s.volume(name)
	if err != nil {
		return err
	}
	if key == "" {
		return fmt.Errorf("set-option %s: empty key", name)
	}
	if v.Options == nil {
		v.Options = map[string]string{}
	}
	v.Options[key] = value
	v.SpecVersion++
	return nil
}

func (s *State) setBrickPort(name, brick string, port int) error {
	v, err := s.volume(name)
	if err != nil {
		return err
	}
	if port <= 0 || port > 65535 {
		return fmt.Errorf("set-brick-port %s: bad port %d", name, port)
	}
	i := slices.IndexFunc(v.Bricks, func(b BrickState) bool { return b.ID == brick })
	if i < 0 {
		return errorf(ErrNotFound, "volume %s has no brick %s", name, brick)
	}
	if v.Bricks[i].Port != port {
		v.Bricks[i].Port = port
		v.SpecVersion++
	}
	return nil
}

func (s *State) deleteVolume(name string) error {
	v, err := s.volume(name)
	if err != nil {
		return err
	}
	if v.Status == StatusStarted {
		return errorf(ErrState, "volume %s is started; stop it first (mortar volume stop %s)", name, name)
	}
	delete(s.Volumes, name)
	return nil
}

// Spec returns the spec clients use to mount v, with each brick's address
// made of the host of the node that serves it and the brick's own port.
func (s *State) Spec(v *VolumeState) volume.Spec {
	spec := layoutSpec(v)
	spec.Options = maps.Clone(v.Options)
	spec.Version = v.SpecVersion
	for i, b := range v.Bricks {
		spec.Bricks[i].Addr = brickAddr(s.Nodes[b.Node].Addr, b.Port)
	}
	return spec
}

// layoutSpec returns the part of v's spec that does not depend on where
// the bricks run: name, id, type, replica or disperse sets and arbiters.
func layoutSpec(v *VolumeState) volume.Spec {
	spec := volume.Spec{Name: v.Name, ID: v.ID, Type: v.Type, Replica: v.Replica, Disperse: v.Disperse, Redundancy: v.Redundancy}
	for _, b := range v.Bricks {
		spec.Bricks = append(spec.Bricks, volume.Brick{ID: b.ID, Host: b.Host, Path: b.Path, Arbiter: b.Arbiter})
	}
	return spec
}

// brickAddr is where a brick listening on port of the node advertised as
// nodeAddr is reached: the node's host with the brick's port, or "" for a
// brick that never started.
func brickAddr(nodeAddr string, port int) string {
	if port == 0 || nodeAddr == "" {
		return ""
	}
	host, _ := splitHostPortDefault(nodeAddr)
	return net.JoinHostPort(host, strconv.Itoa(port))
}
