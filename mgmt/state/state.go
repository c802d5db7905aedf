package state

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume"
)

// State is the cluster state: the nodes and the volumes. It changes only
// through Apply, which is deterministic: the same commands applied in the
// same order to equal states give equal states, which is what lets every
// node keep a copy by applying the entries of one replicated log (mgmt's
// Raft store).
type State struct {
	// Index counts the commands applied so far.
	Index   uint64             `json:"index"`
	Nodes   map[string]Node    `json:"nodes"`
	Volumes map[string]*Volume `json:"volumes"`
	// Revoked are the serial numbers of the certificates the cluster
	// refuses, each with a note saying which (mgmt/revoke.go).
	Revoked map[string]string `json:"revoked,omitempty"`
}

// Node is one node (peer) of the cluster.
type Node struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`           // advertised host:port of the management API
	Raft string `json:"raft,omitempty"` // host:port of its Raft traffic
}

// Volume is one volume as the cluster keeps it.
type Volume struct {
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
	Bricks     []Brick           `json:"bricks"`
	Options    map[string]string `json:"options"`
	Status     string            `json:"status"`
	// SpecVersion increases with every change clients must follow.
	SpecVersion uint64 `json:"spec_version"`
	// Layout places names on the sets (nil: evenly over all the sets, in
	// order); Previous is the layout a rebalance moves files away from,
	// set only until it completes (see volume.Spec).
	Layout   *volume.Layout `json:"layout,omitempty"`
	Previous *volume.Layout `json:"previous,omitempty"`
	// Fence is the oldest spec version whose clients the volume's bricks
	// let make names (wire.ChallengeSize): a rebalance raises it to the
	// spec its clients took before files move, so that a client left on
	// an older layout cannot put files where the rebalance no longer
	// looks. 0: none.
	Fence uint64 `json:"fence,omitempty"`
	// Task is the rebalance or remove-brick of the volume, running or
	// last run (nil: none since the volume was created).
	Task *api.Task `json:"task,omitempty"`
	// Secret is what the volume's bricks require of clients (volume.Spec
	// carries it to those the access rules admit); made at creation.
	// Volumes made before it have none, and their bricks check none.
	Secret string `json:"secret,omitempty"`
}

// Brick is one brick of a volume.
type Brick struct {
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
func (b Brick) Name() string { return b.Host + ":" + b.Path }

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
	// OpRemoveNode removes node Name, which must serve no brick.
	OpRemoveNode = "remove-node"
	// OpLoadState replaces an empty state by State (a node's state from
	// before Raft, taken over).
	OpLoadState = "load-state"
	// OpAddBricks appends Volume.Bricks (whole sets) to volume Name; its
	// layout is pinned first, so the new sets get no names until a
	// rebalance.
	OpAddBricks = "add-bricks"
	// OpSetLayout sets volume Name's Layout and Previous to Volume's.
	OpSetLayout = "set-layout"
	// OpSetTask sets volume Name's Task to Volume.Task.
	OpSetTask = "set-task"
	// OpRevoke adds serial number Key, with note Value, to the
	// certificates the cluster refuses (mgmt/revoke.go).
	OpRevoke = "revoke"
	// OpSetFence raises volume Name's Fence to Volume.Fence (it never
	// goes down). Clients follow no change: the spec is the same.
	OpSetFence = "set-fence"
	// OpRemoveBricks removes the bricks of volume Name whose ids
	// Volume.Bricks lists (whole sets), with them from its layouts.
	OpRemoveBricks = "remove-bricks"
	// OpReplaceBrick moves brick Brick of volume Name to node Node.ID,
	// host Key, path Value; it keeps its id and gets a new port.
	OpReplaceBrick = "replace-brick"
	// OpSetSecret gives volume Name, made before volumes had secrets, the
	// secret Value (at its next start).
	OpSetSecret = "set-secret"
	// OpResetOption removes option Key of volume Name (every option if
	// Key is empty): it is back to its default.
	OpResetOption = "reset-option"
)

// Command is one change to the State. Commands are plain data, so that
// they can be logged, replicated and replayed.
type Command struct {
	Op     string  `json:"op"`
	Node   *Node   `json:"node,omitempty"`
	Volume *Volume `json:"volume,omitempty"`
	Name   string  `json:"name,omitempty"`
	Status string  `json:"status,omitempty"`
	Key    string  `json:"key,omitempty"`
	Value  string  `json:"value,omitempty"`
	Brick  string  `json:"brick,omitempty"`
	Port   int     `json:"port,omitempty"`
	State  *State  `json:"state,omitempty"`
}

// NewState returns an empty state.
func NewState() *State {
	return &State{Nodes: map[string]Node{}, Volumes: map[string]*Volume{}}
}

// Clone returns a deep copy of s.
func (s *State) Clone() *State {
	c := &State{Index: s.Index, Nodes: maps.Clone(s.Nodes), Volumes: make(map[string]*Volume, len(s.Volumes)), Revoked: maps.Clone(s.Revoked)}
	if c.Nodes == nil {
		c.Nodes = map[string]Node{}
	}
	for name, v := range s.Volumes {
		c.Volumes[name] = v.Clone()
	}
	return c
}

// Clone returns a deep copy of v.
func (v *Volume) Clone() *Volume {
	c := *v
	c.Bricks = slices.Clone(v.Bricks)
	c.Options = maps.Clone(v.Options)
	if v.Layout != nil {
		l := volume.Layout{Ranges: slices.Clone(v.Layout.Ranges)}
		c.Layout = &l
	}
	if v.Previous != nil {
		l := volume.Layout{Ranges: slices.Clone(v.Previous.Ranges)}
		c.Previous = &l
	}
	if v.Task != nil {
		t := *v.Task
		t.Removing = slices.Clone(v.Task.Removing)
		c.Task = &t
	}
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

// NodeIDs returns the ids of the nodes, sorted.
func (s *State) NodeIDs() []string {
	ids := make([]string, 0, len(s.Nodes))
	for id := range s.Nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// BrickAt returns the volume and brick that use path on node, if any.
func (s *State) BrickAt(node, path string) (*Volume, Brick, bool) {
	for _, name := range s.VolumeNames() {
		v := s.Volumes[name]
		for _, b := range v.Bricks {
			if b.Node == node && b.Path == path {
				return v, b, true
			}
		}
	}
	return nil, Brick{}, false
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
	case OpRemoveNode:
		err = s.removeNode(cmd.Name)
	case OpReplaceBrick:
		err = s.replaceBrick(cmd)
	case OpSetSecret:
		err = s.setSecret(cmd.Name, cmd.Value)
	case OpResetOption:
		err = s.resetOption(cmd.Name, cmd.Key)
	case OpLoadState:
		if len(s.Nodes)+len(s.Volumes) > 0 || cmd.State == nil {
			return fmt.Errorf("load-state: the state is not empty")
		}
		*s = *cmd.State.Clone()
		return nil // the loaded Index stands
	case OpAddBricks:
		err = s.addBricks(cmd.Name, cmd.Volume)
	case OpSetLayout:
		err = s.setLayout(cmd.Name, cmd.Volume)
	case OpSetTask:
		err = s.setTask(cmd.Name, cmd.Volume)
	case OpSetFence:
		err = s.setFence(cmd.Name, cmd.Volume)
	case OpRevoke:
		err = s.revoke(cmd.Key, cmd.Value)
	case OpRemoveBricks:
		err = s.removeBricks(cmd.Name, cmd.Volume)
	default:
		err = fmt.Errorf("unknown command %q", cmd.Op)
	}
	if err != nil {
		return err
	}
	s.Index++
	return nil
}

func (s *State) setNode(n *Node) error {
	if n == nil || n.ID == "" || n.Addr == "" {
		return fmt.Errorf("set-node: node id and address are required")
	}
	old, known := s.Nodes[n.ID]
	s.Nodes[n.ID] = *n
	oldHost, _ := api.SplitHostPortDefault(old.Addr)
	newHost, _ := api.SplitHostPortDefault(n.Addr)
	if known && oldHost != newHost {
		// Clients reach the node's bricks at the new host: every volume
		// with a brick there has a new spec. (The bricks' ports are their
		// own; the node's API port is not in specs.)
		for _, v := range s.Volumes {
			if slices.ContainsFunc(v.Bricks, func(b Brick) bool { return b.Node == n.ID }) {
				v.SpecVersion++
			}
		}
	}
	return nil
}

// SetIDs returns the ids of v's sets (their first bricks), in order.
func SetIDs(v *Volume) []string {
	var ids []string
	spec := LayoutSpec(v)
	for _, set := range spec.Sets() {
		ids = append(ids, set[0].ID)
	}
	return ids
}

// CurrentLayout is v's layout, pinned or (nil) even over its sets.
func CurrentLayout(v *Volume) volume.Layout {
	if v.Layout != nil {
		return *v.Layout
	}
	return volume.EvenLayout(SetIDs(v))
}

func (s *State) addBricks(name string, add *Volume) error {
	v, err := s.Volume(name)
	if err != nil {
		return err
	}
	if add == nil || len(add.Bricks) == 0 {
		return api.Errorf(api.ErrInvalid, "add-brick %s: no bricks given", name)
	}
	next := v.Clone()
	if next.Layout == nil {
		l := CurrentLayout(v)
		next.Layout = &l
	}
	for _, b := range add.Bricks {
		if _, ok := s.Nodes[b.Node]; !ok {
			return fmt.Errorf("add-brick %s: brick %s on unknown node %q", name, b.Name(), b.Node)
		}
		if other, _, ok := s.BrickAt(b.Node, b.Path); ok {
			return api.Errorf(api.ErrInvalid, "brick %s is already part of volume %s", b.Name(), other.Name)
		}
		next.Bricks = append(next.Bricks, b)
	}
	if err := s.checkSpec(next); err != nil {
		return err
	}
	next.SpecVersion++
	s.Volumes[name] = next
	return nil
}

func (s *State) setLayout(name string, l *Volume) error {
	v, err := s.Volume(name)
	if err != nil {
		return err
	}
	if l == nil || l.Layout == nil {
		return fmt.Errorf("set-layout %s: no layout", name)
	}
	next := v.Clone()
	next.Layout, next.Previous = l.Layout, l.Previous
	if err := s.checkSpec(next); err != nil {
		return err
	}
	next.SpecVersion++
	s.Volumes[name] = next
	return nil
}

func (s *State) setFence(name string, f *Volume) error {
	v, err := s.Volume(name)
	if err != nil {
		return err
	}
	if f == nil || f.Fence > v.SpecVersion {
		return fmt.Errorf("set-fence %s: no fence, or one beyond the volume's spec", name)
	}
	if f.Fence > v.Fence {
		next := v.Clone()
		next.Fence = f.Fence
		s.Volumes[name] = next
	}
	return nil
}

func (s *State) setTask(name string, t *Volume) error {
	v, err := s.Volume(name)
	if err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("set-task %s: no task", name)
	}
	v.Task = t.Task
	return nil
}

func (s *State) removeBricks(name string, rm *Volume) error {
	v, err := s.Volume(name)
	if err != nil {
		return err
	}
	if rm == nil || len(rm.Bricks) == 0 {
		return api.Errorf(api.ErrInvalid, "remove-brick %s: no bricks given", name)
	}
	gone := map[string]bool{}
	for _, b := range rm.Bricks {
		gone[b.ID] = true
	}
	next := v.Clone()
	next.Bricks = slices.DeleteFunc(next.Bricks, func(b Brick) bool { return gone[b.ID] })
	if len(next.Bricks) != len(v.Bricks)-len(gone) {
		return api.Errorf(api.ErrNotFound, "remove-brick %s: not every brick given is a brick of the volume", name)
	}
	if len(next.Bricks) == 0 {
		return api.Errorf(api.ErrInvalid, "remove-brick %s: a volume keeps at least one set of bricks", name)
	}
	l := CurrentLayout(v)
	for id := range gone {
		l = l.Without(id)
	}
	next.Layout, next.Previous = &l, nil
	if err := s.checkSpec(next); err != nil {
		return err
	}
	next.SpecVersion++
	s.Volumes[name] = next
	return nil
}

// checkSpec validates the spec v would have.
func (s *State) checkSpec(v *Volume) error {
	spec := LayoutSpec(v)
	if err := spec.Validate(); err != nil {
		return api.Errorf(api.ErrInvalid, "%w", err)
	}
	return nil
}

func (s *State) replaceBrick(cmd Command) error {
	v, err := s.Volume(cmd.Name)
	if err != nil {
		return err
	}
	if cmd.Node == nil || cmd.Key == "" || cmd.Value == "" {
		return fmt.Errorf("replace-brick %s: node, host and path are required", cmd.Name)
	}
	if _, ok := s.Nodes[cmd.Node.ID]; !ok {
		return fmt.Errorf("replace-brick %s: unknown node %q", cmd.Name, cmd.Node.ID)
	}
	i := slices.IndexFunc(v.Bricks, func(b Brick) bool { return b.ID == cmd.Brick })
	if i < 0 {
		return api.Errorf(api.ErrNotFound, "volume %s has no brick %s", cmd.Name, cmd.Brick)
	}
	nb := v.Bricks[i]
	nb.Node, nb.Host, nb.Path, nb.Port = cmd.Node.ID, cmd.Key, cmd.Value, 0
	if other, _, ok := s.BrickAt(nb.Node, nb.Path); ok {
		return api.Errorf(api.ErrInvalid, "brick %s is already part of volume %s", nb.Name(), other.Name)
	}
	v.Bricks[i] = nb
	v.SpecVersion++
	return nil
}

func (s *State) removeNode(id string) error {
	if _, ok := s.Nodes[id]; !ok {
		return api.Errorf(api.ErrNotFound, "node %s is not part of the cluster", id)
	}
	for _, name := range s.VolumeNames() {
		if slices.ContainsFunc(s.Volumes[name].Bricks, func(b Brick) bool { return b.Node == id }) {
			return api.Errorf(api.ErrState, "node %s serves bricks of volume %s", id, name)
		}
	}
	delete(s.Nodes, id)
	return nil
}

func (s *State) createVolume(v *Volume) error {
	if v == nil || v.Name == "" || v.ID == "" {
		return fmt.Errorf("create-volume: volume name and id are required")
	}
	if _, ok := s.Volumes[v.Name]; ok {
		return api.Errorf(api.ErrExists, "volume %s already exists", v.Name)
	}
	if len(v.Bricks) == 0 {
		return api.Errorf(api.ErrInvalid, "volume %s: no bricks given", v.Name)
	}
	seen := map[string]bool{}
	for _, b := range v.Bricks {
		if _, ok := s.Nodes[b.Node]; !ok {
			return fmt.Errorf("create-volume %s: brick %s on unknown node %q", v.Name, b.Name(), b.Node)
		}
		if seen[b.Node+"\x00"+b.Path] || seen[b.ID] {
			return api.Errorf(api.ErrInvalid, "volume %s: duplicate brick %s", v.Name, b.Name())
		}
		seen[b.Node+"\x00"+b.Path], seen[b.ID] = true, true
		if other, _, ok := s.BrickAt(b.Node, b.Path); ok {
			return api.Errorf(api.ErrInvalid, "brick %s is already part of volume %s", b.Name(), other.Name)
		}
	}
	spec := LayoutSpec(v)
	if err := spec.Validate(); err != nil {
		return api.Errorf(api.ErrInvalid, "%w", err)
	}
	c := v.Clone()
	c.Status = api.StatusCreated
	c.SpecVersion = 1
	if c.Options == nil {
		c.Options = map[string]string{}
	}
	s.Volumes[c.Name] = c
	return nil
}

// Volume returns volume name, or an ErrNotFound error.
func (s *State) Volume(name string) (*Volume, error) {
	v, ok := s.Volumes[name]
	if !ok {
		return nil, api.Errorf(api.ErrNotFound, "volume %s does not exist", name)
	}
	return v, nil
}

func (s *State) setStatus(name, status string) error {
	v, err := s.Volume(name)
	if err != nil {
		return err
	}
	switch {
	case status == api.StatusStarted && v.Status == api.StatusStarted:
		return api.Errorf(api.ErrState, "volume %s is already started", name)
	case status == api.StatusStopped && v.Status != api.StatusStarted:
		return api.Errorf(api.ErrState, "volume %s is not started", name)
	case status != api.StatusStarted && status != api.StatusStopped:
		return fmt.Errorf("set-status %s: bad status %q", name, status)
	}
	v.Status = status
	return nil
}

func (s *State) setOption(name, key, value string) error {
	v, err := s.Volume(name)
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

func (s *State) resetOption(name, key string) error {
	v, err := s.Volume(name)
	if err != nil {
		return err
	}
	if key == "" {
		clear(v.Options)
	} else {
		delete(v.Options, key)
	}
	v.SpecVersion++
	return nil
}

func (s *State) setSecret(name, secret string) error {
	v, err := s.Volume(name)
	if err != nil {
		return err
	}
	if v.Secret != "" || secret == "" {
		return fmt.Errorf("set-secret %s: the volume has a secret, or none was given", name)
	}
	v.Secret = secret
	v.SpecVersion++
	return nil
}

func (s *State) setBrickPort(name, brick string, port int) error {
	v, err := s.Volume(name)
	if err != nil {
		return err
	}
	if port <= 0 || port > 65535 {
		return fmt.Errorf("set-brick-port %s: bad port %d", name, port)
	}
	i := slices.IndexFunc(v.Bricks, func(b Brick) bool { return b.ID == brick })
	if i < 0 {
		return api.Errorf(api.ErrNotFound, "volume %s has no brick %s", name, brick)
	}
	if v.Bricks[i].Port != port {
		v.Bricks[i].Port = port
		v.SpecVersion++
	}
	return nil
}

func (s *State) deleteVolume(name string) error {
	v, err := s.Volume(name)
	if err != nil {
		return err
	}
	if v.Status == api.StatusStarted {
		return api.Errorf(api.ErrState, "volume %s is started; stop it first (mortar volume stop %s)", name, name)
	}
	delete(s.Volumes, name)
	return nil
}

// Spec returns the spec clients use to mount v, with each brick's address
// made of the host of the node that serves it and the brick's own port.
func (s *State) Spec(v *Volume) volume.Spec {
	spec := LayoutSpec(v)
	spec.Options = maps.Clone(v.Options)
	spec.Version = v.SpecVersion
	for i, b := range v.Bricks {
		spec.Bricks[i].Addr = BrickAddr(s.Nodes[b.Node].Addr, b.Port)
	}
	return spec
}

// LayoutSpec returns the part of v's spec that does not depend on where
// the bricks run: name, id, type, replica or disperse sets and arbiters,
// and the secret the bricks require.
func LayoutSpec(v *Volume) volume.Spec {
	spec := volume.Spec{Name: v.Name, ID: v.ID, Type: v.Type, Replica: v.Replica, Disperse: v.Disperse, Redundancy: v.Redundancy,
		Layout: v.Layout, Previous: v.Previous, Secret: v.Secret}
	for _, b := range v.Bricks {
		spec.Bricks = append(spec.Bricks, volume.Brick{ID: b.ID, Host: b.Host, Path: b.Path, Arbiter: b.Arbiter})
	}
	return spec
}

// BrickAddr is where a brick listening on port of the node advertised as
// nodeAddr is reached: the node's host with the brick's port, or "" for a
// brick that never started.
func BrickAddr(nodeAddr string, port int) string {
	if port == 0 || nodeAddr == "" {
		return ""
	}
	host, _ := api.SplitHostPortDefault(nodeAddr)
	return net.JoinHostPort(host, strconv.Itoa(port))
}
